"""``cdk-adapters usage`` against CloudWatch, with botocore's Stubber answering: the exact ListMetrics
and GetMetricData requests (batches of 500 queries, NextToken pages followed), the figures per
adapter, the cost split by output tokens, the three output formats and bad arguments refused at once.

Local mode's Prometheus source is tested against a real server in tests/container/test_usage_prometheus.py.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import boto3
from botocore.stub import Stubber

from cdk_adapters.cli import build_parser, main, usage
from cdk_adapters.contract import request_metrics as rm
from cdk_adapters.usage import cloudwatch as usage_cloudwatch
from cdk_adapters.usage import prometheus as usage_prometheus
from cdk_adapters.usage.report import AdapterUsage, UsageReport

START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 11, 2, tzinfo=UTC)
ENDPOINT = "adapters-prod-1a2b3c4d"
SUPPORT, BILLING = f"{ENDPOINT}-support-en-v1", f"{ENDPOINT}-billing-v1"


def cloudwatch():
    return boto3.client("cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


def query(qid: str, adapter: str, metric: str, stat: str) -> dict:
    """A GetMetricData query as the CloudWatch API reference spells it (written out, not taken from the code)."""
    return {
        "Id": qid,
        "MetricStat": {
            "Metric": {
                "Namespace": "CdkAdapters",
                "MetricName": metric,
                "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "Adapter", "Value": adapter}],
            },
            "Period": 3600,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def queries_for(index: int, adapter: str) -> list[dict]:
    return [
        query(f"q{index}_0", adapter, "Errors5XX", "SampleCount"),
        query(f"q{index}_1", adapter, "PromptTokens", "Sum"),
        query(f"q{index}_2", adapter, "OutputTokens", "Sum"),
        query(f"q{index}_3", adapter, "Errors4XX", "Sum"),
        query(f"q{index}_4", adapter, "Errors5XX", "Sum"),
        query(f"q{index}_5", adapter, "Throttled", "Sum"),
    ]


def result(qid: str, *values: float) -> dict:
    return {"Id": qid, "Label": qid, "Timestamps": [START] * len(values), "Values": list(values), "StatusCode": "Complete"}


def list_page(adapters: list[str], token: str | None = None) -> dict:
    page = {
        "Metrics": [
            {
                "Namespace": "CdkAdapters",
                "MetricName": "Errors5XX",
                "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "Adapter", "Value": adapter}],
            }
            for adapter in adapters
        ]
        # The rollup series has no Adapter: it is not a tenant.
        + [{"Namespace": "CdkAdapters", "MetricName": "Errors5XX", "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}]}]
    }
    if token:
        page["NextToken"] = token
    return page


LIST_REQUEST = {
    "Namespace": "CdkAdapters",
    "MetricName": "Errors5XX",
    "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}],
}


def stub_two_adapters(stub: Stubber) -> None:
    """ListMetrics over two pages, then one GetMetricData batch answered over two pages."""
    stub.add_response("list_metrics", list_page([SUPPORT], token="page-2"), LIST_REQUEST)
    stub.add_response("list_metrics", list_page([BILLING]), {**LIST_REQUEST, "NextToken": "page-2"})
    # Sorted: billing first, then support.
    batch = {
        "MetricDataQueries": queries_for(0, BILLING) + queries_for(1, SUPPORT),
        "StartTime": START,
        "EndTime": END,
        "ScanBy": "TimestampAscending",
    }
    stub.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                result("q0_0", 10, 5),
                result("q0_1", 200),
                result("q0_2", 100, 50),
                result("q1_0", 40),
                result("q1_5", 3),
            ],
            "NextToken": "more",
        },
        batch,
    )
    stub.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                result("q1_0", 20),
                result("q1_1", 1200),
                result("q1_2", 450),
                result("q1_3", 4),
                result("q1_4", 1),
                result("q0_3", 0),
                result("q0_4", 0),
                result("q0_5", 0),
            ]
        },
        {**batch, "NextToken": "more"},
    )


def args_for(*extra: str):
    return build_parser().parse_args(
        ["usage", "--endpoint", ENDPOINT, "--start", START.isoformat(), "--end", END.isoformat(), *extra]
    )


def test_figures_per_adapter_follow_every_page_and_sum_the_hours():
    client = cloudwatch()
    with Stubber(client) as stub:
        stub_two_adapters(stub)
        report = usage.cloudwatch_report(client, args_for())
        stub.assert_no_pending_responses()
    rows = {row.adapter: row for row in report.adapters}
    assert list(rows) == [BILLING, SUPPORT]
    billing, support = rows[BILLING], rows[SUPPORT]
    assert (billing.requests, billing.input_tokens, billing.output_tokens, billing.throttled) == (15, 200, 150, 0)
    assert (support.requests, support.input_tokens, support.output_tokens) == (60, 1200, 450)
    assert (support.errors_4xx, support.errors_5xx, support.throttled) == (4, 1, 3)


def test_queries_go_in_batches_of_500_and_named_adapters_skip_the_listing():
    adapters = [f"{ENDPOINT}-tenant-{index:03d}-v1" for index in range(90)]  # 540 queries: 500 + 40
    client = cloudwatch()
    expected = [q for index, adapter in enumerate(adapters) for q in queries_for(index, adapter)]
    with Stubber(client) as stub:
        for batch in (expected[:500], expected[500:]):
            stub.add_response(
                "get_metric_data",
                {"MetricDataResults": [result(q["Id"], 1) for q in batch]},
                {"MetricDataQueries": batch, "StartTime": START, "EndTime": END, "ScanBy": "TimestampAscending"},
            )
        rows = usage_cloudwatch.read_cloudwatch(client, "CdkAdapters", ENDPOINT, adapters, START, END)
        stub.assert_no_pending_responses()
    assert len(rows) == 90 and all(row.requests == 1 and row.output_tokens == 1 for row in rows)
    assert usage_cloudwatch.MAX_QUERIES_PER_REQUEST == 500
    # Every figure is a contract metric: a renamed metric would break the report, not silently read zero.
    assert {metric for _, metric, _ in usage_cloudwatch.QUERIES} <= set(rm.METRICS_BY_NAME)


def run_cli(monkeypatch, *argv: str, stub_with=stub_two_adapters) -> tuple[int, str, str]:
    client = cloudwatch()
    stub = Stubber(client)
    stub_with(stub)
    stub.activate()
    monkeypatch.setattr(usage, "cloudwatch_client", lambda region: client)
    out, err = io.StringIO(), io.StringIO()
    status = main(
        ["usage", "--endpoint", ENDPOINT, "--start", "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z", *argv],
        stdout=out,
        stderr=err,
    )
    stub.assert_no_pending_responses()
    return status, out.getvalue(), err.getvalue()


def test_cost_is_split_by_output_tokens_in_json(monkeypatch):
    status, out, err = run_cli(monkeypatch, "--instance-type", "ml.g5.xlarge", "--instances", "2", "--json")
    assert (status, err) == (0, "")
    document = json.loads(out)
    cost = document["cost"]
    # 2 instances x 24 h x the shipped $1.41/h
    assert (cost["instance_hours"], cost["usd_per_hour"], cost["total_usd"]) == (48, 1.41, 67.68)
    assert cost["split_by"] == "output tokens"
    shares = {row["adapter"]: (row["cost_share"], row["cost_usd"]) for row in document["adapters"]}
    assert shares == {BILLING: (0.25, 16.92), SUPPORT: (0.75, 50.76)}  # 150 and 450 of 600 output tokens
    assert (document["start"], document["end"]) == ("2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00")


def test_csv_and_table(monkeypatch):
    status, out, _ = run_cli(
        monkeypatch, "--instance-type", "ml.g5.xlarge", "--instance-hours", "10", "--price-per-hour", "2", "--csv"
    )
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["adapter"] for row in rows] == [BILLING, SUPPORT]
    assert rows[1] == {
        "adapter": SUPPORT,
        "requests": "60",
        "input_tokens": "1200",
        "output_tokens": "450",
        "errors_4xx": "4",
        "errors_5xx": "1",
        "throttled": "3",
        "cost_share": "0.750000",
        "cost_usd": "15.0000",
    }
    status, out, _ = run_cli(monkeypatch)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"CloudWatch CdkAdapters EndpointName={ENDPOINT}, 2026-11-01 00:00 to 2026-11-02 00:00 UTC"
    assert lines[1].split() == [
        "adapter",
        "requests",
        "input",
        "tok",
        "output",
        "tok",
        "4xx",
        "5xx",
        "throttled",
        "share",
        "cost",
        "USD",
    ]
    assert lines[3].split() == [SUPPORT, "60", "1,200", "450", "4", "1", "3"]  # no cost asked for: no share


def test_without_output_tokens_the_cost_is_split_by_requests():
    report = UsageReport("test", START, END, [AdapterUsage("a", requests=1), AdapterUsage("b", requests=3)])
    cost = usage.split_cost(report, args_for("--instance-type", "ml.g5.xlarge", "--instance-hours", "4"))
    assert cost["split_by"].startswith("requests")
    assert [row.cost_share for row in report.adapters] == [0.25, 0.75]
    idle = UsageReport("test", START, END, [AdapterUsage("a")])
    assert (
        "not attributed"
        in usage.split_cost(idle, args_for("--instance-type", "ml.g5.xlarge", "--instance-hours", "4"))["split_by"]
    )


def test_the_period_from_since_and_bad_arguments_are_refused_all_at_once():
    parser = build_parser()
    now = datetime(2026, 11, 8, 12, tzinfo=UTC)
    assert usage.period(parser.parse_args(["usage", "--endpoint", ENDPOINT, "--since", "7d"]), now) == (
        datetime(2026, 11, 1, 12, tzinfo=UTC),
        now,
    )
    assert usage.period(parser.parse_args(["usage", "--endpoint", ENDPOINT]), now)[0] == datetime(2026, 11, 7, 12, tzinfo=UTC)
    out, err = io.StringIO(), io.StringIO()
    status = main(
        [
            "usage",
            "--endpoint",
            ENDPOINT,
            "--since",
            "a week",
            "--start",
            "yesterday",
            "--instances",
            "0",
            "--price-per-hour",
            "3",
        ],
        stdout=out,
        stderr=err,
    )
    assert (status, out.getvalue()) == (1, "")
    text = err.getvalue()
    for complaint in (
        "--since: give --since or --start, not both",
        "--since: 'a week' must be a number and m, h or d",
        "--start: 'yesterday' is not an ISO 8601 time",
        "--instance-type: is needed for a cost",
        "--instances: must be > 0, got 0",
    ):
        assert complaint in text, text
    err = io.StringIO()
    assert (
        main(
            ["usage", "--prometheus", "http://127.0.0.1:1/metrics", "--since", "1h", "--instance-type", "ml.g5.xlarge"],
            stdout=io.StringIO(),
            stderr=err,
        )
        == 1
    )
    assert "--since: does not apply to --prometheus" in err.getvalue()
    assert "--instance-hours: is needed for a cost with --prometheus" in err.getvalue()


def test_an_unpriced_instance_type_names_the_way_out(monkeypatch):
    status, _, err = run_cli(monkeypatch, "--instance-type", "ml.g6e.48xlarge", "--instances", "1")
    assert status == 1
    assert "instance type 'ml.g6e.48xlarge': price: has no price" in err and "--price-per-hour" in err


def test_prometheus_text_is_read_per_adapter_with_statuses_as_errors():
    text = (
        'cdk_adapters_requests_total{adapter="a-v1",status="200"} 3.0\n'
        'cdk_adapters_requests_total{adapter="a-v1",status="429"} 2.0\n'
        'cdk_adapters_requests_total{adapter="a-v1",status="503"} 1.0\n'
        'cdk_adapters_throttled_requests_total{adapter="a-v1"} 2.0\n'
        'cdk_adapters_output_tokens_total{adapter="a-v1"} 24.0\n'
        'vllm:num_requests_running{model_name="base"} 0.0\n'
    )
    (row,) = usage_prometheus.parse_prometheus(text)
    assert (row.adapter, row.requests, row.input_tokens, row.output_tokens, row.errors_4xx, row.errors_5xx, row.throttled) == (
        "a-v1",
        6,
        0,
        24,
        2,
        1,
        2,
    )
