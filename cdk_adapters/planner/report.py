"""The plan as a terminal table and as JSON (``--json``), from one `PlanReport`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cdk_adapters.hosting.instance_types import GpuInstanceType
from cdk_adapters.planner.cells import CellPlan
from cdk_adapters.planner.cost import CostComparison, CostInputs
from cdk_adapters.planner.fit import GIB, MemoryPlan
from cdk_adapters.planner.gpu_lora import GpuLoraPlan
from cdk_adapters.planner.prices import InstancePrice
from cdk_adapters.planner.throughput import InstanceThroughput
from cdk_adapters.planner.traffic import TenantTraffic
from cdk_adapters.private.text_table import aligned_rows


@dataclass(frozen=True)
class PlanReport:
    instance: GpuInstanceType
    price: InstancePrice
    throughput: InstanceThroughput
    inputs: CostInputs
    tenants: tuple[TenantTraffic, ...]
    cost: CostComparison
    memory: MemoryPlan | None
    recommendation: str
    base_source: str | None = None
    gpu_lora: GpuLoraPlan | None = None
    """What the adapters' LoRA work costs on these GPUs, and whether to split the rank mix."""
    cells: CellPlan | None = None
    """The tenants spread over cells of a capped size (``--cell-cap``), against one endpoint."""


def _gib(value: float) -> float:
    return round(value / GIB, 3)


def to_json(report: PlanReport) -> dict[str, Any]:
    cost = report.cost
    document: dict[str, Any] = {
        "instance_type": report.instance.name,
        "price": {
            "usd_per_hour": report.price.usd_per_hour,
            "source": report.price.source,
            "checked_on": report.price.checked_on,
        },
        "hours_per_month": report.inputs.hours,
        "throughput": {
            "output_tokens_per_second": report.throughput.tokens_per_second,
            "estimate": report.throughput.estimate,
            "basis": report.throughput.basis,
        },
        "swap_headroom": report.inputs.swap_headroom,
        "tenants": [
            {
                "name": t.name,
                "requests_per_minute": t.requests_per_minute,
                "prompt_tokens": t.prompt_tokens,
                "output_tokens": t.output_tokens,
                "peak_factor": t.peak_factor,
                "output_tokens_per_second": round(t.output_tokens_per_second, 3),
            }
            for t in report.tenants
        ],
        "dedicated": {
            "instances": cost.dedicated_instances,
            "monthly_usd": round(cost.dedicated_monthly, 2),
            "utilisation": round(cost.dedicated_utilisation, 4),
        },
        "shared": {
            "instances": cost.shared_instances,
            "instances_needed": cost.shared_instances_needed,
            "sufficient": cost.shared_instances >= cost.shared_instances_needed,
            "monthly_usd": round(cost.shared_monthly, 2),
            "utilisation": round(cost.shared_utilisation, 4),
            "peak_utilisation": round(cost.shared_peak_utilisation, 4),
        },
        "savings": {"monthly_usd": round(cost.savings_monthly, 2), "fraction": round(cost.savings_fraction, 4)},
        "break_even": {
            "utilisation": round(cost.break_even_utilisation, 4),
            "peak_factor": round(cost.peak_factor, 4),
            "tenants": cost.break_even_tenants,
        },
        "recommendation": report.recommendation,
    }
    memory = report.memory
    if memory is not None:
        largest = memory.largest_adapter
        document["memory"] = {
            "base_source": report.base_source,
            "dtype": memory.inputs.dtype,
            "max_lora_rank": memory.inputs.max_lora_rank,
            "gpu_per_gpu_gib": {
                "budget": _gib(memory.gpu_budget_bytes),
                "base_weights": _gib(memory.base_per_gpu_bytes),
                "lora_slots": _gib(memory.lora_per_gpu_bytes),
                "kv_cache_one_sequence": _gib(memory.kv_reserve_per_gpu_bytes),
                "left_for_more_kv_cache": _gib(memory.gpu_left_bytes),
            },
            "gpu_bytes_per_slot": memory.inputs.slot_bytes,
            "max_loras": memory.inputs.max_loras,
            "max_loras_that_fit": memory.max_loras_that_fit,
            "host_gib": {"budget": _gib(memory.host_budget_bytes), "cpu_cache": _gib(memory.host_cache_bytes)},
            "max_cpu_loras": memory.inputs.max_cpu_loras,
            "max_cpu_loras_that_fit": memory.max_cpu_loras_that_fit,
            "adapters": [{"name": a.name, "host_bytes": a.host_bytes, "basis": a.basis} for a in memory.inputs.adapters],
            "largest_adapter": largest.name if largest else None,
            "recommended": {"max_loras": memory.recommended_max_loras, "max_cpu_loras": memory.recommended_max_cpu_loras},
            "problems": [str(p) for p in memory.problems],
            "notes": list(memory.notes),
        }
    if report.gpu_lora is not None:
        document["gpu_lora"] = report.gpu_lora.to_json()
    if report.cells is not None:
        document["cells"] = report.cells.to_json()
    return document


