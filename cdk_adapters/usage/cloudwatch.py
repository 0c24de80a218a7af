"""Each adapter's figures for a deployed endpoint, from CloudWatch (``GetMetricData``, batched, every page followed).

The container publishes per-adapter request metrics (`cdk_adapters.contract.request_metrics`)
with the ``EndpointName`` and ``Adapter`` dimensions; one query per adapter and figure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cdk_adapters.contract import request_metrics as rm
from cdk_adapters.usage.report import AdapterUsage, UsageReport

MAX_QUERIES_PER_REQUEST = 500
"""GetMetricData takes at most 500 queries per call (CloudWatch API reference)."""
HOUR = 3600
"""The GetMetricData period: hourly datapoints, summed. Standard-resolution data older than 15
days is kept at 5-minute and, after 63 days, hourly resolution, so an hour always resolves."""

# (column, metric, statistic): what one adapter's row is made of, each one query.
QUERIES: tuple[tuple[str, str, str], ...] = (
    ("requests", rm.ERRORS_5XX.name, "SampleCount"),  # every request line carries Errors5XX
    ("input_tokens", rm.PROMPT_TOKENS_METRIC.name, "Sum"),
    ("output_tokens", rm.OUTPUT_TOKENS_METRIC.name, "Sum"),
    ("errors_4xx", rm.ERRORS_4XX.name, "Sum"),
    ("errors_5xx", rm.ERRORS_5XX.name, "Sum"),
    ("throttled", rm.THROTTLED.name, "Sum"),
)


def cloudwatch_client(region: str | None) -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=region)


def endpoint_usage(
    client: Any, namespace: str, endpoint: str, adapters: list[str] | None, start: datetime, end: datetime
) -> UsageReport:
    """The endpoint's report for the period: its adapters (given, or listed), each one's figures."""
    names = adapters or list_adapters(client, namespace, endpoint)
    figures = read_cloudwatch(client, namespace, endpoint, names, start, end)
    return UsageReport(f"CloudWatch {namespace} EndpointName={endpoint}", start, end, figures)


def list_adapters(client: Any, namespace: str, endpoint: str) -> list[str]:
    """Every ``Adapter`` value CloudWatch has for the endpoint (ListMetrics, every page)."""
    found: set[str] = set()
    request: dict[str, Any] = {
        "Namespace": namespace,
        "MetricName": rm.ERRORS_5XX.name,
        "Dimensions": [{"Name": rm.ENDPOINT_DIMENSION, "Value": endpoint}],
    }
    while True:
        page = client.list_metrics(**request)
        for metric in page.get("Metrics", []):
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            if rm.ADAPTER_DIMENSION in dimensions and dimensions.get(rm.ENDPOINT_DIMENSION) == endpoint:
                found.add(dimensions[rm.ADAPTER_DIMENSION])
        token = page.get("NextToken")
        if not token:
            return sorted(found)
        request["NextToken"] = token


def metric_queries(namespace: str, endpoint: str, adapters: list[str]) -> list[dict[str, Any]]:
    """One GetMetricData query per adapter and figure, ids ``q<adapter index>_<figure index>``."""
    queries = []
    for adapter_index, adapter in enumerate(adapters):
        dimensions = [{"Name": rm.ENDPOINT_DIMENSION, "Value": endpoint}, {"Name": rm.ADAPTER_DIMENSION, "Value": adapter}]
        for figure_index, (_, metric, statistic) in enumerate(QUERIES):
            queries.append(
                {
                    "Id": f"q{adapter_index}_{figure_index}",
                    "MetricStat": {
                        "Metric": {"Namespace": namespace, "MetricName": metric, "Dimensions": dimensions},
                        "Period": HOUR,
                        "Stat": statistic,
                    },
                    "ReturnData": True,
                }
            )
    return queries


def read_cloudwatch(
    client: Any, namespace: str, endpoint: str, adapters: list[str], start: datetime, end: datetime
) -> list[AdapterUsage]:
    """Each adapter's figures: GetMetricData in batches of 500 queries, each batch's pages followed."""
    queries = metric_queries(namespace, endpoint, adapters)
    totals: dict[str, float] = {}
    for first in range(0, len(queries), MAX_QUERIES_PER_REQUEST):
        request: dict[str, Any] = {
            "MetricDataQueries": queries[first : first + MAX_QUERIES_PER_REQUEST],
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
        }
        _sum_pages(client, request, totals)
    rows = []
    for adapter_index, adapter in enumerate(adapters):
        row = AdapterUsage(adapter)
        for figure_index, (column, _, _) in enumerate(QUERIES):
            setattr(row, column, round(totals.get(f"q{adapter_index}_{figure_index}", 0.0)))
        rows.append(row)
    return rows


def _sum_pages(client: Any, request: dict[str, Any], totals: dict[str, float]) -> None:
    """Add every page's values of one GetMetricData request to `totals`, by query id."""
    while True:
        page = client.get_metric_data(**request)
        for result in page.get("MetricDataResults", []):
            totals[result["Id"]] = totals.get(result["Id"], 0.0) + sum(result.get("Values", []))
        token = page.get("NextToken")
        if not token:
            return
        request["NextToken"] = token
