"""Per-adapter request log lines (CloudWatch EMF documents) and Prometheus metrics.

vLLM's own metrics carry only the base model's name, so nothing in stock vLLM says which adapter
is slow or failing. The middleware writes one JSON line per request to stdout, which SageMaker
ships to CloudWatch Logs. With EMF on (the default) the line is also an Embedded Metric Format
document, so CloudWatch extracts per-adapter metrics from it with nothing to set up; its fields,
metrics, dimensions and settings are the shared schema in `cdk_adapters.contract.request_metrics`.
The same figures are Prometheus metrics, served by vLLM's ``/metrics``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from cdk_adapters.contract import request_metrics

REQUEST_EVENT = request_metrics.REQUEST_EVENT
"""``event`` of the per-request line."""
REGISTRATION_EVENT = "cdk_adapters.registration"
REPLAY_EVENT = "cdk_adapters.replay"

BASE_MODEL_LABEL = request_metrics.BASE_MODEL_ADAPTER
"""The ``adapter`` label (and EMF dimension) of requests served by the base model."""
UNREGISTERED_LABEL = request_metrics.UNREGISTERED_ADAPTER
"""The ``adapter`` label (and EMF dimension) for names that are not registered, so callers cannot
inflate label sets or billed CloudWatch metrics."""

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter("cdk_adapters_requests", "Inference requests by adapter and HTTP status.", ["adapter", "status"])
LATENCY = Histogram(
    "cdk_adapters_request_latency_seconds",
    "Time from request arrival to the last response byte, by adapter.",
    ["adapter"],
    buckets=_LATENCY_BUCKETS,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "cdk_adapters_time_to_first_token_seconds",
    "Time to first generated token, by adapter.",
    ["adapter"],
    buckets=_TTFT_BUCKETS,
)
PROMPT_TOKENS = Counter("cdk_adapters_prompt_tokens", "Prompt tokens processed, by adapter.", ["adapter"])
OUTPUT_TOKENS = Counter("cdk_adapters_output_tokens", "Tokens generated, by adapter.", ["adapter"])
COLD_REQUESTS = Counter(
    "cdk_adapters_cold_requests",
    "Requests whose adapter was used for the first time since it was loaded, or had left the GPU slots.",
    ["adapter"],
)
QUEUE_WAIT = Histogram(
    "cdk_adapters_queue_wait_seconds",
    "Time a request waited for a place in the engine (fair share across adapters), by adapter.",
    ["adapter"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
THROTTLED = Counter(
    "cdk_adapters_throttled_requests", "Requests refused with 429 over their adapter's limits, by adapter.", ["adapter"]
)
IN_ENGINE = Gauge(
    "cdk_adapters_in_engine_requests", "Requests inside the engine now (holding a fair-share place), by adapter.", ["adapter"]
)
WAITING = Gauge(
    "cdk_adapters_waiting_requests", "Requests waiting now for a place in the engine (fair share), by adapter.", ["adapter"]
)
REGISTERED_ADAPTERS = Gauge("cdk_adapters_registered_adapters", "Adapters currently registered.")
REGISTRATIONS = Counter(
    "cdk_adapters_registrations",
    "POST /adapters outcomes: registered, unchanged, conflict, rejected, engine_error, bad_request.",
    ["outcome"],
)

_print_lock = threading.Lock()


def write_line(line: str) -> None:
    """Write one line to stdout, flushed: SageMaker's log agent reads it as it comes."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def emit(event: str, **fields: Any) -> None:
    """Write one JSON line with ``event`` first."""
    write_line(json.dumps({"event": event, **fields}, default=str))


