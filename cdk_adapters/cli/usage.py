"""``cdk-adapters usage``: what each tenant used of an endpoint over a period, and its share of the cost.

Reads the container's per-adapter request metrics (`cdk_adapters.contract.request_metrics`): from
CloudWatch for a deployed endpoint (``GetMetricData``, batched, every page followed), or from local
mode's Prometheus ``/metrics`` (``--prometheus URL``; totals since that server started). Reports
per adapter: requests, prompt and output tokens, 4xx and 5xx answers, throttled requests (429 over
its limits) and, given the instance type and hours, its share of the endpoint's cost.

The cost rule: the endpoint costs instance-hours x price per hour (the planner's shipped price
table, or ``--price-per-hour`` / ``--price-file``). Each adapter's share is its output tokens over
all adapters' output tokens (generated tokens are what occupies the GPUs); when no adapter generated
a token, the share is by requests; with no requests at all nothing is attributed. The shares add up
to the whole cost: idle capacity is charged to the tenants who used the endpoint, in proportion.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError
from cdk_adapters.cli.terminal import printable
from cdk_adapters.contract import request_metrics as rm
from cdk_adapters.contract.runtime_api import METRICS_PATH
from cdk_adapters.private.text_table import aligned_rows
from cdk_adapters.problems import ConfigurationError, Problem

MAX_QUERIES_PER_REQUEST = 500
"""GetMetricData takes at most 500 queries per call (CloudWatch API reference)."""
HOUR = 3600
"""The GetMetricData period: hourly datapoints, summed. Standard-resolution data older than 15
days is kept at 5-minute and, after 63 days, hourly resolution, so an hour always resolves."""
SINCE = re.compile(r"^(\d+)([mhd])$")

# (column, metric, statistic): what one adapter's row is made of, each one query.
QUERIES: tuple[tuple[str, str, str], ...] = (
    ("requests", rm.ERRORS_5XX.name, "SampleCount"),  # every request line carries Errors5XX
    ("input_tokens", rm.PROMPT_TOKENS_METRIC.name, "Sum"),
    ("output_tokens", rm.OUTPUT_TOKENS_METRIC.name, "Sum"),
    ("errors_4xx", rm.ERRORS_4XX.name, "Sum"),
    ("errors_5xx", rm.ERRORS_5XX.name, "Sum"),
    ("throttled", rm.THROTTLED.name, "Sum"),
)
COUNT_COLUMNS = tuple(column for column, _, _ in QUERIES)


@dataclass
class AdapterUsage:
    """One adapter's figures over the period."""

    adapter: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    errors_4xx: int = 0
    errors_5xx: int = 0
    throttled: int = 0
    cost_share: float | None = None
    """0-1 of the endpoint's cost (None: no cost asked for)."""
    cost_usd: float | None = None


@dataclass
class UsageReport:
    source: str
    start: datetime | None
    end: datetime | None
    adapters: list[AdapterUsage]
    cost: dict[str, Any] | None = field(default=None)
    """instance type, price per hour and its source, instance-hours, total USD, the split rule."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = commands.add_parser(
        "usage",
        help="per-tenant requests, tokens, errors, throttles and cost share of an endpoint over a period",
        description=(
            "Report each adapter's requests, prompt and output tokens, 4xx/5xx answers, throttled requests and "
            "share of the endpoint's cost, from the container's per-adapter metrics: CloudWatch for a deployed "
            "endpoint (--endpoint), or local mode's Prometheus /metrics (--prometheus, totals since it started). "
            "The cost (instance-hours x price per hour) is split by output tokens (by requests if none)."
        ),
    )
    where = usage.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", metavar="NAME", help="the SageMaker endpoint name (the metrics' EndpointName)")
    where.add_argument(
        "--prometheus", metavar="URL", help="a container or local mode's /metrics (e.g. http://127.0.0.1:8080/metrics)"
    )
    usage.add_argument(
        "--namespace", default=rm.DEFAULT_NAMESPACE, help=f"CloudWatch namespace (default: {rm.DEFAULT_NAMESPACE})"
    )
    usage.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    usage.add_argument(
        "--adapter",
        action="append",
        dest="adapters",
        metavar="NAME",
        help="report these Adapter dimension values (repeatable; default: every adapter CloudWatch "
        "lists for the endpoint, which covers the last two weeks)",
    )
    usage.add_argument("--start", help="period start, ISO 8601 (e.g. 2026-11-01T00:00:00Z); with --end")
    usage.add_argument("--end", help="period end, ISO 8601 (default: now)")
    usage.add_argument("--since", help="period ending now: 30m, 24h, 7d (default: 24h unless --start)")
    usage.add_argument("--instance-type", help="the endpoint's instance type, for the cost (e.g. ml.g5.xlarge)")
    hours = usage.add_mutually_exclusive_group()
    hours.add_argument("--instances", type=float, help="instances the whole period (instance-hours = this x the period's hours)")
    hours.add_argument("--instance-hours", type=float, help="instance-hours in the period (e.g. from the bill, with scaling)")
    usage.add_argument("--price-per-hour", type=float, help="USD per instance-hour (default: the shipped price table)")
    usage.add_argument("--price-file", type=Path, help="CSV with columns instance_type,usd_per_hour (as for 'plan')")
    output = usage.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON document on stdout")
    output.add_argument("--csv", action="store_true", help="CSV on stdout, one row per adapter")
    usage.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    problems = _argument_problems(args)
    if problems:
        raise Failure(problems, f"{len(problems)} problem(s) with the arguments; nothing was read")
    if args.prometheus:
        report = UsageReport(f"Prometheus {args.prometheus}", None, None, read_prometheus(args.prometheus))
    else:
        report = cloudwatch_report(cloudwatch_client(args.region), args)
    if args.instance_type:
        report.cost = split_cost(report, args)
    if args.json:
        out.write(json.dumps(_document(report), indent=2) + "\n")
    elif args.csv:
        write_csv(report, out)
    else:
        write_table(report, out)


# --------------------------------------------------------------------------------- CloudWatch


def cloudwatch_client(region: str | None) -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=region)


def cloudwatch_report(client: Any, args: argparse.Namespace) -> UsageReport:
    """The report for ``--endpoint``: its adapters (given, or listed), each one's figures for the period."""
    start, end = period(args)
    adapters = args.adapters or list_adapters(client, args.namespace, args.endpoint)
    figures = read_cloudwatch(client, args.namespace, args.endpoint, adapters, start, end)
    return UsageReport(f"CloudWatch {args.namespace} EndpointName={args.endpoint}", start, end, figures)


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
        while True:
            page = client.get_metric_data(**request)
            for result in page.get("MetricDataResults", []):
                totals[result["Id"]] = totals.get(result["Id"], 0.0) + sum(result.get("Values", []))
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    rows = []
    for adapter_index, adapter in enumerate(adapters):
        row = AdapterUsage(adapter)
        for figure_index, (column, _, _) in enumerate(QUERIES):
            setattr(row, column, round(totals.get(f"q{adapter_index}_{figure_index}", 0.0)))
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------- Prometheus


