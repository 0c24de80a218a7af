"""The cost model: the tutorial reproduced exactly, the break-even derivation, capacity by hand."""

from __future__ import annotations

import math

import pytest

from cdk_adapters.planner.cost import CostInputs, break_even_utilisation, compare, costs_for_count
from cdk_adapters.planner.traffic import TenantTraffic, identical_tenants
from tests.planner.cli_run import plan

TUTORIAL = ["--num-layers", "32", "--tenants", "12", "--requests-per-minute", "8", "--output-tokens", "600"]


def test_tutorial_example_reproduced_exactly():
    """$1.20/h, 730 h, 12 tenants, 2 shared instances -> $10,512 dedicated, $1,752 shared, 83.3% less."""
    result = plan(*TUTORIAL, "--price-per-hour", "1.20", "--hours", "730", "--shared-instances", "2", "--json")
    assert result.status == 0, result.err
    document = result.json()
    assert document["dedicated"]["instances"] == 12
    assert document["dedicated"]["monthly_usd"] == 10512.0
    assert document["shared"]["instances"] == 2
    assert document["shared"]["monthly_usd"] == 1752.0
    assert document["savings"]["monthly_usd"] == 8760.0
    assert round(document["savings"]["fraction"] * 100, 1) == 83.3
    # By the L4 throughput estimate two instances cannot carry the tutorial's load: the JSON says so.
    assert document["shared"]["sufficient"] is (document["shared"]["instances"] >= document["shared"]["instances_needed"])
    assert document["shared"]["sufficient"] is False


def test_tutorial_table_shows_the_same_figures():
    result = plan(*TUTORIAL, "--price-per-hour", "1.20", "--shared-instances", "2")
    assert result.status == 0, result.err
    assert "$10,512" in result.out and "$1,752" in result.out and "83.3%" in result.out


def test_shipped_price_for_the_tutorial_instance_is_the_tutorials():
    document = plan(*TUTORIAL, "--shared-instances", "2", "--json").json()
    assert document["instance_type"] == "ml.g6.2xlarge"
    assert document["price"]["usd_per_hour"] == 1.20
    assert document["dedicated"]["monthly_usd"] == 10512.0


def test_break_even_is_forty_percent_with_the_defaults():
    """(1 - 20% swap headroom) / peak factor 2 = 40%."""
    assert break_even_utilisation(peak_factor=2.0, swap_headroom=0.2) == pytest.approx(0.40)
    document = plan(*TUTORIAL, "--json").json()
    assert document["break_even"]["utilisation"] == 0.4


@pytest.mark.parametrize("utilisation, shared_cheaper", [(0.30, True), (0.39, True), (0.41, False), (0.45, False)])
def test_shared_stops_paying_at_the_break_even_utilisation(utilisation, shared_cheaper):
    """At a per-tenant dedicated utilisation u, 100 tenants on a shared fleet need ceil(100 u 2 / 0.8) instances."""
    throughput = 1000.0
    inputs = CostInputs(price_per_hour=1.0, throughput=throughput, min_instances=1)
    # u = rpm * output / 60 / throughput  ->  rpm = u * throughput * 60 / output
    tenants = identical_tenants(100, requests_per_minute=utilisation * throughput * 60 / 600, prompt_tokens=0, output_tokens=600)
    comparison = compare(tenants, inputs)
    assert comparison.dedicated_utilisation == pytest.approx(utilisation)
    assert comparison.shared_instances == math.ceil(100 * utilisation * 2 / 0.8 - 1e-9)
    assert (comparison.shared_monthly < comparison.dedicated_monthly) is shared_cheaper


def test_capacity_by_hand():
    """12 x 8 req/min x 600 tokens = 960 tokens/s; peak x2 = 1,920; 438 tokens/s x 0.8 usable -> 6 instances."""
    tenants = identical_tenants(12, requests_per_minute=8, prompt_tokens=500, output_tokens=600)
    comparison = compare(tenants, CostInputs(price_per_hour=1.2, throughput=438.0))
    assert sum(t.output_tokens_per_second for t in tenants) == pytest.approx(960)
    assert comparison.shared_instances == 6  # ceil(1920 / 350.4) = ceil(5.48)
    assert comparison.shared_utilisation == pytest.approx(960 / (6 * 438))
    assert comparison.dedicated_utilisation == pytest.approx(80 / 438)
    assert comparison.break_even_tenants == 3  # 2 shared instances (the minimum) beat 3 dedicated ones


