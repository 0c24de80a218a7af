"""One sentence a team can act on: share, keep dedicated endpoints, or fix the fit first."""

from __future__ import annotations

from cdk_adapters.planner.cost import CostComparison
from cdk_adapters.planner.fit import MemoryPlan


def recommend(cost: CostComparison, memory: MemoryPlan | None, instance_type: str, *, min_instances: int | None = None) -> str:
    if memory is not None and memory.problems:
        return f"fix the memory problems first: the adapters do not fit on {instance_type} as configured"
    if cost.shared_instances < cost.shared_instances_needed:
        return (
            f"the fixed shared fleet of {cost.shared_instances} is too small: at peak it would run at "
            f"{cost.shared_peak_utilisation:.0%}; plan {cost.shared_instances_needed} x {instance_type}"
        )
    if cost.savings_monthly > 0:
        tail = ""
        if memory is not None:
            tail = f"; set max_loras {memory.recommended_max_loras} and max_cpu_loras {memory.recommended_max_cpu_loras}"
        return (
            f"share: one endpoint of {cost.shared_instances} x {instance_type} for all {cost.tenants} adapters saves "
            f"${cost.savings_monthly:,.0f}/month ({cost.savings_fraction:.1%}){tail}"
        )
    if cost.shared_instances >= cost.dedicated_instances:
        # The fleet's floor, not the load, is what costs more: say which floor.
        if cost.shared_instances > cost.shared_instances_needed:
            floor = f"the fixed shared fleet is {cost.shared_instances} (--shared-instances)"
        elif min_instances is not None and cost.shared_instances <= min_instances:
            floor = f"the shared fleet is at least {min_instances} (--min-instances, so one failure is not an outage)"
        else:
            floor = f"the shared fleet needs {cost.shared_instances}"
        return (
            f"keep dedicated endpoints: {cost.tenants} tenant(s) need {cost.dedicated_instances} dedicated "
            f"instance(s) and {floor}, so sharing saves nothing"
        )
    return (
        f"keep dedicated endpoints: each tenant keeps its own GPU {cost.dedicated_utilisation:.0%} busy, at or above "
        f"the {cost.break_even_utilisation:.0%} break-even, so sharing saves nothing"
    )


__all__ = ["recommend"]
