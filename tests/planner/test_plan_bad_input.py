"""Bad input stops `plan` with exit status 1 and problems on stderr naming the subject and field (2: usage)."""

from __future__ import annotations

from tests.planner.cli_run import plan
from tests.planner.tiny_manifest import write_tiny_manifest

WHAT_IF = ["--num-layers", "32", "--tenants", "12"]


def test_negative_traffic_in_the_manifest_names_adapter_and_field(tmp_path, zoo):
    manifest = write_tiny_manifest(
        tmp_path,
        [
            {
                "name": "alpha-v1",
                "source": str(zoo.adapter("good")),
                "traffic": {"requests_per_minute": -5, "output_tokens": 100},
            },
            {
                "name": "beta-v1",
                "source": str(zoo.adapter("good-2")),
                "traffic": {"requests_per_minute": 5, "output_tokens": 100, "peak_factor": 0.5},
            },
        ],
    )
    result = plan("--manifest", str(manifest), "--json")
    assert result.status == 1 and result.out == ""
    assert "adapter 'alpha-v1': traffic.requests_per_minute: Input should be greater than or equal to 0" in result.err
    assert "adapter 'beta-v1': traffic.peak_factor: Input should be greater than or equal to 1" in result.err


def test_negative_what_if_traffic_is_one_problem_per_flag():
    result = plan(*WHAT_IF, "--requests-per-minute", "-1", "--output-tokens", "0")
    assert result.status == 1
    assert "plan: --requests-per-minute: must be from 0 to 1e+06, got -1" in result.err
    assert "plan: --output-tokens: must be from 1 to 1.04858e+06, got 0" in result.err


def test_what_if_traffic_is_bounded_and_finite_so_no_plan_overflows_or_runs_away():
    """--tenants 100000000 ran 10 minutes and took 6.8 GB; 1e308 requests a minute crashed with
    OverflowError. Each is one line naming the flag, before any work."""
    huge = plan("--num-layers", "32", "--tenants", "100000000")
    assert huge.status == 1 and huge.out == ""
    assert "plan: --tenants: must be from 1 to 10,000, got 1e+08" in huge.err
    overflow = plan(*WHAT_IF, "--requests-per-minute", "1e308", "--peak-factor", "inf")
    assert overflow.status == 1
    assert "plan: --requests-per-minute: must be from 0 to 1e+06, got 1e+308" in overflow.err
    assert "plan: --peak-factor: must be a finite number, got inf" in overflow.err
    for result in (huge, overflow):
        assert "Traceback" not in result.err and "OverflowError" not in result.err
    assert plan("--num-layers", "32", "--tenants", "10000", "--json").status == 0


def test_infinite_or_nan_traffic_in_the_manifest_is_refused_by_name(tmp_path, zoo):
    manifest = write_tiny_manifest(
        tmp_path,
        [{"name": "alpha-v1", "source": str(zoo.adapter("good")), "traffic": {"requests_per_minute": 5, "output_tokens": 100}}],
    )
    text = manifest.read_text()
    assert "requests_per_minute: 5" in text
    for value in (".inf", ".nan"):
        manifest.write_text(text.replace("requests_per_minute: 5", f"requests_per_minute: {value}"))
        result = plan("--manifest", str(manifest), "--json")
        assert result.status == 1 and result.out == "" and "Traceback" not in result.err
        assert "adapter 'alpha-v1': traffic.requests_per_minute: Input should be a finite number" in result.err


