"""How many cells (identical, independent endpoints, each holding a share of the tenants) a
per-cell adapter cap asks for, and what they cost against one big endpoint and dedicated ones.

Cells trade money for blast radius: a base-model upgrade or a bad instance touches one cell's
tenants, not everybody's, but every cell keeps its own floor of instances (``min_instances``).
For planning, tenants are spread so cells carry even demand (largest peak first, into the least
loaded cell with room); a service places real tenants by hashing their family, which spreads them
about as evenly once there are many.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from cdk_adapters.planner.cost import CostComparison, CostInputs, shared_instances_needed
from cdk_adapters.planner.traffic import TenantTraffic


@dataclass(frozen=True)
class Cell:
    tenants: tuple[TenantTraffic, ...]
    instances: int
    monthly: float


@dataclass(frozen=True)
class CellPlan:
    cap: int
    """Adapters one cell may hold."""
    cells: tuple[Cell, ...]
    one_endpoint_instances: int
    one_endpoint_monthly: float
    dedicated_monthly: float

    @property
    def monthly(self) -> float:
        return sum(cell.monthly for cell in self.cells)

    @property
    def largest_cell(self) -> int:
        """The most tenants one failure or upgrade can touch."""
        return max(len(cell.tenants) for cell in self.cells)

    def to_json(self) -> dict[str, object]:
        return {
            "cap": self.cap,
            "cells": len(self.cells),
            "tenants_per_cell": [len(cell.tenants) for cell in self.cells],
            "instances_per_cell": [cell.instances for cell in self.cells],
            "monthly_usd": round(self.monthly, 2),
            "one_endpoint": {"instances": self.one_endpoint_instances, "monthly_usd": round(self.one_endpoint_monthly, 2)},
            "dedicated_monthly_usd": round(self.dedicated_monthly, 2),
            "largest_cell_tenants": self.largest_cell,
        }

    def table_lines(self) -> list[str]:
        tenants = sum(len(cell.tenants) for cell in self.cells)
        extra = self.monthly - self.one_endpoint_monthly
        return [
            f"cells (at most {self.cap} adapter(s) each):",
            f"  {len(self.cells)} cell(s) of {', '.join(str(len(c.tenants)) for c in self.cells)} tenant(s), "
            f"{', '.join(str(c.instances) for c in self.cells)} instance(s): ${self.monthly:,.0f}/month",
            f"  one endpoint: {self.one_endpoint_instances} instance(s), ${self.one_endpoint_monthly:,.0f}/month "
            f"(cells cost ${extra:,.0f} more); dedicated: ${self.dedicated_monthly:,.0f}/month",
            f"  blast radius: a cell's upgrade or failure touches at most {self.largest_cell} of {tenants} tenant(s)",
        ]


def cell_count(tenants: int, cap: int) -> int:
    """The fewest cells that hold `tenants` adapters at `cap` each."""
    return max(1, math.ceil(tenants / cap))


def plan_cells(tenants: Sequence[TenantTraffic], inputs: CostInputs, comparison: CostComparison, *, cap: int) -> CellPlan:
    """Spread `tenants` over the fewest cells of at most `cap` adapters, each sized and priced as
    a shared endpoint of its own (its own ``min_instances`` floor included)."""
    count = cell_count(len(tenants), cap)
    members: list[list[TenantTraffic]] = [[] for _ in range(count)]
    demand = [0.0] * count
    # The open cells by (demand, tenants, index): the least loaded first; a full cell leaves the heap.
    open_cells = [(0.0, 0, index) for index in range(count)]
    for tenant in sorted(tenants, key=lambda t: (-t.peak_output_tokens_per_second, t.name)):
        _, _, target = heapq.heappop(open_cells)
        members[target].append(tenant)
        demand[target] += tenant.peak_output_tokens_per_second
        if len(members[target]) < cap:
            heapq.heappush(open_cells, (demand[target], len(members[target]), target))
    cells = []
    for group, peak in zip(members, demand):
        instances = shared_instances_needed(peak, inputs)
        cells.append(Cell(tuple(group), instances, inputs.monthly(instances)))
    return CellPlan(
        cap=cap,
        cells=tuple(cells),
        one_endpoint_instances=comparison.shared_instances_needed,
        one_endpoint_monthly=inputs.monthly(comparison.shared_instances_needed),
        dedicated_monthly=comparison.dedicated_monthly,
    )
