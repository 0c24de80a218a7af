"""The plan for an endpoint with instance pools: one plan per pool, and the worst case.

Managed instance scaling may run the whole fleet on any pool (the first while SageMaker has its
capacity, the next when it has not), so the fleet must be affordable and the adapters must fit on
every pool: the worst case is the dearest shared fleet, and the serving limits (``max_loras``,
``max_cpu_loras``) that fit on every pool, since one model configuration serves them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdk_adapters.planner.report import PlanReport, to_json, to_table


@dataclass(frozen=True)
class PoolsPlan:
    reports: tuple[PlanReport, ...]
    """One plan per pool, in priority order."""

    @property
    def dearest(self) -> PlanReport:
        """The pool whose shared fleet costs most a month (the first on a tie)."""
        return max(self.reports, key=lambda report: report.cost.shared_monthly)

    @property
    def fits_everywhere(self) -> bool:
        return all(report.memory is None or not report.memory.problems for report in self.reports)

    def recommended_limits(self) -> tuple[int, int] | None:
        """``(max_loras, max_cpu_loras)`` that fit on every pool; None without a memory plan."""
        memories = [report.memory for report in self.reports if report.memory is not None]
        if not memories:
            return None
        return min(m.recommended_max_loras for m in memories), min(m.recommended_max_cpu_loras for m in memories)

    def worst_case(self) -> dict[str, Any]:
        dearest = self.dearest
        limits = self.recommended_limits()
        return {
            "dearest_pool": dearest.instance.name,
            "shared_monthly_usd": round(dearest.cost.shared_monthly, 2),
            "shared_instances": max(report.cost.shared_instances for report in self.reports),
            "memory_fits_every_pool": self.fits_everywhere,
            "pools_that_do_not_fit": [r.instance.name for r in self.reports if r.memory is not None and r.memory.problems],
            "recommended_max_loras": limits[0] if limits else None,
            "recommended_max_cpu_loras": limits[1] if limits else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_pools": [report.instance.name for report in self.reports],
            "pools": [to_json(report) for report in self.reports],
            "worst_case": self.worst_case(),
        }

    def to_table(self) -> str:
        names = [report.instance.name for report in self.reports]
        lines = [f"cdk-adapters plan: instance pools {', then '.join(names)}; each pool planned alone, then the worst case", ""]
        for index, report in enumerate(self.reports, start=1):
            lines.append(f"--- pool {index} of {len(self.reports)} ---")
            lines.append(to_table(report))
        worst = self.worst_case()
        lines.append("worst case over the pools (managed scaling may run the fleet on any of them):")
        lines.append(
            f"  cost     the dearest pool is {worst['dearest_pool']}: {worst['shared_instances']} instance(s) at most, "
            f"${worst['shared_monthly_usd']:,.0f}/month shared"
        )
        if worst["recommended_max_loras"] is not None:
            unfit = ", ".join(worst["pools_that_do_not_fit"])
            fit = "the adapters fit on every pool" if worst["memory_fits_every_pool"] else f"the adapters do not fit on {unfit}"
            lines.append(
                f"  memory   {fit}; max_loras {worst['recommended_max_loras']}, max_cpu_loras "
                f"{worst['recommended_max_cpu_loras']} fit on every pool"
            )
        return "\n".join(lines) + "\n"


__all__ = ["PoolsPlan"]
