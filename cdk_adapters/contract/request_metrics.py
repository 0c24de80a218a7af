"""The per-request log line and the CloudWatch metrics embedded in it, defined once.

The serving container writes one JSON line per inference request to stdout; SageMaker ships stdout
to CloudWatch Logs. With EMF on (the default), the line is also a CloudWatch *Embedded Metric
Format* document, so CloudWatch extracts per-adapter metrics from it with no metric filter, agent
or API call to set up. The constructs read the same names here to build ``metric_*`` methods,
alarms and dashboards, and render `environment` into the container; the container decodes it with
`from_environment`.

EMF rules this schema follows (AWS, "Specification: Embedded metric format",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html):

* the log event is one JSON object, nothing before or after it; at most 1 MB;
* its root has ``_aws``: an object with ``Timestamp`` (milliseconds since the epoch, a number) and
  ``CloudWatchMetrics``, an array of metric directives;
* a directive has ``Namespace`` (string), ``Dimensions`` (an array of dimension sets; each set is an
  array of at most 30 dimension names) and ``Metrics`` (at most 100 definitions, each ``Name``,
  optional ``Unit`` and ``StorageResolution`` 1 or 60);
* every name a directive uses is a *target member* at the root: a dimension's value is a string,
  a metric's value a number (or an array of numbers); other root members are ignored by EMF.

Dimension names and values follow CloudWatch's ``Dimension`` rules (ASCII, no control characters,
at least one non-blank character; names 1-255 characters, values 1-1024), namespaces
``PutMetricData``'s (ASCII without control characters, not starting with ``AWS/``, which AWS
reserves; 1-255 characters). The ``x-amzn-logs-format`` header is optional for PutLogEvents, so the
lines need nothing from SageMaker's log agent.

The metrics are the request's figures (latency, time to first token, tokens), its outcome (4xx,
5xx, throttled) and what fair share did to it (cold start, queue wait, in-flight).

Each metric in a namespace, per distinct dimension combination, is a billed custom metric: with
the two dimension sets here that is one per enabled metric per adapter, plus one per metric for
the endpoint rollup. That is why the set of metrics is configurable.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdk_adapters.contract.env_values import parse_bool
from cdk_adapters.problems import Problem, raise_if_any

# ------------------------------------------------------------------------------------ log line

REQUEST_EVENT = "cdk_adapters.request"
"""``event`` of the per-request line (Logs Insights and metric filters match on it)."""

EVENT = "event"
ADAPTER = "adapter"
"""The adapter the caller named (``null`` for base-model requests); caller-controlled, never a dimension."""
ROUTE = "route"
STREAM = "stream"
REQUEST_ID = "request_id"
STATUS = "status"
LATENCY_MS = "latency_ms"
TTFT_MS = "ttft_ms"
PROMPT_TOKENS = "prompt_tokens"
OUTPUT_TOKENS = "output_tokens"
COLD = "cold"
QUEUE_MS = "queue_ms"
"""Milliseconds the request waited for a place in the engine (fair share across adapters)."""
IN_FLIGHT = "in_flight"
"""The adapter's requests inside the engine once this one had its place, itself included (fair
share on); ``null`` when the request never held a place."""
ERROR = "error"

LOG_FIELDS = (
    EVENT,
    ADAPTER,
    ROUTE,
    STREAM,
    REQUEST_ID,
    STATUS,
    LATENCY_MS,
    TTFT_MS,
    PROMPT_TOKENS,
    OUTPUT_TOKENS,
    COLD,
    QUEUE_MS,
    IN_FLIGHT,
    ERROR,
)
"""Every line has these, EMF on or off, in this order; values may be ``null``."""

# ---------------------------------------------------------------------------------- dimensions

ENDPOINT_DIMENSION = "EndpointName"
"""The SageMaker endpoint (from `ENDPOINT_NAME_ENV`)."""
ADAPTER_DIMENSION = "Adapter"
"""The registered adapter name, `BASE_MODEL_ADAPTER` or `UNREGISTERED_ADAPTER`."""
DIMENSION_SETS: tuple[tuple[str, ...], ...] = ((ENDPOINT_DIMENSION, ADAPTER_DIMENSION), (ENDPOINT_DIMENSION,))
"""Per adapter, and the endpoint-level rollup over all of them."""

BASE_MODEL_ADAPTER = "__base__"
"""`ADAPTER_DIMENSION` of requests served by the base model (only when base access is on)."""
UNREGISTERED_ADAPTER = "__unregistered__"
"""`ADAPTER_DIMENSION` of requests naming no registered adapter (or none at all, with base access
off), so callers cannot create billed metrics at will."""

# ------------------------------------------------------------------------------------- metrics

STANDARD_RESOLUTION = 60
"""Seconds; EMF's ``StorageResolution`` 60 (1 would be high resolution, with costlier alarms)."""