def read_prometheus(url: str) -> list[AdapterUsage]:
    """Each adapter's totals since the server started, from its Prometheus text (``/metrics``)."""
    import httpx

    target = url if url.rstrip("/").endswith(METRICS_PATH) else url.rstrip("/") + METRICS_PATH
    try:
        answer = httpx.get(target, timeout=30)
    except httpx.HTTPError as error:
        raise Failure([Problem(PROG, "--prometheus", f"cannot read {target}: {error}")], "no metrics read") from None
    if answer.status_code != 200:
        raise Failure([Problem(PROG, "--prometheus", f"{target} answered {answer.status_code}")], "no metrics read")
    return parse_prometheus(answer.text)


def parse_prometheus(text: str) -> list[AdapterUsage]:
    """The container's per-adapter series (`adapter_server.observability`), parsed with prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    rows: dict[str, AdapterUsage] = {}

    def row(adapter: str) -> AdapterUsage:
        return rows.setdefault(adapter, AdapterUsage(adapter))

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            adapter = sample.labels.get("adapter")
            if adapter is None or not sample.name.endswith("_total"):
                continue
            value = round(sample.value)
            if sample.name == "cdk_adapters_requests_total":
                label = sample.labels.get("status") or ""
                status = int(label) if label.isdigit() else 0
                row(adapter).requests += value
                if 400 <= status < 500:
                    row(adapter).errors_4xx += value
                elif status >= 500:
                    row(adapter).errors_5xx += value
            elif sample.name == "cdk_adapters_prompt_tokens_total":
                row(adapter).input_tokens += value
            elif sample.name == "cdk_adapters_output_tokens_total":
                row(adapter).output_tokens += value
            elif sample.name == "cdk_adapters_throttled_requests_total":
                row(adapter).throttled += value
    return [rows[name] for name in sorted(rows)]


# ------------------------------------------------------------------------------------- cost


def split_cost(report: UsageReport, args: argparse.Namespace) -> dict[str, Any]:
    """The endpoint's cost for the period, and each adapter's share of it (the module's rule)."""
    from cdk_adapters.planner.prices import resolve_price

    try:
        price = resolve_price(args.instance_type, price_per_hour=args.price_per_hour, price_file=args.price_file)
    except ConfigurationError as error:
        raise Failure(list(error.problems), "no price for the cost split") from None
    if args.instance_hours is not None:
        instance_hours = args.instance_hours
    else:
        assert report.start is not None and report.end is not None
        instance_hours = (args.instances or 1) * (report.end - report.start).total_seconds() / 3600
    total = instance_hours * price.usd_per_hour
    tokens = sum(row.output_tokens for row in report.adapters)
    requests = sum(row.requests for row in report.adapters)
    rule, weights = "output tokens", [row.output_tokens for row in report.adapters]
    if not tokens:
        rule, weights = "requests (no output tokens in the period)", [row.requests for row in report.adapters]
    whole = sum(weights)
    for row, weight in zip(report.adapters, weights):
        row.cost_share = weight / whole if whole else 0.0
        row.cost_usd = round(total * row.cost_share, 4)
    return {
        "instance_type": args.instance_type,
        "usd_per_hour": price.usd_per_hour,
        "price_source": price.source,
        "instance_hours": round(instance_hours, 4),
        "total_usd": round(total, 4),
        "split_by": rule if whole else "nothing (no requests in the period): not attributed",
        "requests": requests,
    }


# ------------------------------------------------------------------------------------ period


def period(args: argparse.Namespace, now: datetime | None = None) -> tuple[datetime, datetime]:
    """(start, end) in UTC from --start/--end or --since (default: the last 24 hours)."""
    now = now or datetime.now(UTC)
    end = _timestamp(args.end, "--end") if args.end else now
    if args.start:
        return _timestamp(args.start, "--start"), end
    since = SINCE.match(args.since or "24h")
    assert since is not None  # checked by _argument_problems
    amount, unit = since.groups()
    return end - timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[unit]: int(amount)}), end


