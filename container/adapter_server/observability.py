"""Per-adapter request log lines and Prometheus metrics.

vLLM's own metrics carry only the base model's name, so nothing in stock vLLM says which adapter
is slow or failing. The middleware writes one JSON line per request to stdout (SageMaker ships
stdout to CloudWatch Logs, where metric filters turn the lines into per-adapter CloudWatch
metrics) and keeps the same figures as Prometheus metrics, served by vLLM's ``/metrics``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

REQUEST_EVENT = "cdk_adapters.request"
"""``event`` of the per-request line; CloudWatch metric filters match on it."""
REGISTRATION_EVENT = "cdk_adapters.registration"
REPLAY_EVENT = "cdk_adapters.replay"

BASE_MODEL_LABEL = "__base__"
"""The ``adapter`` label of requests served by the base model (only when base access is on)."""
UNREGISTERED_LABEL = "__unregistered__"
"""The ``adapter`` label for names that are not registered, so callers cannot inflate label sets."""

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter(
    "cdk_adapters_requests", "Inference requests by adapter and HTTP status.", ["adapter", "status"]
)
LATENCY = Histogram(
    "cdk_adapters_request_latency_seconds",
    "Time from request arrival to the last response byte, by adapter.",
    ["adapter"],
    buckets=_LATENCY_BUCKETS,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "cdk_adapters_time_to_first_token_seconds", "Time to first generated token, by adapter.", ["adapter"],
    buckets=_TTFT_BUCKETS,
)
PROMPT_TOKENS = Counter("cdk_adapters_prompt_tokens", "Prompt tokens processed, by adapter.", ["adapter"])
OUTPUT_TOKENS = Counter("cdk_adapters_output_tokens", "Tokens generated, by adapter.", ["adapter"])
COLD_REQUESTS = Counter(
    "cdk_adapters_cold_requests",
    "Requests whose adapter was used for the first time since it was loaded, or had left the GPU slots.",
    ["adapter"],
)
REGISTERED_ADAPTERS = Gauge("cdk_adapters_registered_adapters", "Adapters currently registered.")
REGISTRATIONS = Counter(
    "cdk_adapters_registrations",
    "POST /adapters outcomes: registered, unchanged, conflict, rejected, engine_error, bad_request.",
    ["outcome"],
)

_print_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """Write one JSON line to stdout (flushed: SageMaker's log agent reads it as it comes)."""
    line = json.dumps({"event": event, **fields}, sort_keys=False, default=str)
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


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
    error: str | None = None

    def publish(self, metric_label: str) -> None:
        emit(REQUEST_EVENT, **asdict(self))
        REQUESTS.labels(metric_label, str(self.status)).inc()
        if self.latency_ms is not None:
            LATENCY.labels(metric_label).observe(self.latency_ms / 1000.0)
        if self.ttft_ms is not None:
            TIME_TO_FIRST_TOKEN.labels(metric_label).observe(self.ttft_ms / 1000.0)
        if self.prompt_tokens:
            PROMPT_TOKENS.labels(metric_label).inc(self.prompt_tokens)
        if self.output_tokens:
            OUTPUT_TOKENS.labels(metric_label).inc(self.output_tokens)
        if self.cold:
            COLD_REQUESTS.labels(metric_label).inc()


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