@dataclass(frozen=True)
class MetricSpec:
    """One CloudWatch metric the request line carries (its ``Name`` is also its root member)."""

    name: str
    unit: str
    """A CloudWatch unit (``Milliseconds``, ``Count``)."""
    statistic: str
    """The statistic a dashboard or alarm should show by default."""
    description: str


LATENCY = MetricSpec("Latency", "Milliseconds", "p95", "Request arrival to the last response byte.")
TIME_TO_FIRST_TOKEN = MetricSpec(
    "TimeToFirstToken",
    "Milliseconds",
    "p95",
    "Time to the first generated token (vLLM's figure, or the first token chunk of a stream).",
)
PROMPT_TOKENS_METRIC = MetricSpec("PromptTokens", "Count", "Sum", "Prompt tokens processed.")
OUTPUT_TOKENS_METRIC = MetricSpec("OutputTokens", "Count", "Sum", "Tokens generated.")
ERRORS_4XX = MetricSpec(
    "Errors4XX",
    "Count",
    "Sum",
    "1 for a 4xx answer, else 0: its Average is the share of client errors.",
)
ERRORS_5XX = MetricSpec(
    "Errors5XX",
    "Count",
    "Sum",
    "1 for a 5xx answer, else 0: its Average is the error rate.",
)
COLD_STARTS = MetricSpec(
    "ColdStarts",
    "Count",
    "Sum",
    "1 when the adapter was not resident in vLLM's --max-loras GPU slots (an estimate), else 0: its "
    "Average is the cold-start share, the signal to raise max_loras or add an instance.",
)

QUEUE_WAIT = MetricSpec(
    "QueueWait",
    "Milliseconds",
    "p95",
    "Time the request waited for a place in the engine (fair share across adapters); only requests "
    "that got a place carry it. A tenant's rising queue wait is its share of a saturated engine.",
)
THROTTLED = MetricSpec(
    "Throttled",
    "Count",
    "Sum",
    "1 when the request was refused with 429 over its adapter's limits, else 0: its Sum is the "
    "throttled count, its Average the throttled share.",
)
IN_FLIGHT_METRIC = MetricSpec(
    "InFlight",
    "Count",
    "Maximum",
    "The adapter's requests inside the engine once this one had its place, itself included: its "
    "Maximum is the adapter's peak concurrency in the period.",
)

THROTTLED_STATUS = 429
"""The status a request over its adapter's limits is answered with (`tenant_limits`)."""

METRICS: tuple[MetricSpec, ...] = (
    LATENCY,
    TIME_TO_FIRST_TOKEN,
    PROMPT_TOKENS_METRIC,
    OUTPUT_TOKENS_METRIC,
    ERRORS_4XX,
    ERRORS_5XX,
    COLD_STARTS,
    QUEUE_WAIT,
    THROTTLED,
    IN_FLIGHT_METRIC,
)
"""Every metric, in the order lines carry them. Errors are split like ``AWS/SageMaker``'s
``Invocation4XXErrors``/``Invocation5XXErrors`` and no finer: a finer class would be a dimension,
multiplying the billed metrics per adapter, while ``status`` and ``error`` stay in the line for
Logs Insights."""
METRICS_BY_NAME: Mapping[str, MetricSpec] = {metric.name: metric for metric in METRICS}