def test_a_busy_tenant_needs_more_than_one_dedicated_instance():
    busy = TenantTraffic(
        "busy", requests_per_minute=60, prompt_tokens=0, output_tokens=1000, peak_factor=2
    )  # 2,000 tokens/s at peak
    comparison = compare([busy], CostInputs(price_per_hour=1.0, throughput=900.0, min_instances=1))
    assert comparison.dedicated_instances == 3
    assert comparison.shared_instances == 3  # ceil(2000 / 720)


def test_manifest_traffic_rows_are_planned(tmp_path, zoo):
    from tests.planner.tiny_manifest import write_tiny_manifest

    manifest = write_tiny_manifest(
        tmp_path,
        [
            {
                "name": "alpha-v1",
                "source": str(zoo.adapter("good")),
                "traffic": {"requests_per_minute": 30, "prompt_tokens": 200, "output_tokens": 100},
            },
            {
                "name": "beta-v1",
                "source": str(zoo.adapter("good-2")),
                "traffic": {"requests_per_minute": 6, "output_tokens": 500, "peak_factor": 3},
            },
        ],
    )
    document = plan(
        "--manifest", str(manifest), "--price-per-hour", "2", "--throughput", "100", "--min-instances", "1", "--json"
    ).json()
    assert [t["name"] for t in document["tenants"]] == ["alpha-v1", "beta-v1"]
    # alpha 50 tokens/s (peak 100), beta 50 tokens/s (peak 150): dedicated 1 + 2; shared ceil(250 / 80) = 4
    assert document["dedicated"]["instances"] == 3
    assert document["shared"]["instances"] == 4
    assert document["break_even"]["peak_factor"] == 2.5


def test_cost_curve_matches_compare():
    average = TenantTraffic("t", 8, 500, 600)
    inputs = CostInputs(price_per_hour=1.2, throughput=438.0)
    dedicated, shared = costs_for_count(12, average, inputs)
    comparison = compare([average] * 12, inputs)
    assert (dedicated, shared) == (comparison.dedicated_monthly, comparison.shared_monthly)


def test_the_peak_factor_of_a_mixed_fleet_is_weighted_by_demand_not_averaged():
    """A busy flat tenant and a quiet bursty one: the fleet's peak is sum(peaks) / sum(demand),
    so break-even follows the busy tenant's factor (a plain mean, 5.5, would nearly triple it here)."""
    from cdk_adapters.planner.cost import average_tenant, weighted_peak_factor

    busy_flat = TenantTraffic("busy-v1", requests_per_minute=90, prompt_tokens=100, output_tokens=600, peak_factor=1.0)
    quiet_bursty = TenantTraffic("quiet-v1", requests_per_minute=10, prompt_tokens=100, output_tokens=600, peak_factor=10.0)
    tenants = [busy_flat, quiet_bursty]
    # demand 900 and 100 tokens/s x 60; peaks 900 and 1,000: (900 + 1000) / (900 + 100) = 1.9
    assert weighted_peak_factor(tenants) == pytest.approx(1.9)
    assert average_tenant(tenants).peak_factor == pytest.approx(1.9)
    inputs = CostInputs(price_per_hour=1.0, throughput=1000.0, hours=730, swap_headroom=0.2, min_instances=1)
    comparison = compare(tenants, inputs)
    assert comparison.peak_factor == pytest.approx(1.9)
    assert comparison.break_even_utilisation == pytest.approx(0.8 / 1.9)
    # The plain mean (5.5) would put break-even at 0.8 / 5.5 = 0.145, not 0.421.
    assert comparison.break_even_utilisation > 2.5 * (0.8 / 5.5)
