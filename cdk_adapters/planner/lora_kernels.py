"""What LoRA costs on the GPU per decoding step: vLLM 0.31.0's own kernels, measured, and interpolated.

Measured 2026-12-04 on one NVIDIA H200 (bf16, torch 2.11, Triton 3.6) with vLLM 0.31.0's Triton
kernels (``lora_shrink``/``lora_expand``, vLLM's token-to-adapter mapping, default kernel configs,
``max_loras`` 16) on the fused linear layers of one decoder layer of an 8B Llama-class model
(``qkv_proj`` 4096→6144, ``o_proj`` 4096→4096, ``gate_up_proj`` 4096→28672, ``down_proj``
14336→4096), each case checked against a plain-torch reference, CUDA graphs over 8 weight copies,
medians. Kernel level only: attention, sampling and the scheduler are not in these numbers, so a
whole request's overhead is smaller (published end-to-end figures for vLLM V1 at rank 8: 3-11%).

Two facts drive the planner: the cost grows with the number of *distinct* adapters in a batch
(`ALL_LINEAR_RANK16`), and vLLM pads every adapter slot to ``max_lora_rank`` and runs its kernels
over the padded rank, so every tenant pays the endpoint's largest rank (`PADDED_RANK`). Figures for
another GPU are estimates from these, and say so (`basis`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MEASURED_GPU = "H200"
SOURCE = (
    "vLLM 0.31.0 LoRA kernels (lora_shrink/lora_expand) on one NVIDIA H200, bf16, one decoder layer of an "
    "8B Llama-class model, measured 2026-12-04"
)

ALL_LINEAR_RANK16: dict[tuple[int, int], tuple[float, float]] = {
    # (tokens in the batch, distinct adapters) -> (base linear µs, base + LoRA µs), rank-16 adapters on all four fused modules
    (1, 1): (114.6, 177.0),
    (8, 1): (116.3, 170.6),
    (8, 4): (116.3, 206.9),
    (8, 8): (116.2, 255.4),
    (32, 1): (120.0, 175.4),
    (32, 4): (119.1, 211.5),
    (32, 16): (120.0, 363.7),
    (128, 1): (132.5, 262.2),
    (128, 16): (132.8, 402.5),
    (512, 1): (303.6, 548.6),
    (512, 16): (310.4, 674.8),
}
"""One decoder layer's linear time, rank-16 all-linear adapters."""

PADDED_RANK: dict[tuple[int, int], dict[int, float]] = {
    # (tokens, distinct adapters) -> {max_lora_rank: LoRA µs added per layer}, rank-16 adapters (rank 8 at R = 8)
    (1, 1): {8: 69, 16: 62, 32: 68, 64: 90, 128: 143, 256: 235},
    (8, 8): {8: 151, 16: 139, 32: 154, 64: 248, 128: 412, 256: 773},
    (32, 16): {8: 270, 16: 244, 32: 255, 64: 397, 128: 679, 256: 1268},
    (128, 16): {8: 295, 16: 270, 32: 238, 64: 277, 128: 368, 256: 588},
    (512, 16): {8: 391, 16: 364, 32: 307, 64: 355, 128: 473, 256: 690},
}
"""The same adapters in slots padded to a larger ``max_lora_rank`` (three runs on the same kind of machine)."""

MODULE_SHARE_AT_ONE_TOKEN = {"qkv_proj": 15.6, "o_proj": 9.2, "gate_up_proj": 27.6, "down_proj": 10.0}
"""µs each fused module's LoRA adds at 1 token, 1 adapter: an attention-only adapter pays about 40%
of an all-linear one's LoRA time (measured at 1 token only: elsewhere an estimate)."""
_FUSED = {
    "q_proj": ("qkv_proj", 4096 / 6144),
    "k_proj": ("qkv_proj", 1024 / 6144),
    "v_proj": ("qkv_proj", 1024 / 6144),
    "o_proj": ("o_proj", 1.0),
    "gate_proj": ("gate_up_proj", 0.5),
    "up_proj": ("gate_up_proj", 0.5),
    "down_proj": ("down_proj", 1.0),
}
"""Which fused module a PEFT target sits in, and its share of that module's output width (8B Llama)."""

SWAP_FROM_HOST_MS = (7.0, 19.0)
"""One rank-16 all-linear 8B adapter copied in from vLLM's CPU cache, pinned memory: 7-19 ms over
three runs (pageable: 18-37 ms). Set by ~900 small host-side copies, barely by rank."""


