"""One CloudWatch dashboard per endpoint, the same size for ten adapters as for a thousand.

Endpoint rows: requests, latency (p50/p95/p99 and time to first token), errors, fair share (queue
wait, throttled requests, in-flight), GPU utilisation, and copies/instances, plus the endpoint's
alarms. Per-adapter rows are *top-N tables*: a CloudWatch Metrics Insights query per signal (most
requests, most 5xx, highest average latency, highest cold-start share, most throttled, highest
average queue wait, highest peak in flight), grouped by the ``Adapter`` dimension. One row per adapter would pass the
dashboard's limits at a few hundred adapters, and would change the dashboard on every adapter
added; the queries find every adapter of the endpoint, present and future, and the dashboard body
does not depend on the adapter list.

CloudWatch limits this relies on (checked by `dashboard_limit_problems` at synth):

* a dashboard body holds 0 to 500 widgets ("Dashboard Body Structure and Syntax",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html);
* a graph's ``metrics`` array holds at most 100 metrics and expressions (same page, "Metric
  Widget"; GetMetricWidgetImage's "1-100 metrics and expressions",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Metric-Widget-Structure.html);
* 500 metrics per dashboard, a conservative planning figure (no AWS page found that states a
  per-dashboard total; counting every series a query may return against it is the safe side);
* Metrics Insights (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-limits.html):
  a query processes at most 10,000 metrics (after ``WHERE``) and returns at most 500 series,
  sorted by ``ORDER BY`` when present; its functions are AVG, COUNT, MAX, MIN and SUM (no
  percentiles, so the latency table ranks by average); it sees two weeks of data for graphs and
  needs no per-metric setup. One endpoint matches one series per adapter per metric, so the
  tables stay exact up to 10,000 adapters on an endpoint.

Copies and instances: SageMaker documents no copy-count or instance-count metric in
``AWS/SageMaker`` for inference components
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html). The row shows the reservation
metrics of ``/aws/sagemaker/Endpoints`` (share of the instances' GPUs, CPUs and memory the copies
reserve), which move with both, and the base component's ``InvocationsPerCopy``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct, IValidation

from cdk_adapters.contract import request_metrics as contract
from cdk_adapters.monitoring.metric_source import RequestMetricSource
from cdk_adapters.problems import Problem

MAX_WIDGETS_PER_DASHBOARD = 500
MAX_METRICS_PER_WIDGET = 100
MAX_METRICS_PER_DASHBOARD = 500
INSIGHTS_MAX_SERIES = 500
INSIGHTS_MAX_METRICS_PROCESSED = 10_000
DEFAULT_TOP_N = 10
ENDPOINTS_NAMESPACE = "/aws/sagemaker/Endpoints"
"""Reservation metrics of inference-component endpoints (dimensions EndpointName, VariantName)."""

WIDTH = 24
TOP_TABLES = (
    ("Most requests", "COUNT", contract.ERRORS_5XX.name),
    ("Most 5xx answers", "SUM", contract.ERRORS_5XX.name),
    ("Highest average latency (ms)", "AVG", contract.LATENCY.name),
    ("Highest cold-start share (0-1)", "AVG", contract.COLD_STARTS.name),
    ("Most throttled requests (429)", "SUM", contract.THROTTLED.name),
    ("Highest average queue wait (ms)", "AVG", contract.QUEUE_WAIT.name),
    ("Highest peak in flight", "MAX", contract.IN_FLIGHT_METRIC.name),
)
"""(title, Metrics Insights function, metric): one per-adapter table each. The last three show who
is throttled (over its limits), starved (waits for a place) and who holds the engine."""
ENDPOINT_ROWS_SERIES = 40
"""Series the endpoint rows may use (16 today), kept out of the per-adapter tables' share of
`MAX_METRICS_PER_DASHBOARD`."""


def dashboard_top_n_problems(top_n: int, published: frozenset[str], subject: str) -> list[Problem]:
    """`top_n` too large for the tables these metrics make: each may return `top_n` series."""
    tables = sum(1 for _, _, metric in TOP_TABLES if metric in published)
    if not tables:
        return []
    most = (MAX_METRICS_PER_DASHBOARD - ENDPOINT_ROWS_SERIES) // tables
    if top_n <= most:
        return []
    return [
        Problem(
            subject,
            "dashboard_top_n",
            f"{top_n} x {tables} per-adapter tables passes the {MAX_METRICS_PER_DASHBOARD} series a dashboard is "
            f"planned for; at most {most} with these metrics (or publish fewer: request_metrics.metrics)",
        )
    ]


def top_adapters_query(namespace: str, endpoint_name: str, function: str, metric: str, limit: int) -> str:
    """A Metrics Insights query: the `limit` adapters of one endpoint with the highest `function`(`metric`).

    ``SCHEMA(namespace, Adapter, EndpointName)`` keeps only the per-adapter series (the rollup has
    no ``Adapter``), ``WHERE`` keeps this endpoint's.
    """
    return (
        f'SELECT {function}({metric}) FROM SCHEMA("{namespace}", {contract.ADAPTER_DIMENSION}, {contract.ENDPOINT_DIMENSION}) '
        f"WHERE {contract.ENDPOINT_DIMENSION} = '{endpoint_name}' GROUP BY {contract.ADAPTER_DIMENSION} "
        f"ORDER BY {function}() DESC LIMIT {limit}"
    )


class EndpointDashboard(Construct):
    """The endpoint's dashboard in the endpoint's stack, named after the endpoint and its region:
    dashboards are global to an account ("All dashboards in your account are global, not
    region-specific", AWS::CloudWatch::Dashboard)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        dashboard_name: str,
        rollup: RequestMetricSource | None,
        base_component: Any,
        endpoint_name: str,
        variant_name: str,
        tiers: Mapping[int, Any] | None = None,
        alarms: Sequence[cloudwatch.IAlarm] = (),
        top_n: int = DEFAULT_TOP_N,
    ) -> None:
        """
        :param rollup: the endpoint's request metrics; None (EMF off) leaves out the container rows.
        :param base_component: the `BaseInferenceComponent` (GPU utilisation, copies).
        :param tiers: rank -> base component of each rank tier above the first, drawn beside it. Default none.
        :param top_n: adapters per top-N table (1 to 100).
        """
        super().__init__(scope, id)
        self.top_n = top_n
        period = Duration.minutes(5)
        rows: list[list[cloudwatch.IWidget]] = [
            [
                cloudwatch.TextWidget(
                    markdown=(
                        f"# {endpoint_name}\nRequests, latency and errors as the serving container counts them "
                        f"(namespace `{rollup.settings.namespace if rollup else 'EMF off'}`), utilisation and copies as "
                        "SageMaker reports them. Per-adapter tables rank every adapter of the endpoint (Metrics Insights)."
                    ),
                    width=WIDTH,
                    height=2,
                )
            ]
        ]
        published = rollup.settings.published if rollup else frozenset()
        if rollup is not None and published:
            rows.append(self._request_row(rollup, published, period))
            fair_share = self._fair_share_row(rollup, published, period)
            if fair_share:
                rows.append(fair_share)
        rows.append(self._capacity_row(base_component, dict(tiers or {}), endpoint_name, variant_name, period))
        if alarms:
            rows.append([cloudwatch.AlarmStatusWidget(title="Endpoint alarms", alarms=list(alarms), width=WIDTH, height=3)])
        if rollup is not None:
            tables: list[cloudwatch.IWidget] = [
                cloudwatch.GraphWidget(
                    title=f"Top {top_n} adapters: {title}",
                    view=cloudwatch.GraphWidgetView.BAR,
                    left=[
                        cloudwatch.MathExpression(
                            expression=top_adapters_query(
                                rollup.settings.namespace, rollup.endpoint_name, function, metric, top_n
                            ),
                            using_metrics={},
                            label="",
                            period=Duration.hours(1),
                        )
                    ],
                    width=WIDTH // 2,
                    height=6,
                )
                for title, function, metric in TOP_TABLES
                if metric in published
            ]
            for start in range(0, len(tables), 2):
                rows.append(tables[start : start + 2])
        self.widgets = [widget for row in rows for widget in row]
        self.dashboard = cloudwatch.Dashboard(self, "Resource", dashboard_name=dashboard_name, widgets=rows)
        self.node.add_validation(_DashboardLimits(self))

    @staticmethod
    def _request_row(rollup: RequestMetricSource, published: frozenset[str], period: Duration) -> list[cloudwatch.IWidget]:
        row: list[cloudwatch.IWidget] = []
        if contract.ERRORS_5XX.name in published:
            row.append(
                cloudwatch.GraphWidget(title="Requests", left=[rollup.metric_requests(period=period, label="requests")], width=6)
            )
        if contract.LATENCY.name in published or contract.TIME_TO_FIRST_TOKEN.name in published:
            latency = []
            if contract.LATENCY.name in published:
                latency += [
                    rollup.metric_request_latency(statistic=statistic, period=period, label=f"latency {statistic}")
                    for statistic in ("p50", "p95", "p99")
                ]
            if contract.TIME_TO_FIRST_TOKEN.name in published:
                latency.append(rollup.metric_time_to_first_token(period=period, label="time to first token p95"))
            row.append(cloudwatch.GraphWidget(title="Latency (ms)", left=latency, width=6))
        errors = []
        if contract.ERRORS_4XX.name in published:
            errors.append(rollup.metric_request_errors_4xx(period=period, label="4xx"))
        if contract.ERRORS_5XX.name in published:
            errors.append(rollup.metric_request_errors_5xx(period=period, label="5xx"))
        if errors:
            row.append(cloudwatch.GraphWidget(title="Errors", left=errors, width=6))
        if contract.COLD_STARTS.name in published:
            row.append(
                cloudwatch.GraphWidget(
                    title="Cold-start share (0-1)",
                    left=[rollup.metric_cold_start_share(period=period, label="cold share")],
                    width=6,
                )
            )
        return row

    @staticmethod
    def _fair_share_row(rollup: RequestMetricSource, published: frozenset[str], period: Duration) -> list[cloudwatch.IWidget]:
        """Who waits for a place and who is refused over a limit, endpoint-wide (the tables say which adapter)."""
        left = []
        if contract.QUEUE_WAIT.name in published:
            left = [
                rollup.metric_queue_wait(statistic=statistic, period=period, label=f"queue wait {statistic}")
                for statistic in ("p50", "p95")
            ]
        right = []
        if contract.THROTTLED.name in published:
            right.append(rollup.metric_throttled_requests(period=period, label="throttled (429)"))
        if contract.IN_FLIGHT_METRIC.name in published:
            right.append(rollup.metric_in_flight(period=period, label="in flight, peak per adapter"))
        if not left and not right:
            return []
        return [
            cloudwatch.GraphWidget(title="Fair share: queue wait (ms), throttled, in flight", left=left, right=right, width=WIDTH)
        ]

    @staticmethod
    def _capacity_row(
        base_component: Any, tiers: dict[int, Any], endpoint_name: str, variant_name: str, period: Duration
    ) -> list[cloudwatch.IWidget]:
        dimensions = {"EndpointName": endpoint_name, "VariantName": variant_name}
        reservation = [
            cloudwatch.Metric(
                namespace=ENDPOINTS_NAMESPACE,
                metric_name=name,
                dimensions_map=dimensions,
                statistic="Average",
                period=period,
                label=label,
            )
            for name, label in (
                ("GPUReservation", "GPUs reserved %"),
                ("CPUReservation", "CPUs reserved %"),
                ("MemoryReservation", "memory reserved %"),
            )
        ]
        return [
            cloudwatch.GraphWidget(
                title="GPU utilisation (%)",
                left=[
                    base_component.metric_gpu_utilization(period=period, label="GPU"),
                    base_component.metric_gpu_memory_utilization(period=period, label="GPU memory"),
                    *(tier.metric_gpu_utilization(period=period, label=f"GPU, rank-{rank} tier") for rank, tier in tiers.items()),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Copies and instances (reservations)",
                left=reservation,
                right=[
                    base_component.metric_invocations_per_copy(period=period, label="invocations per copy"),
                    *(
                        tier.metric_invocations_per_copy(period=period, label=f"invocations per copy, rank-{rank} tier")
                        for rank, tier in tiers.items()
                    ),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="SageMaker invocations (base component)",
                left=[
                    base_component.metric_invocations(period=period, label="invocations"),
                    base_component.metric_invocation_5xx_errors(period=period, label="5xx"),
                ],
                width=8,
            ),
        ]


def dashboard_limit_problems(body: dict[str, Any]) -> list[str]:
    """Every CloudWatch limit a dashboard body passes (widgets, metrics per widget and in all,
    Metrics Insights series). Counts each series a query may return (its LIMIT) as a metric."""
    found: list[str] = []
    widgets = body.get("widgets", [])
    if len(widgets) > MAX_WIDGETS_PER_DASHBOARD:
        found.append(f"{len(widgets)} widgets; a dashboard holds {MAX_WIDGETS_PER_DASHBOARD}")
    total = 0
    for index, widget in enumerate(widgets):
        metrics = widget.get("properties", {}).get("metrics", [])
        if len(metrics) > MAX_METRICS_PER_WIDGET:
            found.append(f"widget {index} has {len(metrics)} metrics; a widget holds {MAX_METRICS_PER_WIDGET}")
        for entry in metrics:
            expression = next((item.get("expression") for item in entry if isinstance(item, dict) and "expression" in item), None)
            if isinstance(expression, str) and expression.lstrip().upper().startswith("SELECT"):
                limit = _query_limit(expression)
                if limit is None or limit > INSIGHTS_MAX_SERIES:
                    found.append(
                        f"widget {index}: a Metrics Insights query needs ORDER BY ... LIMIT <= {INSIGHTS_MAX_SERIES}: {expression}"
                    )
                total += limit or INSIGHTS_MAX_SERIES
            else:
                total += 1
    if total > MAX_METRICS_PER_DASHBOARD:
        found.append(f"{total} metrics and query series; plan for at most {MAX_METRICS_PER_DASHBOARD} per dashboard")
    return found


def _query_limit(expression: str) -> int | None:
    words = expression.upper().split()
    if "ORDER" not in words or "LIMIT" not in words:
        return None
    try:
        return int(words[words.index("LIMIT") + 1])
    except (IndexError, ValueError):
        return None


@jsii.implements(IValidation)
class _DashboardLimits:
    def __init__(self, dashboard: EndpointDashboard) -> None:
        self._dashboard = dashboard

    def validate(self) -> list[str]:
        stack = Stack.of(self._dashboard)
        widgets = [stack.resolve(widget.to_json()) for widget in self._dashboard.widgets]
        flat = [item for rendered in widgets for item in rendered]
        body = json.loads(json.dumps({"widgets": flat}, default=str))
        return [f"{self._dashboard.node.path}: {problem}" for problem in dashboard_limit_problems(body)]