EMF_MAX_METRICS_PER_DIRECTIVE = 100
EMF_MAX_DIMENSIONS_PER_SET = 30


def metric_values(fields: Mapping[str, Any]) -> dict[str, float | int]:
    """The metric members one log line carries, derived from its `LOG_FIELDS`.

    A metric without a value for this request (no tokens on a refusal, no queue wait without fair
    share) is left out, never ``0`` or ``null``; error, cold-start and throttled counts are always
    there, so their Average is a share.
    """
    values: dict[str, float | int] = {}
    if fields.get(LATENCY_MS) is not None:
        values[LATENCY.name] = fields[LATENCY_MS]
    if fields.get(TTFT_MS) is not None:
        values[TIME_TO_FIRST_TOKEN.name] = fields[TTFT_MS]
    if fields.get(PROMPT_TOKENS) is not None:
        values[PROMPT_TOKENS_METRIC.name] = fields[PROMPT_TOKENS]
    if fields.get(OUTPUT_TOKENS) is not None:
        values[OUTPUT_TOKENS_METRIC.name] = fields[OUTPUT_TOKENS]
    status = fields.get(STATUS) or 0
    values[ERRORS_4XX.name] = 1 if 400 <= status < 500 else 0
    values[ERRORS_5XX.name] = 1 if status >= 500 else 0
    values[COLD_STARTS.name] = 1 if fields.get(COLD) else 0
    if fields.get(QUEUE_MS) is not None:
        values[QUEUE_WAIT.name] = fields[QUEUE_MS]
    values[THROTTLED.name] = 1 if status == THROTTLED_STATUS else 0
    if fields.get(IN_FLIGHT) is not None:
        values[IN_FLIGHT_METRIC.name] = fields[IN_FLIGHT]
    return values


def metric_directive(namespace: str, metrics: Iterable[MetricSpec]) -> dict[str, Any]:
    """The ``_aws.CloudWatchMetrics`` entry for a line that carries `metrics` (and both dimensions)."""
    return {
        "Namespace": namespace,
        "Dimensions": [list(dimension_set) for dimension_set in DIMENSION_SETS],
        "Metrics": [{"Name": spec.name, "Unit": spec.unit, "StorageResolution": STANDARD_RESOLUTION} for spec in metrics],
    }


@dataclass(frozen=True)
class RequestLine:
    """One request line as CloudWatch (or a reader of the log group) sees it."""

    fields: dict[str, Any]
    """The `LOG_FIELDS`."""
    metrics: dict[str, float | int]
    """The metrics the line declares (EMF on), by name, with their values; empty for a plain line."""
    dimensions: dict[str, str]
    """`ENDPOINT_DIMENSION` and `ADAPTER_DIMENSION` (EMF on); empty for a plain line."""
    namespace: str | None
    """The directive's namespace; None for a plain line."""


def decode_line(line: str) -> RequestLine:
    """Read a request line back: the reverse of what the container writes.

    Raises ``ValueError`` naming what is wrong (not JSON, not a request line, a declared metric
    that is not in `METRICS` or has no number).
    """
    document = json.loads(line)
    if not isinstance(document, dict) or document.get(EVENT) != REQUEST_EVENT:
        raise ValueError(f"not a {REQUEST_EVENT} line: {line[:120]!r}")
    fields = {name: document.get(name) for name in LOG_FIELDS}
    directives = (document.get("_aws") or {}).get("CloudWatchMetrics") or []
    if not directives:
        return RequestLine(fields, {}, {}, None)
    directive = directives[0]
    metrics: dict[str, float | int] = {}
    for definition in directive.get("Metrics", []):
        name = definition.get("Name")
        if name not in METRICS_BY_NAME:
            raise ValueError(f"the line declares metric {name!r}, which is not in the schema")
        value = document.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"metric {name!r} has no number at the root: {value!r}")
        metrics[name] = value
    dimensions = {name: document[name] for name in (ENDPOINT_DIMENSION, ADAPTER_DIMENSION) if name in document}
    return RequestLine(fields, metrics, dimensions, directive.get("Namespace"))


