"""Dedicated vs shared: monthly cost, instances needed, utilisation, savings and break-even.

The model (docs/planner.md derives it):

* a **dedicated** tenant gets its own endpoint of ``max(1, ceil(peak demand / throughput))``
  instances; it needs no headroom for adapter swaps, since it serves one adapter;
* the **shared** endpoint needs ``max(min_instances, ceil(sum of peak demands / (throughput x (1 -
  swap_headroom))))`` instances: peaks are assumed to coincide (conservative), and a share of each
  instance is kept free for adapter swaps (loading an adapter into a GPU slot) and bursts;
* cost is instances x price per hour x hours per month.

Shared serving therefore stops saving money once a tenant's average utilisation ``u`` of a dedicated
GPU reaches ``(1 - swap_headroom) / peak_factor``: there the shared endpoint needs as many instances
as there are tenants. With the defaults (peak factor 2, headroom 20%) that is the tutorial's 40%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cdk_adapters.planner.traffic import TenantTraffic

HOURS_PER_MONTH = 730
"""AWS's billing convention (8,760 hours / 12), the tutorial's figure."""
DEFAULT_SWAP_HEADROOM = 0.2
DEFAULT_MIN_INSTANCES = 2
"""A shared endpoint carries every tenant: two instances, so one failure is not everybody's outage."""


@dataclass(frozen=True)
class CostInputs:
    price_per_hour: float
    throughput: float
    """Sustained output tokens/s of one instance."""
    hours: float = HOURS_PER_MONTH
    swap_headroom: float = DEFAULT_SWAP_HEADROOM
    min_instances: int = DEFAULT_MIN_INSTANCES
    shared_instances: int | None = None
    """A fixed shared fleet (the tutorial's 2) instead of the one capacity asks for."""

    def monthly(self, instances: int) -> float:
        return instances * self.price_per_hour * self.hours


@dataclass(frozen=True)
class CostComparison:
    tenants: int
    dedicated_instances: int
    dedicated_monthly: float
    shared_instances: int
    shared_instances_needed: int
    """What capacity asks for; equals `shared_instances` unless a fleet size was given."""
    shared_monthly: float
    savings_monthly: float
    savings_fraction: float
    dedicated_utilisation: float
    """Average busy share of a dedicated tenant's GPUs."""
    shared_utilisation: float
    shared_peak_utilisation: float
    """Busy share of the shared fleet at (coinciding) peaks, swap headroom not counted."""
    peak_factor: float
    """Demand-weighted peak factor of all tenants."""
    break_even_utilisation: float
    break_even_tenants: int | None
    """Fewest identical average tenants for which shared is cheaper (None: never, at this load)."""


def shared_instances_needed(peak_tokens_per_second: float, inputs: CostInputs) -> int:
    usable = inputs.throughput * (1 - inputs.swap_headroom)
    return max(inputs.min_instances, math.ceil(peak_tokens_per_second / usable - 1e-9))


def dedicated_instances_needed(tenant: TenantTraffic, inputs: CostInputs) -> int:
    return max(1, math.ceil(tenant.peak_output_tokens_per_second / inputs.throughput - 1e-9))


def break_even_utilisation(peak_factor: float, swap_headroom: float) -> float:
    """Average dedicated-GPU utilisation at which the shared fleet needs one instance per tenant."""
    return (1 - swap_headroom) / peak_factor


def weighted_peak_factor(tenants: Sequence[TenantTraffic]) -> float:
    demand = sum(t.output_tokens_per_second for t in tenants)
    if demand == 0:
        return sum(t.peak_factor for t in tenants) / len(tenants)
    return sum(t.peak_output_tokens_per_second for t in tenants) / demand


def costs_for_count(count: int, average: TenantTraffic, inputs: CostInputs) -> tuple[float, float]:
    """(dedicated, shared) monthly cost of `count` tenants like `average`: the chart's curves."""
    dedicated = count * dedicated_instances_needed(average, inputs)
    shared = shared_instances_needed(count * average.peak_output_tokens_per_second, inputs)
    return inputs.monthly(dedicated), inputs.monthly(shared)


def average_tenant(tenants: Sequence[TenantTraffic]) -> TenantTraffic:
    count = len(tenants)
    rpm = sum(t.requests_per_minute for t in tenants) / count
    demand = sum(t.output_tokens_per_second for t in tenants)
    output = round(demand * 60 / (rpm * count)) if rpm > 0 else round(sum(t.output_tokens for t in tenants) / count)
    prompt = round(sum(t.prompt_tokens for t in tenants) / count)
    return TenantTraffic("average", rpm, prompt, max(1, output), weighted_peak_factor(tenants))


def break_even_tenants(average: TenantTraffic, inputs: CostInputs, *, up_to: int = 1000) -> int | None:
    for count in range(1, up_to + 1):
        dedicated, shared = costs_for_count(count, average, inputs)
        if shared < dedicated:
            return count
    return None


def compare(tenants: Sequence[TenantTraffic], inputs: CostInputs) -> CostComparison:
    """The dedicated and shared fleets for `tenants`, priced."""
    if not tenants:
        raise ValueError("compare needs at least one tenant")
    dedicated = sum(dedicated_instances_needed(t, inputs) for t in tenants)
    peak = sum(t.peak_output_tokens_per_second for t in tenants)
    demand = sum(t.output_tokens_per_second for t in tenants)
    needed = shared_instances_needed(peak, inputs)
    shared = inputs.shared_instances if inputs.shared_instances is not None else needed
    dedicated_monthly = inputs.monthly(dedicated)
    shared_monthly = inputs.monthly(shared)
    peak_factor = weighted_peak_factor(tenants)
    return CostComparison(
        tenants=len(tenants),
        dedicated_instances=dedicated,
        dedicated_monthly=dedicated_monthly,
        shared_instances=shared,
        shared_instances_needed=needed,
        shared_monthly=shared_monthly,
        savings_monthly=dedicated_monthly - shared_monthly,
        savings_fraction=(dedicated_monthly - shared_monthly) / dedicated_monthly,
        dedicated_utilisation=demand / (dedicated * inputs.throughput),
        shared_utilisation=demand / (shared * inputs.throughput),
        shared_peak_utilisation=peak / (shared * inputs.throughput),
        peak_factor=peak_factor,
        break_even_utilisation=break_even_utilisation(peak_factor, inputs.swap_headroom),
        break_even_tenants=break_even_tenants(average_tenant(tenants), inputs),
    )


__all__ = [
    "DEFAULT_MIN_INSTANCES",
    "DEFAULT_SWAP_HEADROOM",
    "HOURS_PER_MONTH",
    "CostComparison",
    "CostInputs",
    "average_tenant",
    "break_even_tenants",
    "break_even_utilisation",
    "compare",
    "costs_for_count",
    "dedicated_instances_needed",
    "shared_instances_needed",
    "weighted_peak_factor",
]
