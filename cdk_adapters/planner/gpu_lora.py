"""What the adapters' LoRA work costs on the endpoint's GPUs, and whether a rank mix should be split.

Built from `lora_kernels` (the measured kernel table) and `swaps` (the LRU replay): the LoRA share of
the layers' linear time at two decode batch shapes, what the endpoint's ``max_lora_rank`` costs the
tenants whose own rank is smaller, the swaps the request mix causes, and a recommendation. Every
figure carries its basis: measured on the H200, interpolated from it, or estimated for another GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK, smallest_allowed_max_lora_rank
from cdk_adapters.planner import lora_kernels, swaps
from cdk_adapters.planner.lora_kernels import LoraStepCost

DECODE_BATCHES = (8, 32)
"""Tokens per step at which the overhead is shown: decoding a few and a few dozen sequences."""
SAME_COST_UP_TO_RANK = 32
"""At decode batch sizes the kernels' tiles are at least this wide: ranks up to 32 cost the same."""
WORTH_SPLITTING = 1.2
"""A split is recommended when the small-rank tenants' LoRA time would fall by at least this factor."""


@dataclass(frozen=True)
class TenantLora:
    name: str
    rank: int
    requests_per_minute: float
    target_modules: tuple[str, ...] | None = None
    """PEFT leaf names; None: all-linear (what the measured table is)."""


@dataclass(frozen=True)
class TierSplit:
    small_rank: int
    small_tenants: tuple[str, ...]
    large_rank: int
    large_tenants: tuple[str, ...]
    small_at_endpoint_rank: tuple[LoraStepCost, ...]
    small_in_own_tier: tuple[LoraStepCost, ...]
    extra_base_copy_gib: float | None
    """A second tier holds the base weights again, on the same instances (None: base size unknown)."""
    extra_copy_monthly_usd: float | None = None
    """What one more base copy costs a month: one GPU's share of an instance (None: price unknown)."""

    @property
    def speedup(self) -> float:
        """How many times less LoRA time the small-rank tenants spend in a tier of their own (the
        smallest gain over the decode batches)."""
        return min(a.lora_us / b.lora_us for a, b in zip(self.small_at_endpoint_rank, self.small_in_own_tier))


@dataclass(frozen=True)
class GpuLoraPlan:
    gpu_model: str
    max_lora_rank: int
    max_loras: int
    max_cpu_loras: int
    at_batches: tuple[LoraStepCost, ...]
    split: TierSplit | None
    swap: swaps.SwapEstimate
    requests_per_second: float

    @property
    def swaps_per_second(self) -> float:
        return self.swap.gpu_miss_rate * self.requests_per_second

    @property
    def swap_ms_per_second(self) -> tuple[float, float]:
        low, high = lora_kernels.SWAP_FROM_HOST_MS
        return self.swaps_per_second * low, self.swaps_per_second * high

    @property
    def host_loads_per_second(self) -> float:
        return self.swap.host_miss_rate * self.requests_per_second

    def recommendation(self) -> str:
        if self.split is None:
            return f"one tier: every adapter's rank is within {self.max_lora_rank}, which costs the others nothing extra"
        split = self.split
        copy = (
            f"; a second tier holds the base weights again ({split.extra_base_copy_gib:.1f} GiB per instance)"
            if split.extra_base_copy_gib is not None
            else ""
        )
        dollars = (
            f", at least one more copy: about ${split.extra_copy_monthly_usd:,.0f}/month"
            if split.extra_copy_monthly_usd is not None
            else ""
        )
        return (
            f"split by rank: {len(split.small_tenants)} tenant(s) of rank <= {split.small_rank} spend {split.speedup:.1f}x the LoRA "
            f"time in slots of rank {split.large_rank} that {len(split.large_tenants)} tenant(s) need{copy}{dollars}; "
            f"serve them as two rank tiers: serving.tiers: [{{max_lora_rank: {split.small_rank}}}, "
            f"{{max_lora_rank: {split.large_rank}}}] (RankTier in the construct)"
        )

    def to_json(self) -> dict[str, Any]:
        def cost(c: LoraStepCost) -> dict[str, Any]:
            return {
                "tokens": c.tokens,
                "distinct_adapters": c.distinct_adapters,
                "max_lora_rank": c.max_lora_rank,
                "base_us": round(c.base_us, 1),
                "lora_us": round(c.lora_us, 1),
                "share": round(c.share, 3),
                "basis": c.basis,
            }

        low, high = self.swap_ms_per_second
        document: dict[str, Any] = {
            "source": lora_kernels.SOURCE,
            "gpu_model": self.gpu_model,
            "max_lora_rank": self.max_lora_rank,
            "per_decoder_layer": [cost(c) for c in self.at_batches],
            "swaps": {
                "requests_replayed": self.swap.requests,
                "gpu_miss_rate": round(self.swap.gpu_miss_rate, 5),
                "host_miss_rate": round(self.swap.host_miss_rate, 5),
                "swaps_per_second": round(self.swaps_per_second, 4),
                "swap_ms_per_second": [round(low, 2), round(high, 2)],
                "disk_loads_per_second": round(self.host_loads_per_second, 4),
                "basis": f"LRU replay of the mix; swap time measured on {lora_kernels.MEASURED_GPU} (8B, rank 16, pinned memory)",
            },
            "split": None,
            "recommendation": self.recommendation(),
        }
        if self.split is not None:
            split = self.split
            document["split"] = {
                "small_rank": split.small_rank,
                "small_tenants": list(split.small_tenants),
                "large_rank": split.large_rank,
                "large_tenants": list(split.large_tenants),
                "small_at_endpoint_rank": [cost(c) for c in split.small_at_endpoint_rank],
                "small_in_own_tier": [cost(c) for c in split.small_in_own_tier],
                "speedup": round(split.speedup, 2),
                "extra_base_copy_gib": None if split.extra_base_copy_gib is None else round(split.extra_base_copy_gib, 2),
                "extra_copy_monthly_usd": None
                if split.extra_copy_monthly_usd is None
                else round(split.extra_copy_monthly_usd, 2),
            }
        return document

    def table_lines(self) -> list[str]:
        lines = [f"LoRA on the GPU ({lora_kernels.SOURCE})"]
        for c in self.at_batches:
            lines.append(
                f"  {c.tokens:>3} tokens/step, {c.distinct_adapters} distinct adapter(s), slots of rank {c.max_lora_rank}: "
                f"LoRA adds {c.share:.0%} to the layers' linear time ({c.basis})"
            )
        low, high = self.swap_ms_per_second
        lines.append(
            f"  swaps from host memory: {self.swaps_per_second:.3f}/s ({self.swap.gpu_miss_rate:.2%} of requests; "
            f"{low:.1f}-{high:.1f} ms of GPU time per second); disk loads {self.host_loads_per_second:.3f}/s"
        )
        lines.append(f"  {self.recommendation()}")
        return lines


