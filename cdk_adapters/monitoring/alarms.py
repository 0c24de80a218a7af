"""Alarms on the container's request metrics: error rate, p95 latency, cold-start share, and the
fair-share signals (throttled share, p95 queue wait).

Three signals on by default, and two off by default, for the endpoint as a whole (the
``{EndpointName}`` rollup) and for each adapter that opts in (``{EndpointName, Adapter}``):

* ``error_rate`` - the share of requests answered 5xx (the Average of ``Errors5XX``, a 0/1 metric);
* ``latency_p95`` - the 95th percentile of ``Latency`` (milliseconds, arrival to last byte);
* ``cold_start_share`` - the share of requests that had to load their adapter (``ColdStarts``):
  rising means the adapter fell out of vLLM's resident set; raise ``max_loras``/``max_cpu_loras``
  or add an instance;
* ``throttled_share`` (off by default) - the share of requests refused with 429 over their
  adapter's limits (the Average of ``Throttled``): a tenant that is throttled, and what to do about
  it, is in docs/monitoring.md;
* ``queue_wait_p95`` (off by default) - the 95th percentile of ``QueueWait``: requests that wait
  long for a place in the engine, a tenant starved by the others (or an engine too small for all).

Each alarm watches one metric with one statistic, no metric math, so each costs one standard
alarm metric. "CloudWatch needs raw data points to calculate percentile statistics" (the
GetMetricStatistics API reference, https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html);
each request line carries one raw value per metric, so p95 is available (INFERRED: no AWS page
says how EMF extraction stores the values; verify on a live endpoint). Missing data is "not
breaching": an adapter nobody calls is not failing. Alarm names may have 255 characters
(PutMetricAlarm); SageMaker's rollback configuration takes 1 to 10 alarms (see `deployment`).

Where they live: an adapter's alarms are children of its inference component, so they sit in the
same (nested) stack and count toward that shard's resource capacity; three alarms make an adapter
four resources instead of one. They are refused before anything is created when the shard would
pass its capacity, and adding an adapter's alarms changes no other resource. Endpoint alarms live
in the endpoint's stack, where the base component's rollback configuration can name them.

Alarm names are deterministic (``<component name>/<alarm>`` and ``<prefix>/<alarm>``; ``/`` is in
no SageMaker name, so the two never collide) so that a notification names the adapter. CloudWatch
allows 255 characters; component names have at most 63.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdk_adapters.contract import request_metrics as contract
from cdk_adapters.monitoring import thresholds
from cdk_adapters.monitoring.metric_source import RequestMetricSource
from cdk_adapters.private.nag_acknowledgments import acknowledge_alarm_without_action, alarm_without_topic_reason
from cdk_adapters.problems import Problem

ERROR_RATE = "error_rate"
LATENCY_P95 = "latency_p95"
COLD_START_SHARE = "cold_start_share"
THROTTLED_SHARE = "throttled_share"
QUEUE_WAIT_P95 = "queue_wait_p95"
ALARM_KINDS = (ERROR_RATE, LATENCY_P95, COLD_START_SHARE, THROTTLED_SHARE, QUEUE_WAIT_P95)
FAIR_SHARE_ALARM_KINDS = (QUEUE_WAIT_P95,)
"""Kinds whose metric only fair share publishes (refused with ``fair_share=False``)."""
METRIC_OF_ALARM = {
    ERROR_RATE: contract.ERRORS_5XX.name,
    LATENCY_P95: contract.LATENCY.name,
    COLD_START_SHARE: contract.COLD_STARTS.name,
    THROTTLED_SHARE: contract.THROTTLED.name,
    QUEUE_WAIT_P95: contract.QUEUE_WAIT.name,
}
"""The contract metric each alarm needs published."""
ALARM_NAME_MAX_LENGTH = 255
PERIOD_CHOICES_SECONDS = (60, 300, 900, 3600)
"""Standard-resolution periods (a multiple of 60 s; these four are the usual choices)."""


@dataclass(frozen=True)
class AlarmThresholds:
    """When each alarm fires; None turns that alarm off. Overrides replace single fields."""

    error_rate_percent: float | None = 5.0
    """5xx answers as a share of requests, percent. Default 5."""
    latency_p95_ms: float | None = 30_000.0
    """p95 request latency, ms. Default 30 s: half of SageMaker's 60 s invocation limit."""
    cold_start_share_percent: float | None = 25.0
    """Requests that loaded their adapter, percent. Default 25."""
    throttled_share_percent: float | None = None
    """Requests refused with 429 over their adapter's limits, percent. Default None: off (a tenant
    over a limit it was given may be working as intended; turn it on for tenants that should not be)."""
    queue_wait_p95_ms: float | None = None
    """p95 wait for a place in the engine (fair share), ms. Default None: off. Needs ``fair_share=True``."""
    period: Duration = field(default_factory=lambda: Duration.minutes(5))
    """Length of one evaluated period. Default 5 minutes."""
    evaluation_periods: int = 3
    """Periods looked at. Default 3."""
    datapoints_to_alarm: int = 2
    """Breaching periods among them that fire the alarm. Default 2 (of 3)."""

    def override(self, overrides: Mapping[str, Any]) -> AlarmThresholds:
        """These thresholds with some fields replaced (a manifest row's ``alarms:`` mapping)."""
        return replace(self, **dict(overrides))

    @property
    def enabled(self) -> tuple[str, ...]:
        """The alarm kinds these thresholds create, in `ALARM_KINDS` order."""
        values = {
            ERROR_RATE: self.error_rate_percent,
            LATENCY_P95: self.latency_p95_ms,
            COLD_START_SHARE: self.cold_start_share_percent,
            THROTTLED_SHARE: self.throttled_share_percent,
            QUEUE_WAIT_P95: self.queue_wait_p95_ms,
        }
        return tuple(kind for kind in ALARM_KINDS if values[kind] is not None)

    def problems(self, subject: str, field_prefix: str = "alarms") -> list[Problem]:
        found: list[Problem] = []

        def bad(name: str, message: str) -> None:
            found.append(Problem(subject, f"{field_prefix}.{name}", message))

        for name in thresholds.THRESHOLD_FIELDS:
            message = None if name == thresholds.PERIOD_FIELD else thresholds.value_error(name, getattr(self, name))
            if message:
                bad(name, message)
        seconds = self.period.to_seconds() if isinstance(self.period, Duration) else None
        if seconds is None or seconds < 60 or seconds % 60:
            bad("period", f"must be a Duration of whole minutes (standard-resolution metrics), got {self.period!r}")
        if (
            isinstance(self.datapoints_to_alarm, int)
            and isinstance(self.evaluation_periods, int)
            and self.datapoints_to_alarm > self.evaluation_periods
        ):
            bad(
                "datapoints_to_alarm",
                f"({self.datapoints_to_alarm}) must not exceed evaluation_periods ({self.evaluation_periods})",
            )
        return found


