"""``cdk-adapters plan`` with instance pools: each pool planned as if alone, and the worst case
(the dearest shared fleet; the serving limits that fit on every pool) reported beside them."""

from __future__ import annotations

from tests.planner.cli_run import plan

WHAT_IF = ["--num-layers", "32", "--tenants", "12"]
POOLS = ["--instance-type", "ml.g6.2xlarge", "--instance-type", "ml.g5.2xlarge"]


def test_each_pool_is_the_plan_of_its_type_alone_and_the_worst_case_is_the_dearest():
    result = plan(*WHAT_IF, *POOLS, "--json")
    assert result.status == 0, result.err
    document = result.json()
    assert document["instance_pools"] == ["ml.g6.2xlarge", "ml.g5.2xlarge"]
    alone = [plan(*WHAT_IF, "--instance-type", name, "--json").json() for name in document["instance_pools"]]
    assert document["pools"] == alone
    dearest = max(alone, key=lambda pool: pool["shared"]["monthly_usd"])
    worst = document["worst_case"]
    assert worst["dearest_pool"] == dearest["instance_type"]
    assert worst["shared_monthly_usd"] == dearest["shared"]["monthly_usd"]
    assert worst["shared_instances"] == max(pool["shared"]["instances"] for pool in alone)
    assert worst["memory_fits_every_pool"] is True and worst["pools_that_do_not_fit"] == []
    assert worst["recommended_max_loras"] == min(pool["memory"]["recommended"]["max_loras"] for pool in alone)


def test_the_table_shows_every_pool_and_the_worst_case():
    result = plan(*WHAT_IF, *POOLS)
    assert result.status == 0, result.err
    assert result.out.startswith("cdk-adapters plan: instance pools ml.g6.2xlarge, then ml.g5.2xlarge;")
    assert "--- pool 1 of 2 ---\ncdk-adapters plan: 12 tenant(s) on ml.g6.2xlarge" in result.out
    assert "--- pool 2 of 2 ---\ncdk-adapters plan: 12 tenant(s) on ml.g5.2xlarge" in result.out
    assert "worst case over the pools" in result.out and "the adapters fit on every pool" in result.out


def test_a_pool_the_adapters_do_not_fit_fails_the_plan_and_is_named(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,usd_per_hour,source\nml.g6e.xlarge,1.86,our quote\nml.g6.2xlarge,0.98,our quote\n")
    # float32 weights of an 8B model (~30 GiB) fit a 48 GB L40S, not a 24 GB L4.
    result = plan(
        *WHAT_IF,
        "--instance-type",
        "ml.g6e.xlarge",
        "--instance-type",
        "ml.g6.2xlarge",
        "--price-file",
        str(prices),
        "--dtype",
        "float32",
        "--json",
    )
    assert result.status == 1
    worst = result.json()["worst_case"]
    assert worst["memory_fits_every_pool"] is False and worst["pools_that_do_not_fit"] == ["ml.g6.2xlarge"]
    assert "the adapters do not fit on ml.g6.2xlarge" in result.err
    assert "instance type 'ml.g6.2xlarge': GPU memory" in result.err and "ml.g6e.xlarge'" not in result.err


def test_bad_pool_flags_are_refused_together():
    result = plan(*WHAT_IF, *POOLS, "--instance-type", "ml.g6.2xlarge", "--instance-type", "ml.g9.huge", "--price-per-hour", "1")
    assert result.status == 1 and result.out == ""
    assert "--instance-type: names ml.g6.2xlarge more than once; each pool once" in result.err
    assert "--price-per-hour: prices one instance type; for pools use the shipped table or --price-file" in result.err
    assert "instance type 'ml.g9.huge': --instance-type: 'ml.g9.huge' is not a GPU instance type" in result.err
    six = plan(
        *WHAT_IF,
        *[
            f
            for name in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge", "12xlarge")
            for f in ("--instance-type", f"ml.g6.{name}")
        ],
    )
    assert six.status == 1 and "is given 6 times; an endpoint takes at most 5 instance pools" in six.err