def _timestamp(text: str, option: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(option, f"{text!r} is not an ISO 8601 time (e.g. 2026-11-01T00:00:00Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _argument_problems(args: argparse.Namespace) -> list[Problem]:
    found = []

    def bad(option: str, message: str) -> None:
        found.append(Problem(PROG + " usage", option, message))

    if args.prometheus:
        for option in ("start", "end", "since", "instances"):
            if getattr(args, option) is not None:
                bad(
                    f"--{option.replace('_', '-')}",
                    "does not apply to --prometheus, whose counters are totals since the server started"
                    + ("; give --instance-hours" if option == "instances" else ""),
                )
        if args.adapters:
            bad("--adapter", "does not apply to --prometheus, which lists every adapter it counted")
    if args.since is not None and args.start is not None:
        bad("--since", "give --since or --start, not both")
    if args.since is not None and not SINCE.match(args.since):
        bad("--since", f"{args.since!r} must be a number and m, h or d (e.g. 30m, 24h, 7d)")
    parsed = {}
    for option in ("start", "end"):
        value = getattr(args, option)
        if value is not None:
            try:
                parsed[option] = _timestamp(value, f"--{option}")
            except UsageError as error:
                found += error.problems
    if "start" in parsed and parsed["start"] >= parsed.get("end", datetime.now(UTC)):
        bad("--start", "must be before the end of the period")
    if args.end is not None and args.start is None and args.since is None:
        bad("--end", "needs --start or --since")
    costing = (args.instances, args.instance_hours, args.price_per_hour, args.price_file)
    if args.instance_type is None and any(value is not None for value in costing):
        bad("--instance-type", "is needed for a cost (--instances, --instance-hours, --price-per-hour, --price-file)")
    if args.instance_type is not None and args.prometheus and args.instance_hours is None:
        bad("--instance-hours", "is needed for a cost with --prometheus (its counters have no period)")
    for option in ("instances", "instance_hours", "price_per_hour"):
        value = getattr(args, option)
        if value is not None and not value > 0:
            bad(f"--{option.replace('_', '-')}", f"must be > 0, got {value:g}")
    return found


# ------------------------------------------------------------------------------------ output


def _document(report: UsageReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "start": report.start.isoformat() if report.start else None,
        "end": report.end.isoformat() if report.end else None,
        "cost": report.cost,
        "adapters": [asdict(row) for row in report.adapters],
    }


def write_csv(report: UsageReport, out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("adapter", *COUNT_COLUMNS, "cost_share", "cost_usd"))
    for row in report.adapters:
        share = "" if row.cost_share is None else f"{row.cost_share:.6f}"
        cost = "" if row.cost_usd is None else f"{row.cost_usd:.4f}"
        writer.writerow((row.adapter, *(getattr(row, column) for column in COUNT_COLUMNS), share, cost))


def write_table(report: UsageReport, out: TextIO) -> None:
    when = (
        "totals since the server started"
        if report.start is None
        else f"{report.start:%Y-%m-%d %H:%M} to {report.end:%Y-%m-%d %H:%M} UTC"
    )
    out.write(printable(f"{report.source}, {when}") + "\n")
    headers = ("adapter", "requests", "input tok", "output tok", "4xx", "5xx", "throttled", "share", "cost USD")
    lines: list[tuple[str, ...]] = [headers]
    for row in report.adapters:
        share = "" if row.cost_share is None else f"{row.cost_share:.1%}"
        cost = "" if row.cost_usd is None else f"{row.cost_usd:,.2f}"
        lines.append((printable(row.adapter), *(f"{getattr(row, column):,}" for column in COUNT_COLUMNS), share, cost))
    for line in aligned_rows(lines):
        out.write(line + "\n")
    if not report.adapters:
        out.write("(no adapter has metrics for this endpoint in the period)\n")
    if report.cost:
        bill = report.cost
        out.write(
            f"cost: {bill['instance_hours']:g} instance-hours x ${bill['usd_per_hour']:g}/h ({bill['instance_type']}) = "
            f"${bill['total_usd']:,.2f}, split by {bill['split_by']}\n"
        )