# --------------------------------------------------------------------------------- environment

EMF_ENV = "CDK_ADAPTERS_METRICS_EMF"
"""``true`` (default) or ``false``: ``false`` writes the plain JSON line, with no metrics."""
NAMESPACE_ENV = "CDK_ADAPTERS_METRICS_NAMESPACE"
"""The CloudWatch namespace; default `DEFAULT_NAMESPACE`."""
METRICS_ENV = "CDK_ADAPTERS_METRICS_NAMES"
"""Comma-separated metric names (e.g. ``Latency,Errors5XX``); default every metric in `METRICS`."""
ENDPOINT_NAME_ENV = "CDK_ADAPTERS_METRICS_ENDPOINT_NAME"
"""The `ENDPOINT_DIMENSION` value. SageMaker tells a container no endpoint name, so the construct
renders it; unset (local runs, tests) it is `LOCAL_ENDPOINT_NAME`."""
ENVIRONMENT_VARIABLES = (EMF_ENV, NAMESPACE_ENV, METRICS_ENV, ENDPOINT_NAME_ENV)

DEFAULT_NAMESPACE = "CdkAdapters"
LOCAL_ENDPOINT_NAME = "local"
RESERVED_NAMESPACE_PREFIX = "AWS/"
NAMESPACE_MAX_LENGTH = 255
DIMENSION_VALUE_MAX_LENGTH = 1024


@dataclass(frozen=True)
class RequestMetricsSettings:
    """What the container embeds in each request line."""

    emf: bool = True
    namespace: str = DEFAULT_NAMESPACE
    metrics: tuple[MetricSpec, ...] = METRICS
    endpoint_name: str = LOCAL_ENDPOINT_NAME


def problems(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    metrics: Iterable[str] | None = None,
    emf: object = True,
    endpoint_name: str | None = None,
    subject: str = "request metrics",
) -> list[Problem]:
    """Everything wrong with these settings, each naming `subject` and the field (`emf` is checked to be a bool)."""
    found = [Problem(subject, "namespace", message) for message in _namespace_problems(namespace)]
    if isinstance(metrics, str):
        found.append(Problem(subject, "metrics", f"must be a list of metric names, got the string {metrics!r}"))
    elif metrics is not None:
        names = list(metrics)
        found += [Problem(subject, "metrics", message) for message in _metric_name_problems(names)]
        if emf and not names:
            found.append(Problem(subject, "metrics", "names no metric; to publish none, turn EMF off instead"))
    if endpoint_name is not None:
        found += [Problem(subject, "endpoint_name", message) for message in _dimension_value_problems(endpoint_name)]
    if not isinstance(emf, bool):
        found.append(Problem(subject, "emf", f"must be True or False, got {emf!r}"))
    return found


def environment(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    metrics: Iterable[str] | None = None,
    emf: bool = True,
    endpoint_name: str | None = None,
    subject: str = "request metrics",
) -> dict[str, str]:
    """The container variables for these settings, defaults spelled out; raises on any problem.

    `metrics` are names from `METRICS` (``None``: all); `endpoint_name` may be a CDK token (left
    out when ``None``: the container then says `LOCAL_ENDPOINT_NAME`).
    """
    if metrics is not None and not isinstance(metrics, str):
        metrics = list(metrics)  # read once: problems() and the rendering below both need it
    raise_if_any(problems(namespace=namespace, metrics=metrics, emf=emf, endpoint_name=endpoint_name, subject=subject))
    names = [spec.name for spec in METRICS] if metrics is None else list(metrics)
    env = {EMF_ENV: "true" if emf else "false", NAMESPACE_ENV: namespace, METRICS_ENV: ",".join(names)}
    if endpoint_name is not None:
        env[ENDPOINT_NAME_ENV] = endpoint_name
    return env