def test_a_price_file_that_is_not_utf8_is_one_clear_line(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_bytes("instance_type,usd_per_hour,source\nml.g6e.xlarge,1.86,Liste \u00e9t\u00e9\n".encode("latin-1"))
    result = plan(*WHAT_IF, "--instance-type", "ml.g6e.xlarge", "--price-file", str(prices))
    assert result.status == 1 and "Traceback" not in result.err and "UnicodeDecodeError" not in result.err
    assert f"price file '{prices}': (file): is not UTF-8 text (byte " in result.err
    assert "save the CSV as UTF-8" in result.err


def test_rows_without_traffic_are_named():
    result = plan("--num-layers", "32")
    assert result.status == 1
    assert "adapter 'support-en-v1': traffic: is not set" in result.err
    assert "adapter 'support-de-v1': traffic: is not set" in result.err


def test_unknown_instance_type_without_price():
    """A supported type with no shipped price, and a type nobody knows: both say what to pass."""
    unpriced = plan(*WHAT_IF, "--instance-type", "ml.g6e.xlarge")
    assert unpriced.status == 1
    assert "instance type 'ml.g6e.xlarge': price: has no price: the shipped table does not list it" in unpriced.err
    assert "--price-per-hour USD or --price-file CSV" in unpriced.err
    unknown = plan(*WHAT_IF, "--instance-type", "ml.g9.huge")
    assert unknown.status == 1
    assert "instance type 'ml.g9.huge': --instance-type: 'ml.g9.huge' is not a GPU instance type" in unknown.err
    assert "instance type 'ml.g9.huge': price: has no price" in unknown.err


def test_price_file_with_a_missing_column(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,price\nml.g6e.xlarge,1.86\n")
    result = plan(*WHAT_IF, "--instance-type", "ml.g6e.xlarge", "--price-file", str(prices))
    assert result.status == 1
    assert (
        f"price file '{prices}': usd_per_hour: column is missing; the header must name instance_type, usd_per_hour (found: instance_type, price)"
        in result.err
    )


def test_price_file_row_is_used_and_bad_values_are_named(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,usd_per_hour,source\nml.g6e.xlarge,1.86,our AWS bill 2026-11\n")
    document = plan(*WHAT_IF, "--instance-type", "ml.g6e.xlarge", "--price-file", str(prices), "--json").json()
    assert document["price"] == {"usd_per_hour": 1.86, "source": "our AWS bill 2026-11", "checked_on": None}
    prices.write_text("instance_type,usd_per_hour\nml.g6e.xlarge,cheap\nml.g6.xlarge,-1\n")
    result = plan(*WHAT_IF, "--instance-type", "ml.g6e.xlarge", "--price-file", str(prices))
    assert result.status == 1
    assert "line 2: usd_per_hour: 'cheap' is not a number" in result.err
    assert "line 3: usd_per_hour: must be > 0, got -1" in result.err


def test_too_many_gpu_slots_says_by_how_much_and_what_to_change():
    result = plan(*WHAT_IF, "--max-loras", "80", "--max-cpu-loras", "80")
    assert result.status == 1
    assert "cdk-adapters: the adapters do not fit on ml.g6.2xlarge" in result.err
    assert "serving: max_loras: 80 GPU slots x 0.09 GiB (every LoRA-capable module at max_lora_rank 16) = 6.88 GiB" in result.err
    over = (80 * 92_356_608 + 8_029_995_008 * 2 + 2**30 - 0.9 * 24 * 2**30) / 2**30  # slots + base + KV - budget
    assert f"by {over:.2f} GiB; set max_loras to 65 or less, lower max_lora_rank, or choose a larger instance" in result.err
    assert f"{over:.2f}" == "1.24"
    assert "recommendation: fix the memory problems first" in result.out  # the plan is still printed


def test_base_model_that_does_not_fit_names_bigger_instances():
    result = plan(*WHAT_IF, "--instance-type", "ml.g5.xlarge", "--dtype", "float32")
    assert result.status == 1
    assert "instance type 'ml.g5.xlarge': GPU memory: the base model alone does not fit: weights 29.91 GiB" in result.err
    assert "(ml.g6e.xlarge, ml.g6e.2xlarge)" in result.err


def test_host_cache_that_does_not_fit():
    result = plan(*WHAT_IF, "--max-cpu-loras", "400")
    assert result.status == 1
    assert "serving: max_cpu_loras: 400 cached adapters x 0.08 GiB (the largest, 'support-en-v1') = 31.25 GiB" in result.err
    assert "(32 GiB - 8 GiB reserve = 24.00 GiB) by 7.25 GiB; set max_cpu_loras to 307 or less" in result.err


def test_missing_layer_count_and_shapes(tmp_path, zoo):
    result = plan("--tenants", "3")
    assert result.status == 1
    assert "base_model: (layers): the manifest does not say how many decoder layers" in result.err


def test_usage_errors_exit_2():
    assert plan("--dtype", "int3").status == 2
    assert plan("--price-per-hour", "1", "--price-file", "x.csv").status == 2
    clash = plan(*WHAT_IF, "--max-loras", "8", "--max-cpu-loras", "4")
    assert clash.status == 1  # a bad value, as the others (tests/planner/test_plan_finite_and_reasons.py)
    assert "plan: --max-loras: max_loras 8 (--max-loras) is more than max_cpu_loras 4 (--max-cpu-loras)" in clash.err


def test_out_of_range_options_are_named():
    result = plan(*WHAT_IF, "--swap-headroom", "1.5", "--hours", "0")
    assert result.status == 1
    assert "plan: --swap-headroom: must be in [0, 1), got 1.5" in result.err
    assert "plan: --hours: must be > 0, got 0" in result.err


def test_a_price_file_row_with_more_columns_than_the_header_is_a_clear_error(tmp_path):
    import io as _io

    from cdk_adapters.cli import main as cli_main

    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,usd_per_hour\nml.g6.2xlarge,1.3,extra note, more\n")
    err = _io.StringIO()
    status = cli_main(
        ["plan", "--num-layers", "32", "--tenants", "3", "--price-file", str(prices)], stdout=_io.StringIO(), stderr=err
    )
    assert status == 1
    assert "line 2: has more columns than the header (instance_type, usd_per_hour)" in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_a_chart_path_that_cannot_be_written_is_refused_before_anything_is_planned(tmp_path):
    folder = plan(*WHAT_IF, "--chart", str(tmp_path))
    assert folder.status == 1 and folder.out == ""
    assert f"plan: --chart: {tmp_path} is a folder; name the PNG file to write" in folder.err
    missing = plan(*WHAT_IF, "--chart", str(tmp_path / "no" / "plan.png"))
    assert missing.status == 1 and missing.out == ""
    assert f"plan: --chart: the folder {tmp_path / 'no'} does not exist" in missing.err
    assert "Errno" not in folder.err + missing.err
