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

The reading, parsing and split are `cdk_adapters.usage`'s (one module each); this module checks the
arguments, asks it for the report and prints it (table, ``--csv`` or ``--json``).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError
from cdk_adapters.cli.terminal import printable
from cdk_adapters.contract import request_metrics as rm
from cdk_adapters.private.text_table import aligned_rows
from cdk_adapters.problems import ConfigurationError, Problem
from cdk_adapters.usage import prometheus
from cdk_adapters.usage.cloudwatch import cloudwatch_client, endpoint_usage
from cdk_adapters.usage.cost_split import period_instance_hours, split_endpoint_cost
from cdk_adapters.usage.prometheus import MetricsUnreadable
from cdk_adapters.usage.report import COUNT_COLUMNS, AdapterUsage, UsageReport

SINCE = re.compile(r"^(\d+)([mhd])$")


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


# ------------------------------------------------------------------ reading (cdk_adapters.usage)


def cloudwatch_report(client: Any, args: argparse.Namespace) -> UsageReport:
    """The report for ``--endpoint``: its adapters (given, or listed), each one's figures for the period."""
    start, end = period(args)
    return endpoint_usage(client, args.namespace, args.endpoint, args.adapters, start, end)


def read_prometheus(url: str) -> list[AdapterUsage]:
    """Each adapter's totals since the server started, from its Prometheus text (``/metrics``)."""
    try:
        return prometheus.read_prometheus(url)
    except MetricsUnreadable as error:
        raise Failure([Problem(PROG, "--prometheus", str(error))], "no metrics read") from None


def split_cost(report: UsageReport, args: argparse.Namespace) -> dict[str, Any]:
    """The endpoint's cost for the period, and each adapter's share of it (`cdk_adapters.usage.cost_split`)."""
    from cdk_adapters.planner.prices import resolve_price

    try:
        price = resolve_price(args.instance_type, price_per_hour=args.price_per_hour, price_file=args.price_file)
    except ConfigurationError as error:
        raise Failure(list(error.problems), "no price for the cost split") from None
    hours = args.instance_hours if args.instance_hours is not None else period_instance_hours(report, args.instances)
    return split_endpoint_cost(report, args.instance_type, price, hours)


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