@dataclass
class RequestRecord:
    """What the request log and the metrics say about one inference request."""

    adapter: str | None
    route: str
    stream: bool
    request_id: str | None = None
    status: int | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cold: bool | None = None
    queue_ms: float | None = None
    """Time spent waiting for a place in the engine (fair share); None when not admitted."""
    in_flight: int | None = None
    """The adapter's requests in the engine once this one had its place (fair share); else None."""
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        """The line's `request_metrics.LOG_FIELDS`, in order (built by hand: `asdict` deep-copies)."""
        return {
            request_metrics.EVENT: REQUEST_EVENT,
            request_metrics.ADAPTER: self.adapter,
            request_metrics.ROUTE: self.route,
            request_metrics.STREAM: self.stream,
            request_metrics.REQUEST_ID: self.request_id,
            request_metrics.STATUS: self.status,
            request_metrics.LATENCY_MS: self.latency_ms,
            request_metrics.TTFT_MS: self.ttft_ms,
            request_metrics.PROMPT_TOKENS: self.prompt_tokens,
            request_metrics.OUTPUT_TOKENS: self.output_tokens,
            request_metrics.COLD: self.cold,
            request_metrics.QUEUE_MS: self.queue_ms,
            request_metrics.IN_FLIGHT: self.in_flight,
            request_metrics.ERROR: self.error,
        }

    def publish(self, metric_label: str, log: RequestLog) -> None:
        """Write the request line, then count the request under `metric_label` in Prometheus."""
        write_line(log.line(self.fields(), metric_label))
        _child(REQUESTS, metric_label, str(self.status)).inc()
        if self.latency_ms is not None:
            _child(LATENCY, metric_label).observe(self.latency_ms / 1000.0)
        if self.ttft_ms is not None:
            _child(TIME_TO_FIRST_TOKEN, metric_label).observe(self.ttft_ms / 1000.0)
        if self.prompt_tokens:
            _child(PROMPT_TOKENS, metric_label).inc(self.prompt_tokens)
        if self.output_tokens:
            _child(OUTPUT_TOKENS, metric_label).inc(self.output_tokens)
        if self.cold:
            _child(COLD_REQUESTS, metric_label).inc()
        if self.queue_ms is not None:
            _child(QUEUE_WAIT, metric_label).observe(self.queue_ms / 1000.0)
        if self.status == request_metrics.THROTTLED_STATUS:
            _child(THROTTLED, metric_label).inc()


def in_engine_gauge(metric_label: str) -> Any:
    """The in-engine gauge of one adapter (incremented while its request holds a place)."""
    return _child(IN_ENGINE, metric_label)


def waiting_gauge(metric_label: str) -> Any:
    """The waiting gauge of one adapter (incremented while its request waits for a place), so a
    queue that builds up is visible before any of its requests ends."""
    return _child(WAITING, metric_label)


_children: dict[tuple[int, tuple[str, ...]], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per series instead of on every request.

    ``labels()`` takes a lock and validates its arguments on each call; the label values are
    bounded anyway (registered names, the two shared labels, HTTP statuses), and a series is
    still created only when first used, as before.
    """
    key = (id(metric), labels)  # the metrics are module constants: their ids never change
    child = _children.get(key)
    if child is None:
        child = _children.setdefault(key, metric.labels(*labels))
    return child


class RequestLog:
    """Renders request lines for one `request_metrics.RequestMetricsSettings`.

    EMF off: the plain JSON line. EMF on: the same line plus the two dimension members, the
    enabled metrics that have a value for this request, and ``_aws``. The directive depends only
    on which metrics a line carries, so each variant is serialised once and reused.
    """

    def __init__(self, settings: request_metrics.RequestMetricsSettings) -> None:
        self.settings = settings
        self._enabled = tuple(spec.name for spec in settings.metrics)
        self._directives: dict[tuple[str, ...], str] = {}

    def line(self, fields: dict[str, Any], metric_label: str) -> str:
        if not self.settings.emf:
            return json.dumps(fields, default=str)
        values = request_metrics.metric_values(fields)
        carried = tuple(name for name in self._enabled if name in values)
        fields[request_metrics.ENDPOINT_DIMENSION] = self.settings.endpoint_name
        fields[request_metrics.ADAPTER_DIMENSION] = metric_label
        if not carried:  # nothing to extract (e.g. only token metrics enabled, and this was a 404)
            return json.dumps(fields, default=str)
        for name in carried:
            fields[name] = values[name]
        directive = self._directives.get(carried)
        if directive is None:
            specs = [request_metrics.METRICS_BY_NAME[name] for name in carried]
            directive = json.dumps([request_metrics.metric_directive(self.settings.namespace, specs)])
            self._directives[carried] = directive
        document = json.dumps(fields, default=str)
        return f'{document[:-1]}, "_aws": {{"Timestamp": {int(time.time() * 1000)}, "CloudWatchMetrics": {directive}}}}}'


class ResidencyTracker:
    """Estimates whether an adapter is resident in one of vLLM's ``--max-loras`` GPU slots.

    vLLM does not report which adapters sit in its slots; it fills them least-recently-used,
    so an LRU of the same size, fed with every request, says when a request pays to load an
    adapter ("cold"): its first use since registration, or a use after it was pushed out.
    """

    def __init__(self, slots: int) -> None:
        self._slots = max(1, int(slots))
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, adapter: str) -> None:
        """The adapter was (re)loaded or unloaded: its next use is cold."""
        with self._lock:
            self._recent.pop(adapter, None)

    def use(self, adapter: str) -> bool:
        """Record a request for `adapter`; True when it was not resident."""
        with self._lock:
            cold = adapter not in self._recent
            self._recent[adapter] = None
            self._recent.move_to_end(adapter)
            while len(self._recent) > self._slots:
                self._recent.popitem(last=False)
            return cold