THRESHOLD_FIELDS = tuple(f.name for f in fields(AlarmThresholds))
"""The dataclass's fields; `cdk_adapters.monitoring.thresholds.THRESHOLD_FIELDS` names the same (a test holds them equal)."""


@dataclass(frozen=True)
class MonitoringAlarms:
    """The endpoint's alarm settings: endpoint-level thresholds, adapter defaults, notifications."""

    endpoint: AlarmThresholds | None = field(default_factory=AlarmThresholds)
    """Alarms on the endpoint rollup. Default: all three. None: no endpoint alarms."""
    adapters: AlarmThresholds = field(default_factory=AlarmThresholds)
    """What an adapter gets when it opts in (`MultiAdapterEndpoint.add_adapter_alarms`, or a
    manifest row's ``alarms:``), before its own overrides."""
    adapter_names: Sequence[str] = ()
    """Adapters that opt in with the defaults; checked at synth against the endpoint's adapters."""
    topic: sns.ITopic | None = None
    """SNS topic told when an alarm fires and when it is OK again. Default: none (the alarms still
    drive rollbacks and show on the dashboard)."""
    runbook_url: str | None = None
    """The page the on-call reads for these alarms (a team wiki, or this library's monitoring guide
    where the team publishes it). Every alarm's description then ends with ``Runbook: <url>#<kind>``,
    the kind as in the alarm's name (``error-rate``, ``latency-p95``, ``cold-start-share``,
    ``throttled-share``, ``queue-wait-p95``); the monitoring guide has one section per kind under
    those anchors. Default None: each description says what to do in its own words and names no
    document (a path into this repository means nothing to whoever reads the alarm)."""

    def problems(self, subject: str) -> list[Problem]:
        found = runbook_url_problems(self.runbook_url, subject)
        found += self.adapters.problems(subject, "alarms.adapters")
        if self.endpoint is not None:
            found += self.endpoint.problems(subject, "alarms.endpoint")
        if isinstance(self.adapter_names, str):
            found.append(
                Problem(
                    subject, "alarms.adapter_names", f"must be a list of adapter names, got the string {self.adapter_names!r}"
                )
            )
        return found


RUNBOOK_URL_MAX_LENGTH = 300
"""Keeps the longest description with its runbook line within CloudWatch's 1,024 characters."""


def runbook_url_problems(url: object, subject: str) -> list[Problem]:
    """An absolute http(s) URL without a fragment (the alarm kind is appended as one)."""
    if url is None:
        return []
    if not isinstance(url, str) or not url.startswith(("https://", "http://")) or any(c.isspace() for c in url):
        return [Problem(subject, "alarms.runbook_url", f"must be an http(s) URL without spaces, got {url!r}")]
    if "#" in url:
        return [Problem(subject, "alarms.runbook_url", "must not have a fragment: each alarm appends its kind as one")]
    if len(url) > RUNBOOK_URL_MAX_LENGTH:
        return [Problem(subject, "alarms.runbook_url", f"is {len(url)} characters; at most {RUNBOOK_URL_MAX_LENGTH}")]
    return []