@dataclass(frozen=True)
class LoraStepCost:
    """LoRA's share of one decoder layer's linear time at one batch shape."""

    max_lora_rank: int
    tokens: int
    distinct_adapters: int
    base_us: float
    lora_us: float
    basis: str
    """"measured on H200" at the tables' own points on an H200; "interpolated from ..." between
    them; "estimated from ..." on another GPU or outside the tables."""

    @property
    def share(self) -> float:
        """LoRA time over the base layer's linear time (0.54: the layer's linear work takes 54% longer)."""
        return self.lora_us / self.base_us


def _interpolate(points: Sequence[tuple[float, float]], x: float) -> float:
    """Piecewise linear in log(x) through sorted (x, y) points; flat beyond the ends."""
    points = sorted(points)
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= x <= x1:
            if x1 == x0:
                return y0
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + t * (y1 - y0)
    raise AssertionError("unreachable")


def _rank16_at(tokens: int, distinct: int) -> tuple[float, float]:
    """(base µs, LoRA µs) of rank-16 all-linear adapters, interpolated over distinct adapters at
    each measured token count, then over tokens."""
    rows: dict[int, list[tuple[float, float, float]]] = {}
    for (t, d), (base, total) in ALL_LINEAR_RANK16.items():
        rows.setdefault(t, []).append((d, base, total - base))
    base_points, lora_points = [], []
    for t, entries in sorted(rows.items()):
        usable = min(distinct, t)  # a batch of t tokens holds at most t adapters
        base_points.append((t, _interpolate([(d, b) for d, b, _ in entries], usable)))
        lora_points.append((t, _interpolate([(d, lora) for d, _, lora in entries], usable)))
    return _interpolate(base_points, tokens), _interpolate(lora_points, tokens)


def _rank_factor(max_lora_rank: int, tokens: int) -> float:
    """LoRA time at slots padded to `max_lora_rank` over its time at 16, interpolated over tokens
    (the padded table's rows) and, between its columns, over log(rank)."""
    per_row = []
    for (t, _), by_rank in sorted(PADDED_RANK.items()):
        ranks = sorted(by_rank)
        factor = _interpolate([(r, by_rank[r] / by_rank[16]) for r in ranks], max_lora_rank)
        if max_lora_rank > ranks[-1]:  # past 256: grow with rank from the last two columns (estimate)
            slope = (by_rank[256] - by_rank[128]) / by_rank[16] / 128
            factor = by_rank[256] / by_rank[16] + slope * (max_lora_rank - 256)
        per_row.append((t, factor))
    return _interpolate(per_row, tokens)


def module_share(target_modules: Iterable[str]) -> float:
    """Share of an all-linear adapter's LoRA time that `target_modules` (PEFT leaf names) cost."""
    total = sum(MODULE_SHARE_AT_ONE_TOKEN.values())
    fused: dict[str, float] = {}
    for name in set(target_modules):
        if name in _FUSED:
            module, width = _FUSED[name]
            fused[module] = min(1.0, fused.get(module, 0.0) + width)
    return sum(MODULE_SHARE_AT_ONE_TOKEN[module] * width for module, width in fused.items()) / total


def step_cost(
    max_lora_rank: int,
    tokens: int,
    distinct_adapters: int,
    *,
    gpu_model: str = MEASURED_GPU,
    target_modules: Iterable[str] | None = None,
) -> LoraStepCost:
    """LoRA's cost in one decoder layer at a batch of `tokens` holding `distinct_adapters`, in slots
    of `max_lora_rank`; `target_modules` None: all-linear adapters."""
    tokens, distinct = max(1, tokens), max(1, min(distinct_adapters, tokens))
    rank = max(8, max_lora_rank)  # rank-1 slots: the kernels' tiles are wider still (as 8, an estimate)
    share = module_share(target_modules) if target_modules is not None else 1.0
    base, lora16 = _rank16_at(tokens, distinct)
    padded_point = PADDED_RANK.get((tokens, distinct), {})
    if rank in padded_point:
        lora = padded_point[rank] if rank != 16 else lora16
        on_points = True
    else:
        lora = lora16 * _rank_factor(rank, tokens)
        on_points = rank == 16 and (tokens, distinct) in ALL_LINEAR_RANK16
    lora *= share
    if gpu_model != MEASURED_GPU:
        basis = f"estimated from the {MEASURED_GPU} measurements ({gpu_model} not measured)"
    elif on_points and target_modules is None and max_lora_rank >= 8:
        basis = f"measured on {MEASURED_GPU}"
    else:
        basis = f"interpolated from the {MEASURED_GPU} measurements"
    return LoraStepCost(max_lora_rank, tokens, distinct, base, lora, basis)


__all__ = ["MEASURED_GPU", "SOURCE", "SWAP_FROM_HOST_MS", "LoraStepCost", "module_share", "step_cost"]