def decode(environ: Mapping[str, str] | None = None) -> tuple[RequestMetricsSettings, list[Problem]]:
    """Settings from the environment, and every problem, each naming its variable."""
    environ = os.environ if environ is None else environ
    found: list[Problem] = []
    emf = parse_bool(environ, EMF_ENV, True, found)
    namespace = environ.get(NAMESPACE_ENV, "").strip() or DEFAULT_NAMESPACE
    found += [Problem(NAMESPACE_ENV, "value", message) for message in _namespace_problems(namespace)]
    metrics = METRICS
    raw_metrics = environ.get(METRICS_ENV)
    if raw_metrics is not None:
        names = [name.strip() for name in raw_metrics.split(",") if name.strip()]
        name_problems = _metric_name_problems(names)
        found += [Problem(METRICS_ENV, "value", message) for message in name_problems]
        if emf and not names:
            found.append(Problem(METRICS_ENV, "value", f"names no metric; to publish none, set {EMF_ENV}=false"))
        if not name_problems:
            wanted = set(names)
            metrics = tuple(spec for spec in METRICS if spec.name in wanted)
    endpoint_name = environ.get(ENDPOINT_NAME_ENV, "").strip() or LOCAL_ENDPOINT_NAME
    found += [Problem(ENDPOINT_NAME_ENV, "value", message) for message in _dimension_value_problems(endpoint_name)]
    return RequestMetricsSettings(emf=emf, namespace=namespace, metrics=metrics, endpoint_name=endpoint_name), found


def from_environment(environ: Mapping[str, str] | None = None) -> RequestMetricsSettings:
    """`decode`, raising `ConfigurationError` with every problem."""
    settings, found = decode(environ)
    raise_if_any(found, "invalid request-metrics settings")
    return settings


# ------------------------------------------------------------------------------------- rules


def _is_printable_ascii(text: str) -> bool:
    return text.isascii() and all(32 <= ord(character) < 127 for character in text)


def _namespace_problems(namespace: object) -> list[str]:
    if not isinstance(namespace, str) or not namespace.strip():
        return [f"must be a non-empty string, got {namespace!r}"]
    found = []
    if len(namespace) > NAMESPACE_MAX_LENGTH:
        found.append(f"is {len(namespace)} characters; CloudWatch allows {NAMESPACE_MAX_LENGTH}")
    if not _is_printable_ascii(namespace):
        found.append(f"{namespace!r} must be ASCII without control characters (CloudWatch's namespace rule)")
    if namespace.upper().startswith(RESERVED_NAMESPACE_PREFIX):
        found.append(f"{namespace!r} starts with {RESERVED_NAMESPACE_PREFIX!r}, which AWS reserves for its services")
    if namespace.startswith(":"):
        found.append(f"{namespace!r} must not start with ':'")
    return found


def _metric_name_problems(names: Sequence[object]) -> list[str]:
    found = []
    seen: set[object] = set()
    for name in names:
        if isinstance(name, str) and name in METRICS_BY_NAME:
            if name in seen:
                found.append(f"{name!r} is listed twice")
            seen.add(name)
            continue
        found.append(f"unknown metric {name!r}{_suggestion(name)}; known: {', '.join(METRICS_BY_NAME)}")
    return found


def _suggestion(name: object) -> str:
    if not isinstance(name, str):
        return ""
    by_lower = {known.lower(): known for known in METRICS_BY_NAME}
    close = by_lower.get(name.lower()) or next(iter(difflib.get_close_matches(name, list(METRICS_BY_NAME), n=1)), None)
    return f" (did you mean {close!r}?)" if close else ""


def _dimension_value_problems(value: object) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        return [f"must be a non-empty string, got {value!r}"]
    found = []
    if len(value) > DIMENSION_VALUE_MAX_LENGTH:
        found.append(f"is {len(value)} characters; a CloudWatch dimension value allows {DIMENSION_VALUE_MAX_LENGTH}")
    if not _is_printable_ascii(value):
        found.append(f"{value!r} must be ASCII without control characters (CloudWatch's dimension rule)")
    return found
