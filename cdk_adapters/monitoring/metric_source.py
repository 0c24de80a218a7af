"""The container's per-request metrics, seen from the constructs: settings and typed ``metric_*`` methods.

The serving container embeds per-adapter metrics in its request log line (CloudWatch Embedded
Metric Format); their names, units, dimensions and container variables are the contract in
`cdk_adapters.contract.request_metrics`. This module is the construct side of that contract:

* `RequestMetrics` - the endpoint's props (namespace, which metrics, EMF on or off), rendered into
  the container environment through the contract's own `environment()`;
* `RequestMetricSource` - one dimension set (one adapter, or the endpoint rollup) with a typed
  method per metric, so alarms and dashboards never spell a metric name or a dimension by hand.

A metric the settings leave out (or EMF off) is refused when asked for, naming the metric: an
alarm on a metric that is never published would sit in INSUFFICIENT_DATA forever.

On SageMaker the ``Adapter`` dimension is the name SageMaker registers the adapter under, which
AWS's multi-adapter workshop logs show is the adapter's inference component name
(``Registered adapter <ic> ...`` in aws-samples/sagemaker-genai-hosting-examples,
04-workshops/advanced_hosting/multi_adapter/multi_adapter_hosting.ipynb). The endpoint therefore binds each
adapter's source to its component name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from cdk_adapters.contract import request_metrics as contract
from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_PERIOD = Duration.minutes(5)


@dataclass(frozen=True)
class RequestMetrics:
    """What the container publishes per request; each metric per adapter is a billed custom metric."""

    namespace: str = contract.DEFAULT_NAMESPACE
    """CloudWatch namespace. Default ``CdkAdapters`` (shared by endpoints; the ``EndpointName``
    dimension keeps them apart)."""
    metrics: tuple[str, ...] | None = None
    """Metric names from `cdk_adapters.contract.request_metrics.METRICS`. Default: all ten."""
    emf: bool = True
    """Embed the metrics in the log line. False: plain JSON lines and no custom metrics (then no
    per-adapter alarms or rows can be built)."""

    def problems(self, subject: str) -> list[Problem]:
        return contract.problems(namespace=self.namespace, metrics=self.metrics, emf=self.emf, subject=subject)

    def environment(self, endpoint_name: str, subject: str) -> dict[str, str]:
        """The container variables (the contract renders them; raises on any problem)."""
        return contract.environment(
            namespace=self.namespace, metrics=self.metrics, emf=self.emf, endpoint_name=endpoint_name, subject=subject
        )

    @property
    def published(self) -> frozenset[str]:
        """The metric names that reach CloudWatch (none with EMF off)."""
        if not self.emf:
            return frozenset()
        return frozenset(spec.name for spec in contract.METRICS) if self.metrics is None else frozenset(self.metrics)


@dataclass(frozen=True)
class RequestMetricSource:
    """One dimension set of the request metrics: an adapter (``adapter`` set) or the endpoint rollup."""

    settings: RequestMetrics
    endpoint_name: str
    adapter: str | None = None
    """The ``Adapter`` dimension value (the adapter's inference component name); None: the rollup."""
    subject: str = field(default="request metrics", compare=False)

    @property
    def dimensions(self) -> dict[str, str]:
        dimensions = {contract.ENDPOINT_DIMENSION: self.endpoint_name}
        if self.adapter is not None:
            dimensions[contract.ADAPTER_DIMENSION] = self.adapter
        return dimensions

    def for_adapter(self, adapter_dimension: str, subject: str) -> RequestMetricSource:
        return RequestMetricSource(self.settings, self.endpoint_name, adapter_dimension, subject)

    def metric_problems(self, names: Iterable[str], field_name: str) -> list[Problem]:
        """A problem for each name that is unknown or not published by these settings."""
        found = []
        for name in names:
            if name not in contract.METRICS_BY_NAME:
                found.append(
                    Problem(self.subject, field_name, f"unknown metric {name!r}; known: {', '.join(contract.METRICS_BY_NAME)}")
                )
            elif name not in self.settings.published:
                why = (
                    "EMF is off (request_metrics.emf=False)" if not self.settings.emf else "request_metrics.metrics leaves it out"
                )
                found.append(Problem(self.subject, field_name, f"needs metric {name!r}, which is not published: {why}"))
        return found

    def metric(self, metric_name: str, **props: Any) -> cloudwatch.Metric:
        """Any request metric of this dimension set; refused when unknown or not published."""
        problems = self.metric_problems([metric_name], "metric_name")
        if problems:
            raise ConfigurationError(problems, heading=f"no request metric {metric_name!r}")
        spec = contract.METRICS_BY_NAME[metric_name]
        options = {"statistic": spec.statistic, "period": DEFAULT_PERIOD, **props}
        return cloudwatch.Metric(
            namespace=self.settings.namespace, metric_name=metric_name, dimensions_map=self.dimensions, **options
        )

    # ------------------------------------------------------------- one method per contract metric

    def metric_request_latency(self, **props: Any) -> cloudwatch.Metric:
        """Request arrival to the last response byte, milliseconds. Default: p95 over 5 minutes."""
        return self.metric(contract.LATENCY.name, **props)

    def metric_time_to_first_token(self, **props: Any) -> cloudwatch.Metric:
        """Time to the first generated token, milliseconds. Default: p95 over 5 minutes."""
        return self.metric(contract.TIME_TO_FIRST_TOKEN.name, **props)

    def metric_prompt_tokens(self, **props: Any) -> cloudwatch.Metric:
        """Prompt tokens processed. Default: Sum over 5 minutes."""
        return self.metric(contract.PROMPT_TOKENS_METRIC.name, **props)

    def metric_output_tokens(self, **props: Any) -> cloudwatch.Metric:
        """Tokens generated. Default: Sum over 5 minutes."""
        return self.metric(contract.OUTPUT_TOKENS_METRIC.name, **props)

    def metric_request_errors_4xx(self, **props: Any) -> cloudwatch.Metric:
        """Requests answered 4xx. Default: Sum; with ``statistic="Average"`` the client-error share (0-1)."""
        return self.metric(contract.ERRORS_4XX.name, **props)

    def metric_request_errors_5xx(self, **props: Any) -> cloudwatch.Metric:
        """Requests answered 5xx. Default: Sum; with ``statistic="Average"`` the error rate (0-1)."""
        return self.metric(contract.ERRORS_5XX.name, **props)

    def metric_cold_starts(self, **props: Any) -> cloudwatch.Metric:
        """Requests whose adapter was not GPU-resident. Default: Sum; Average is the cold-start share."""
        return self.metric(contract.COLD_STARTS.name, **props)

    def metric_queue_wait(self, **props: Any) -> cloudwatch.Metric:
        """Time waited for a place in the engine (fair share), milliseconds. Default: p95 over 5 minutes."""
        return self.metric(contract.QUEUE_WAIT.name, **props)

    def metric_throttled_requests(self, **props: Any) -> cloudwatch.Metric:
        """Requests refused with 429 over the adapter's limits. Default: Sum over 5 minutes."""
        return self.metric(contract.THROTTLED.name, **props)

    def metric_throttled_share(self, **props: Any) -> cloudwatch.Metric:
        """Share of requests refused with 429 over the adapter's limits, 0-1 (Average of a 0/1 metric)."""
        return self.metric(contract.THROTTLED.name, **{"statistic": "Average", **props})

    def metric_in_flight(self, **props: Any) -> cloudwatch.Metric:
        """Requests inside the engine at once (fair share on). Default: Maximum over 5 minutes."""
        return self.metric(contract.IN_FLIGHT_METRIC.name, **props)

    def metric_requests(self, **props: Any) -> cloudwatch.Metric:
        """Requests counted by the container: the SampleCount of the error metric every line carries."""
        return self.metric(contract.ERRORS_5XX.name, **{"statistic": "SampleCount", **props})

    def metric_error_rate(self, **props: Any) -> cloudwatch.Metric:
        """Share of requests answered 5xx, 0-1 (the Average of a 0/1 metric: one metric, no math)."""
        return self.metric(contract.ERRORS_5XX.name, **{"statistic": "Average", **props})

    def metric_cold_start_share(self, **props: Any) -> cloudwatch.Metric:
        """Share of requests that loaded their adapter, 0-1: rising means it fell out of the resident
        set (raise ``max_loras`` or add an instance)."""
        return self.metric(contract.COLD_STARTS.name, **{"statistic": "Average", **props})


class RequestMetricMethods:
    """Typed request-metric methods for a construct bound to a `RequestMetricSource` (an adapter's
    component): ``component.metric_request_latency()`` and so on, forwarding to the source."""

    _request_metric_source: RequestMetricSource | None = None

    def bind_request_metrics(self, source: RequestMetricSource) -> None:
        """Called by the endpoint that serves this component."""
        self._request_metric_source = source

    @property
    def request_metric_source(self) -> RequestMetricSource:
        """This adapter's request metrics (``{EndpointName, Adapter}``)."""
        if self._request_metric_source is None:
            raise ConfigurationError(
                [
                    Problem(
                        repr(self),
                        "request_metric_source",
                        "is not served by a MultiAdapterEndpoint, which binds its request metrics",
                    )
                ]
            )
        return self._request_metric_source

    def metric_request_latency(self, **props: Any) -> cloudwatch.Metric:
        """Container-measured request latency, ms (`RequestMetricSource.metric_request_latency`). Default: p95."""
        return self.request_metric_source.metric_request_latency(**props)

    def metric_time_to_first_token(self, **props: Any) -> cloudwatch.Metric:
        """Time to first token, ms. Default: p95."""
        return self.request_metric_source.metric_time_to_first_token(**props)

    def metric_prompt_tokens(self, **props: Any) -> cloudwatch.Metric:
        """Prompt tokens. Default: Sum."""
        return self.request_metric_source.metric_prompt_tokens(**props)

    def metric_output_tokens(self, **props: Any) -> cloudwatch.Metric:
        """Generated tokens. Default: Sum."""
        return self.request_metric_source.metric_output_tokens(**props)

    def metric_request_errors_4xx(self, **props: Any) -> cloudwatch.Metric:
        """4xx answers counted by the container. Default: Sum."""
        return self.request_metric_source.metric_request_errors_4xx(**props)

    def metric_request_errors_5xx(self, **props: Any) -> cloudwatch.Metric:
        """5xx answers counted by the container. Default: Sum."""
        return self.request_metric_source.metric_request_errors_5xx(**props)

    def metric_cold_starts(self, **props: Any) -> cloudwatch.Metric:
        """Requests that loaded their adapter. Default: Sum."""
        return self.request_metric_source.metric_cold_starts(**props)

    def metric_error_rate(self, **props: Any) -> cloudwatch.Metric:
        """5xx share, 0-1. Default: Average."""
        return self.request_metric_source.metric_error_rate(**props)

    def metric_cold_start_share(self, **props: Any) -> cloudwatch.Metric:
        """Cold-start share, 0-1. Default: Average."""
        return self.request_metric_source.metric_cold_start_share(**props)

    def metric_queue_wait(self, **props: Any) -> cloudwatch.Metric:
        """Time waited for a place in the engine, ms. Default: p95."""
        return self.request_metric_source.metric_queue_wait(**props)

    def metric_throttled_requests(self, **props: Any) -> cloudwatch.Metric:
        """429 answers over the adapter's limits. Default: Sum."""
        return self.request_metric_source.metric_throttled_requests(**props)

    def metric_throttled_share(self, **props: Any) -> cloudwatch.Metric:
        """Throttled share, 0-1. Default: Average."""
        return self.request_metric_source.metric_throttled_share(**props)

    def metric_in_flight(self, **props: Any) -> cloudwatch.Metric:
        """Requests inside the engine at once. Default: Maximum."""
        return self.request_metric_source.metric_in_flight(**props)
