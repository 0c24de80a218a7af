"""Each adapter's totals since a server started, from its Prometheus text (local mode's ``/metrics``).

The series are the container's (`adapter_server.observability`): requests by status, prompt and
output tokens, throttled requests, each labelled with its ``adapter``.
"""

from __future__ import annotations

from cdk_adapters.contract.runtime_api import METRICS_PATH
from cdk_adapters.usage.report import AdapterUsage


class MetricsUnreadable(Exception):
    """The ``/metrics`` page could not be read; the message says which URL and why."""


def metrics_url(url: str) -> str:
    """`url`, ending in the metrics path (``/metrics``) if it did not already."""
    return url if url.rstrip("/").endswith(METRICS_PATH) else url.rstrip("/") + METRICS_PATH


def read_prometheus(url: str) -> list[AdapterUsage]:
    """Each adapter's totals since the server started, from its Prometheus text (``/metrics``)."""
    import httpx

    target = metrics_url(url)
    try:
        answer = httpx.get(target, timeout=30)
    except httpx.HTTPError as error:
        raise MetricsUnreadable(f"cannot read {target}: {error}") from None
    if answer.status_code != 200:
        raise MetricsUnreadable(f"{target} answered {answer.status_code}")
    return parse_prometheus(answer.text)


def parse_prometheus(text: str) -> list[AdapterUsage]:
    """The container's per-adapter series (`adapter_server.observability`), parsed with prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    rows: dict[str, AdapterUsage] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            adapter = sample.labels.get("adapter")
            if adapter is None or not sample.name.endswith("_total"):
                continue
            _count(rows, adapter, sample.name, sample.labels, round(sample.value))
    return [rows[name] for name in sorted(rows)]


_COUNTERS = (
    "cdk_adapters_requests_total",
    "cdk_adapters_prompt_tokens_total",
    "cdk_adapters_output_tokens_total",
    "cdk_adapters_throttled_requests_total",
)
"""The container's per-adapter counters; any other ``*_total`` series is left out (no row of its own)."""


def _count(rows: dict[str, AdapterUsage], adapter: str, name: str, labels: dict[str, str], value: int) -> None:
    """Add one counter sample to the adapter's row (requests by status: 4xx and 5xx are errors)."""
    if name not in _COUNTERS:
        return
    row = rows.setdefault(adapter, AdapterUsage(adapter))
    if name == "cdk_adapters_requests_total":
        label = labels.get("status") or ""
        status = int(label) if label.isdigit() else 0
        row.requests += value
        if 400 <= status < 500:
            row.errors_4xx += value
        elif status >= 500:
            row.errors_5xx += value
    elif name == "cdk_adapters_prompt_tokens_total":
        row.input_tokens += value
    elif name == "cdk_adapters_output_tokens_total":
        row.output_tokens += value
    else:
        row.throttled += value
