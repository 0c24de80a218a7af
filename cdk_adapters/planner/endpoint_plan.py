"""The plan of one shared endpoint per instance type, from the parsed inputs (``cdk-adapters plan``).

`EndpointPlanner` holds what every instance type is planned from: the gated manifest, the base
model's shapes, the tenants' traffic and LoRA ranks, and the `PlanSettings` given. Its `plan`
builds the `PlanReport` of one instance type at its price: throughput, dedicated vs shared cost,
the GPU and host memory fit, the recommendation and the adapters' GPU LoRA work. The LoRA slots
are sized for the largest rank served (the manifest's, or the what-if tenants' ranks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdk_adapters.gate.ranks import smallest_allowed_max_lora_rank
from cdk_adapters.planner import cost as cost_model
from cdk_adapters.planner.cells import plan_cells
from cdk_adapters.planner.fit import GIB, MemoryInputs, MemoryPlan, plan_memory
from cdk_adapters.planner.gpu_lora import TenantLora, plan_gpu_lora
from cdk_adapters.planner.lora_memory import gpu_bytes_per_slot
from cdk_adapters.planner.manifest_inputs import adapter_sizes
from cdk_adapters.planner.recommendation import recommend
from cdk_adapters.planner.report import PlanReport
from cdk_adapters.planner.swaps import zipf_rates
from cdk_adapters.planner.throughput import InstanceThroughput, given_throughput, instance_throughput

if TYPE_CHECKING:
    from cdk_adapters.gate import AdapterFacts
    from cdk_adapters.hosting.instance_types import GpuInstanceType
    from cdk_adapters.manifest.gating import ManifestPlan
    from cdk_adapters.planner.lora_memory import BaseModelShapes
    from cdk_adapters.planner.prices import InstancePrice
    from cdk_adapters.planner.traffic import TenantTraffic


@dataclass(frozen=True)
class PlanSettings:
    """The capacity and memory settings of a plan (the ``plan`` command's flags, docs/planner.md)."""

    hours: float
    swap_headroom: float
    min_instances: int
    shared_instances: int | None
    throughput: float | None
    """Measured output tokens/s of one instance; None: the shipped table."""
    dtype: str
    max_loras: int | None
    """GPU slots to check; None: the manifest's."""
    max_cpu_loras: int | None
    """Host cache size to check; None: the manifest's, else max_loras."""
    max_model_len: int
    gpu_memory_utilization: float
    host_reserve_gib: float
    active_adapters: int | None
    """Adapters in use at once; None: the tenants with traffic."""
    cell_cap: int | None = None
    """Adapters one cell may hold, to plan cells (`planner.cells`); None: one endpoint only."""


def manifest_lora_tenants(tenants: Sequence[TenantTraffic], manifest_plan: ManifestPlan) -> list[TenantLora]:
    """Each manifest row's rank, targets and request rate: its adapter's own rank and targets where gated."""
    facts = {adapter.name: adapter.facts for adapter in manifest_plan.adapters}
    return [
        TenantLora(
            t.name,
            _gated_max_rank(facts[t.name]) if t.name in facts else manifest_plan.max_lora_rank,
            t.requests_per_minute,
            tuple(facts[t.name].target_modules) if t.name in facts else None,
        )
        for t in tenants
    ]


def what_if_lora_tenants(
    tenants: Sequence[TenantTraffic], *, default_rank: int, ranks: Sequence[int] | None, zipf: float | None
) -> list[TenantLora]:
    """The what-if tenants' ranks (`ranks`, one per tenant, else all `default_rank`) and request rates
    (skewed by `zipf`: the k-th busiest gets 1/k^zipf of the weight; None: as given)."""
    chosen = list(ranks) if ranks is not None else [default_rank] * len(tenants)
    total = sum(t.requests_per_minute for t in tenants)
    rates = list(zipf_rates(len(tenants), zipf, total).values()) if zipf is not None else [t.requests_per_minute for t in tenants]
    return [TenantLora(t.name, rank, rate) for t, rank, rate in zip(tenants, chosen, rates)]


def _gated_max_rank(facts: AdapterFacts) -> int:
    """A gated adapter's highest rank: the gate refuses an adapter without a positive ``r``, so it is known."""
    assert facts.max_rank is not None
    return facts.max_rank


@dataclass(frozen=True)
class EndpointPlanner:
    """Plans the manifest's tenants on one instance type at a time (`plan`); build it with `create`."""

    manifest_plan: ManifestPlan
    base: BaseModelShapes
    tenants: Sequence[TenantTraffic]
    lora_tenants: Sequence[TenantLora]
    settings: PlanSettings
    lora_rank: int
    """The rank the LoRA slots are sized for: the largest served."""
    max_loras: int
    max_cpu_loras: int

    @classmethod
    def create(
        cls,
        manifest_plan: ManifestPlan,
        base: BaseModelShapes,
        tenants: Sequence[TenantTraffic],
        lora_tenants: Sequence[TenantLora],
        settings: PlanSettings,
    ) -> EndpointPlanner:
        """The planner, with the slot rank, GPU slots and host cache size resolved from `settings` and the manifest."""
        lora_rank = max(manifest_plan.max_lora_rank, smallest_allowed_max_lora_rank(t.rank for t in lora_tenants))
        max_loras = settings.max_loras or manifest_plan.max_loras
        max_cpu_loras = settings.max_cpu_loras or manifest_plan.max_cpu_loras or max_loras
        return cls(manifest_plan, base, tenants, lora_tenants, settings, lora_rank, max_loras, max_cpu_loras)

    @property
    def cache_smaller_than_slots(self) -> bool:
        """vLLM refuses a host cache (max_cpu_loras) smaller than the GPU slots (max_loras)."""
        return self.max_cpu_loras < self.max_loras

    def plan(self, instance: GpuInstanceType, price: InstancePrice) -> PlanReport:
        """The plan of the shared endpoint on `instance` at `price`."""
        settings = self.settings
        throughput = self._throughput(instance)
        inputs = cost_model.CostInputs(
            price_per_hour=price.usd_per_hour,
            throughput=throughput.tokens_per_second,
            hours=settings.hours,
            swap_headroom=settings.swap_headroom,
            min_instances=settings.min_instances,
            shared_instances=settings.shared_instances,
        )
        comparison = cost_model.compare(self.tenants, inputs)
        cells = None if settings.cell_cap is None else plan_cells(self.tenants, inputs, comparison, cap=settings.cell_cap)
        memory = self._memory(instance)
        return PlanReport(
            instance=instance,
            price=price,
            throughput=throughput,
            inputs=inputs,
            tenants=tuple(self.tenants),
            cost=comparison,
            memory=memory,
            recommendation=recommend(comparison, memory, instance.name, min_instances=settings.min_instances),
            base_source=self.base.source,
            gpu_lora=plan_gpu_lora(
                self.lora_tenants,
                gpu_model=instance.gpu_model,
                max_loras=self.max_loras,
                max_cpu_loras=self.max_cpu_loras,
                base_weight_gib=self.base.weight_bytes(settings.dtype) / GIB,
                copy_monthly_usd=price.usd_per_hour * settings.hours / max(1, instance.gpu_count),
            ),
            cells=cells,
        )

    def _throughput(self, instance: GpuInstanceType) -> InstanceThroughput:
        if self.settings.throughput is not None:
            return given_throughput(instance.name, self.settings.throughput)
        return instance_throughput(instance, self.base.parameters)

    def _memory(self, instance: GpuInstanceType) -> MemoryPlan:
        settings, base, dtype = self.settings, self.base, self.settings.dtype
        return plan_memory(
            MemoryInputs(
                instance=instance,
                dtype=dtype,
                base_weight_bytes=base.weight_bytes(dtype),
                slot_bytes=gpu_bytes_per_slot(base, self.lora_rank, dtype),
                kv_bytes_per_token=base.kv_bytes_per_token(dtype, self.manifest_plan.manifest.base_model.hidden_size),
                max_loras=self.max_loras,
                max_cpu_loras=self.max_cpu_loras,
                max_lora_rank=self.lora_rank,
                adapters=adapter_sizes(self.manifest_plan, base, dtype),
                active_adapters=settings.active_adapters or sum(1 for t in self.tenants if t.requests_per_minute > 0),
                gpu_memory_utilization=settings.gpu_memory_utilization,
                max_model_len=settings.max_model_len,
                host_reserve_gib=settings.host_reserve_gib,
            )
        )
