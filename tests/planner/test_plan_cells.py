"""`plan --cell-cap N`: the fewest cells of at most N adapters, each priced as an endpoint of its
own with its own instance floor, against one endpoint and dedicated endpoints."""

from __future__ import annotations

import pytest

from cdk_adapters.planner.cells import cell_count, plan_cells
from cdk_adapters.planner.cost import CostInputs, compare
from cdk_adapters.planner.traffic import TenantTraffic, identical_tenants
from tests.planner.cli_run import plan

INPUTS = CostInputs(price_per_hour=1.0, throughput=1000.0, min_instances=2)
WHAT_IF = ["--num-layers", "32", "--tenants", "12", "--requests-per-minute", "30", "--output-tokens", "300"]


def cells_for(tenants, cap):
    return plan_cells(tenants, INPUTS, compare(tenants, INPUTS), cap=cap)


@pytest.mark.parametrize(
    ("tenants", "cap", "cells"), [(12, 5, 3), (12, 4, 3), (12, 12, 1), (12, 100, 1), (1, 1, 1), (10_000, 1_000, 10)]
)
def test_the_fewest_cells_that_hold_every_tenant(tenants, cap, cells):
    assert cell_count(tenants, cap) == cells


def test_even_tenants_spread_evenly_and_every_cell_keeps_its_own_floor():
    tenants = identical_tenants(12, requests_per_minute=6, prompt_tokens=0, output_tokens=100)
    result = cells_for(tenants, 5)
    assert [len(cell.tenants) for cell in result.cells] == [4, 4, 4]
    assert all(cell.instances >= INPUTS.min_instances for cell in result.cells)
    assert result.monthly == sum(cell.monthly for cell in result.cells) == 3 * INPUTS.monthly(2)
    assert result.one_endpoint_monthly == INPUTS.monthly(2)  # one endpoint of 12 light tenants needs only its floor
    assert result.largest_cell == 4


def test_no_cell_exceeds_the_cap_and_every_tenant_is_placed_once():
    tenants = [TenantTraffic("heavy", 600, 0, 500)] + [TenantTraffic(f"light-{i}", 6, 0, 100) for i in range(9)]
    result = cells_for(tenants, 4)
    placed = [tenant.name for cell in result.cells for tenant in cell.tenants]
    assert sorted(placed) == sorted(t.name for t in tenants)
    assert len(result.cells) == 3 and all(len(cell.tenants) <= 4 for cell in result.cells)
    heavy_cell = next(cell for cell in result.cells if any(t.name == "heavy" for t in cell.tenants))
    assert len(heavy_cell.tenants) == min(len(cell.tenants) for cell in result.cells)  # the heavy tenant's cell takes fewest


def test_one_cell_costs_what_one_endpoint_costs():
    tenants = identical_tenants(12, requests_per_minute=600, prompt_tokens=0, output_tokens=300)
    result = cells_for(tenants, 12)
    assert len(result.cells) == 1 and result.monthly == result.one_endpoint_monthly


def test_the_command_prints_and_returns_the_cells():
    table = plan(*WHAT_IF, "--cell-cap", "5")
    assert table.status == 0
    assert "cells (at most 5 adapter(s) each):" in table.out
    assert "3 cell(s) of 4, 4, 4 tenant(s)" in table.out
    assert "touches at most 4 of 12 tenant(s)" in table.out
    document = plan(*WHAT_IF, "--cell-cap", "5", "--json").json()["cells"]
    assert document["cells"] == 3 and document["tenants_per_cell"] == [4, 4, 4]
    assert document["monthly_usd"] >= document["one_endpoint"]["monthly_usd"]
    assert "cells" not in plan(*WHAT_IF, "--json").json()


@pytest.mark.parametrize("cap", ["0", "-3"])
def test_a_cap_below_one_is_one_line(cap):
    result = plan(*WHAT_IF, "--cell-cap", cap)
    assert result.status == 1 and result.out == ""
    assert f"plan: --cell-cap: must be > 0, got {cap}" in result.err