def plan_gpu_lora(
    tenants: Sequence[TenantLora],
    *,
    gpu_model: str,
    max_loras: int,
    max_cpu_loras: int,
    base_weight_gib: float | None,
    copy_monthly_usd: float | None = None,
    requests: int = swaps.DEFAULT_REQUESTS,
    seed: int = 0,
) -> GpuLoraPlan:
    """The LoRA cost of `tenants` on one endpoint whose slots are sized for the largest rank.

    :param copy_monthly_usd: what one base copy (one GPU's share of an instance) costs a month,
        the price of a second tier's extra copy. Default None: not priced.
    """
    max_rank = smallest_allowed_max_lora_rank(t.rank for t in tenants) if tenants else VLLM_DEFAULT_MAX_LORA_RANK
    active = sum(1 for t in tenants if t.requests_per_minute > 0) or 1
    targets = _common_targets(tenants)

    def at(rank: int, distinct_cap: int) -> tuple[LoraStepCost, ...]:
        return tuple(
            lora_kernels.step_cost(rank, batch, min(batch, max_loras, distinct_cap), gpu_model=gpu_model, target_modules=targets)
            for batch in DECODE_BATCHES
        )

    split = None
    small = [t for t in tenants if t.rank <= SAME_COST_UP_TO_RANK]
    large = [t for t in tenants if t.rank > SAME_COST_UP_TO_RANK]
    if small and large:
        small_rank = smallest_allowed_max_lora_rank(t.rank for t in small)
        small_active = sum(1 for t in small if t.requests_per_minute > 0) or 1
        candidate = TierSplit(
            small_rank=small_rank,
            small_tenants=tuple(t.name for t in small),
            large_rank=max_rank,
            large_tenants=tuple(t.name for t in large),
            small_at_endpoint_rank=at(max_rank, small_active),
            small_in_own_tier=at(small_rank, small_active),
            extra_base_copy_gib=base_weight_gib,
            extra_copy_monthly_usd=copy_monthly_usd,
        )
        split = candidate if candidate.speedup >= WORTH_SPLITTING else None
    rates = {t.name: t.requests_per_minute for t in tenants}
    return GpuLoraPlan(
        gpu_model=gpu_model,
        max_lora_rank=max_rank,
        max_loras=max_loras,
        max_cpu_loras=max_cpu_loras,
        at_batches=at(max_rank, active),
        split=split,
        swap=swaps.replay(rates, gpu_slots=max_loras, host_slots=max_cpu_loras, requests=requests, seed=seed),
        requests_per_second=sum(rates.values()) / 60.0,
    )


def _common_targets(tenants: Sequence[TenantLora]) -> tuple[str, ...] | None:
    """The tenants' target modules when all say (the union: what the batch's kernels run over)."""
    if not tenants or any(t.target_modules is None for t in tenants):
        return None
    return tuple(sorted({module for t in tenants for module in t.target_modules or ()}))


__all__ = ["GpuLoraPlan", "TenantLora", "TierSplit", "plan_gpu_lora"]
