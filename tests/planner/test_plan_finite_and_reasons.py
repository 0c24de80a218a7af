"""`plan` refuses NaN and infinity wherever a number is read, says the real reason when sharing
does not pay, draws the fleet it priced, and names where a conflicting value came from."""

from __future__ import annotations

import pytest

from cdk_adapters.cli.plan import FLOAT_FLAGS
from cdk_adapters.planner.chart import cost_series
from cdk_adapters.planner.cost import CostInputs
from cdk_adapters.planner.traffic import TenantTraffic
from tests.planner.cli_run import plan

WHAT_IF = ["--num-layers", "32", "--tenants", "12"]


@pytest.mark.parametrize("flag", FLOAT_FLAGS)
def test_nan_and_infinity_are_refused_for_every_float_flag(flag):
    for value in ("nan", "inf", "-inf"):
        result = plan(*WHAT_IF, f"{flag}={value}", "--json")
        assert result.status == 1 and result.out == "", (flag, value)
        assert f"plan: {flag}: must be a finite number, got {float(value)}" in result.err
        assert "Traceback" not in result.err and "$nan" not in result.err


def test_every_float_flag_of_plan_is_checked():
    from cdk_adapters.cli import build_parser

    (plan_parser,) = [p for name, p in build_parser()._subparsers._group_actions[0].choices.items() if name == "plan"]
    floats = {action.option_strings[0] for action in plan_parser._actions if action.type is float}
    assert floats == set(FLOAT_FLAGS)


def test_a_price_file_with_nan_or_infinity_is_refused(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,usd_per_hour\nml.g6.2xlarge,nan\nml.g6.xlarge,inf\n")
    result = plan(*WHAT_IF, "--price-file", str(prices))
    assert result.status == 1 and "$nan" not in result.out
    assert "line 2: usd_per_hour: must be a finite number, got 'nan'" in result.err
    assert "line 3: usd_per_hour: must be a finite number, got 'inf'" in result.err


def test_keep_dedicated_gives_the_minimum_fleet_as_the_reason():
    result = plan("--num-layers", "32", "--tenants", "1", "--json")
    assert result.status == 0, result.err
    assert result.json()["recommendation"] == (
        "keep dedicated endpoints: 1 tenant(s) need 1 dedicated instance(s) and the shared fleet is at least 2 "
        "(--min-instances, so one failure is not an outage), so sharing saves nothing"
    )
    fixed = plan("--num-layers", "32", "--tenants", "2", "--shared-instances", "3", "--json").json()
    assert fixed["recommendation"].endswith("the fixed shared fleet is 3 (--shared-instances), so sharing saves nothing")


def test_the_chart_draws_the_fixed_shared_fleet_it_priced():
    average = TenantTraffic("average", 8.0, 500, 600, 2.0)
    fixed = CostInputs(price_per_hour=1.2, throughput=438.0, shared_instances=2)
    counts, _dedicated, shared = cost_series(average, fixed, tenants=12)
    assert shared == [2 * 1.2 * 730] * len(counts)
    _, _, grown = cost_series(average, CostInputs(price_per_hour=1.2, throughput=438.0), tenants=12)
    assert grown[0] < grown[-1]  # without it, the fleet grows with the tenants


def test_the_chart_command_with_a_fixed_fleet_writes_the_png(tmp_path):
    chart = tmp_path / "fixed.png"
    result = plan(*WHAT_IF, "--shared-instances", "2", "--chart", str(chart))
    assert result.status == 0, result.err
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_max_loras_beyond_the_manifests_cache_names_where_each_value_came_from():
    result = plan(*WHAT_IF, "--max-loras", "12")
    assert result.status == 1 and result.out == ""
    assert (
        "plan: --max-loras: max_loras 12 (--max-loras) is more than max_cpu_loras 8 (serving.max_cpu_loras in "
        "manifests/example.yaml): the host cache holds every GPU-resident adapter, so vLLM refuses it; "
        "pass --max-cpu-loras 12 or more"
    ) in result.err


def test_chart_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    """From a wheel installed without the [chart] extra: exit 1 and the pip command, no traceback."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
        return real_import(name, *args, **kwargs)

    from cdk_adapters.local import stack

    monkeypatch.setattr(stack, "_CHECKOUT", tmp_path / "site-packages")  # no Makefile beside it: an installed wheel
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = plan(*WHAT_IF, "--chart", str(tmp_path / "c.png"))
    assert result.status == 1
    # The wheel's own path with the extra (this checkout's install record names no wheel: the placeholder).
    assert (
        "--chart: needs matplotlib (matplotlib is not installed): "
        "pip install '/path/to/cdk_adapters-<version>-py3-none-any.whl[chart]'"
    ) in result.err
    assert "'cdk-adapters[" not in result.err
    assert not (tmp_path / "c.png").exists()