def runbook_line(runbook_url: str | None, kind: str) -> str:
    """What ends an alarm's description: where to read about it, or nothing."""
    return "" if runbook_url is None else f" Runbook: {runbook_url}#{kind.replace('_', '-')}"


def metric_problems(
    thresholds: AlarmThresholds, source: RequestMetricSource, field_name: str, *, fair_share: bool = True
) -> list[Problem]:
    """A problem for each enabled alarm whose metric is not published (or, fair share off, never has data)."""
    found = source.metric_problems([METRIC_OF_ALARM[kind] for kind in thresholds.enabled], field_name)
    if not fair_share:
        found += [
            Problem(
                source.subject,
                field_name,
                f"{kind} needs fair share on (fair_share=True): without it no request waits for a place, "
                f"so {METRIC_OF_ALARM[kind]} has no data",
            )
            for kind in thresholds.enabled
            if kind in FAIR_SHARE_ALARM_KINDS
        ]
    return found


def create_alarms(
    scope: Construct,
    *,
    source: RequestMetricSource,
    thresholds: AlarmThresholds,
    name_prefix: str,
    what: str,
    topic: sns.ITopic | None,
    rollback_kinds: Sequence[str] = (),
    on_dashboard: bool = False,
    runbook_url: str | None = None,
) -> dict[str, cloudwatch.Alarm]:
    """One alarm per enabled kind, as children of `scope`; ``what`` names the subject in descriptions.

    `rollback_kinds` (the kinds a rolling update rolls back on) and `on_dashboard` only say, in the
    acknowledgment of an alarm without a topic, what does act on it.
    """
    common: dict[str, Any] = {
        "evaluation_periods": thresholds.evaluation_periods,
        "datapoints_to_alarm": thresholds.datapoints_to_alarm,
        "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
    }
    specs = _alarm_specs(source, thresholds, what)
    alarms: dict[str, cloudwatch.Alarm] = {}
    for kind in thresholds.enabled:  # only these: a disabled alarm's metric may not be published
        construct_id, metric, threshold, description = specs[kind]
        alarm = cloudwatch.Alarm(
            scope,
            construct_id,
            alarm_name=f"{name_prefix}/{kind.replace('_', '-')}",
            alarm_description=description + runbook_line(runbook_url, kind),
            metric=metric(),
            threshold=threshold,
            **common,
        )
        if topic is not None:
            action = cloudwatch_actions.SnsAction(topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        else:
            acknowledge_alarm_without_action(
                alarm, alarm_without_topic_reason(drives_rollback=kind in rollback_kinds, on_dashboard=on_dashboard)
            )
        alarms[kind] = alarm
    return alarms


def _alarm_specs(
    source: RequestMetricSource, thresholds: AlarmThresholds, what: str
) -> dict[str, tuple[str, Callable[[], cloudwatch.IMetric], float, str]]:
    """Kind -> (construct id, the metric to watch, its threshold, the alarm's description)."""
    period = {"period": thresholds.period}
    return {
        ERROR_RATE: (
            "ErrorRate",
            lambda: source.metric_error_rate(**period),
            (thresholds.error_rate_percent or 0) / 100,
            f"{what}: more than {thresholds.error_rate_percent}% of requests answered 5xx. Check the base component's "
            "log group for the failing requests (Logs Insights: event = 'cdk_adapters.request' and status >= 500).",
        ),
        LATENCY_P95: (
            "LatencyP95",
            lambda: source.metric_request_latency(**period),
            thresholds.latency_p95_ms or 0,
            f"{what}: p95 request latency above {thresholds.latency_p95_ms} ms. Look at queueing (InvocationsPerCopy) "
            "and output lengths; add copies or instances if the endpoint is saturated.",
        ),
        COLD_START_SHARE: (
            "ColdStartShare",
            lambda: source.metric_cold_start_share(**period),
            (thresholds.cold_start_share_percent or 0) / 100,
            f"{what}: more than {thresholds.cold_start_share_percent}% of requests loaded their adapter (not GPU-resident). "
            "The adapter keeps falling out of the resident set: raise max_loras / max_cpu_loras or add an instance.",
        ),
        THROTTLED_SHARE: (
            "ThrottledShare",
            lambda: source.metric_throttled_share(**period),
            (thresholds.throttled_share_percent or 0) / 100,
            f"{what}: more than {thresholds.throttled_share_percent}% of requests refused with 429 over the adapter's limits. "
            "Raise its weight or max_queue, add copies, or give the tenant its own endpoint.",
        ),
        QUEUE_WAIT_P95: (
            "QueueWaitP95",
            lambda: source.metric_queue_wait(**period),
            thresholds.queue_wait_p95_ms or 0,
            f"{what}: p95 wait for a place in the engine above {thresholds.queue_wait_p95_ms} ms (starved by fair share). "
            "Raise the adapter's weight, add copies, or give the tenant its own endpoint.",
        ),
    }