def _rows(rows: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"  {label.ljust(width)}  {value}" for label, value in rows]


def to_table(report: PlanReport) -> str:
    cost, price, tp = report.cost, report.price, report.throughput
    lines = [f"cdk-adapters plan: {cost.tenants} tenant(s) on {report.instance.name}"]
    lines += _rows(
        [
            ("price", f"${price.usd_per_hour:,.2f}/hour x {report.inputs.hours:g} h/month ({price.source})"),
            (
                "throughput",
                f"{tp.tokens_per_second:,.0f} output tokens/s per instance ({'estimate' if tp.estimate else 'given'})",
            ),
        ]
    )
    lines.append("")
    header = ("", "instances", "monthly", "utilisation")
    table = [
        ("dedicated", str(cost.dedicated_instances), f"${cost.dedicated_monthly:,.0f}", f"{cost.dedicated_utilisation:.1%}"),
        (
            "shared",
            str(cost.shared_instances)
            + ("" if cost.shared_instances == cost.shared_instances_needed else f" (needs {cost.shared_instances_needed})"),
            f"${cost.shared_monthly:,.0f}",
            f"{cost.shared_utilisation:.1%} (peak {cost.shared_peak_utilisation:.1%})",
        ),
    ]
    lines += ["  " + line for line in aligned_rows((header, *table))]
    even = cost.break_even_tenants
    lines += _rows(
        [
            ("savings", f"${cost.savings_monthly:,.0f}/month ({cost.savings_fraction:.1%})"),
            (
                "break-even",
                f"sharing pays while a tenant would keep its own GPU below {cost.break_even_utilisation:.0%} busy "
                f"((1 - {report.inputs.swap_headroom:g} swap headroom) / peak factor {cost.peak_factor:g}); "
                + (f"from {even} tenants at this load" if even else "never at this load"),
            ),
        ]
    )
    memory = report.memory
    if memory is not None:
        i = memory.inputs
        largest = memory.largest_adapter
        lines.append("")
        lines.append(f"memory ({i.dtype}, max_lora_rank {i.max_lora_rank}; base shapes from {report.base_source}):")
        lines += _rows(
            [
                (
                    "GPU, per GPU",
                    f"base {_gib(memory.base_per_gpu_bytes):.2f} + {i.max_loras} LoRA slots x {i.slot_bytes / GIB:.3f} "
                    f"+ KV for one {i.max_model_len}-token sequence {_gib(memory.kv_reserve_per_gpu_bytes):.2f} "
                    f"of {_gib(memory.gpu_budget_bytes):.2f} GiB; {_gib(memory.gpu_left_bytes):.2f} GiB left for KV cache",
                ),
                (
                    "host",
                    f"{i.max_cpu_loras} cached adapters x {(largest.host_bytes if largest else 0) / GIB:.3f} GiB "
                    f"(largest: {largest.name if largest else '-'}) of {_gib(memory.host_budget_bytes):.2f} GiB",
                ),
                (
                    "recommended",
                    f"max_loras {memory.recommended_max_loras}, max_cpu_loras {memory.recommended_max_cpu_loras} "
                    f"({i.active_adapters} active adapter(s); up to {memory.max_loras_that_fit} slots fit)",
                ),
            ]
        )
        lines += [f"  note: {note}" for note in memory.notes]
    if report.gpu_lora is not None:
        lines.append("")
        lines += report.gpu_lora.table_lines()
    if report.cells is not None:
        lines.append("")
        lines += report.cells.table_lines()
    lines.append("")
    lines.append(f"recommendation: {report.recommendation}")
    return "\n".join(lines) + "\n"


__all__ = ["PlanReport", "to_json", "to_table"]
