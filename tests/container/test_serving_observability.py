"""One JSON log line per request, and per-adapter Prometheus metrics, from a real server."""

from __future__ import annotations

import re

import pytest

from tests.container.sagemaker_calls import MODEL_CODE_MARKER, NEW_TOKENS, completion_body, invoke, register

pytestmark = pytest.mark.vllm


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    assert match, f"{name}{{{wanted}}} not exported"
    return float(match.group(1))


def test_launch_line_is_logged_once_with_the_resolved_command(served):
    launches = served.events("cdk_adapters.launch")
    assert len(launches) == 1
    command = launches[0]["command"]
    for fixed in (
        "--enable-lora",
        "--api-server-count 1",
        "--middleware adapter_server.middleware.SageMakerAdapterMiddleware",
        f"--port {served.port}",
        "--max-lora-rank 16",
        "--max-loras 2",
    ):
        assert fixed in command


def test_code_in_model_artifacts_never_runs(served):
    planted = served.base_dir / "model.py"
    assert planted.is_file()
    assert not (served.log_dir / MODEL_CODE_MARKER).exists()
    assert f"cdk-adapters: ignoring {planted}: model artifacts do not run code in this server" in served.log_path.read_text()


def test_each_request_logs_adapter_status_latency_tokens_and_cold(served, zoo):
    client = served.client
    for name, kind in (("obs-v1", "good"), ("obs-other-a-v1", "good-2"), ("obs-other-b-v1", "good")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    already = len(served.events("cdk_adapters.request"))

    # Two GPU slots (--max-loras 2): obs-v1 is cold first, warm next, cold again once pushed out.
    sequence = ["obs-v1", "obs-v1", "obs-other-a-v1", "obs-other-b-v1", "obs-v1"]
    for name in sequence:
        assert invoke(client, name).status_code == 200
    assert invoke(client, "obs-v1", completion_body(stream=True)).status_code == 200
    assert invoke(client, "obs-missing-v1").status_code == 404

    lines = served.events("cdk_adapters.request")[already:]
    assert [line["adapter"] for line in lines] == [*sequence, "obs-v1", "obs-missing-v1"]
    assert [line["cold"] for line in lines[:5]] == [True, False, True, True, True]
    for line in lines[:6]:
        assert line["status"] == 200 and line["route"] == "/invocations"
        assert line["prompt_tokens"] > 0 and line["output_tokens"] == NEW_TOKENS
        assert 0 < line["ttft_ms"] <= line["latency_ms"]
    assert lines[5]["stream"] is True and lines[0]["stream"] is False
    assert lines[6]["status"] == 404 and lines[6]["cold"] is None and "obs-missing-v1" in lines[6]["error"]

    metrics = client.get("/metrics").text
    assert _metric(metrics, "cdk_adapters_requests_total", adapter="obs-v1", status="200") == 4
    assert _metric(metrics, "cdk_adapters_output_tokens_total", adapter="obs-v1") == 4 * NEW_TOKENS
    assert _metric(metrics, "cdk_adapters_prompt_tokens_total", adapter="obs-v1") == sum(
        line["prompt_tokens"] for line in lines if line["adapter"] == "obs-v1" and line["status"] == 200
    )
    assert _metric(metrics, "cdk_adapters_cold_requests_total", adapter="obs-v1") == 2
    assert _metric(metrics, "cdk_adapters_request_latency_seconds_count", adapter="obs-v1") == 4
    assert _metric(metrics, "cdk_adapters_time_to_first_token_seconds_count", adapter="obs-v1") == 4
    # Unregistered names share one label, so callers cannot create series at will.
    assert 'adapter="obs-missing-v1"' not in metrics
    assert _metric(metrics, "cdk_adapters_requests_total", adapter="__unregistered__", status="404") >= 1


def test_metrics_is_prometheus_text_with_per_adapter_series(served, zoo):
    """What SageMaker's detailed observability scrapes (the path the construct renders) is text a
    standard Prometheus parser reads, carrying our per-adapter series beside vLLM's."""
    from prometheus_client.parser import text_string_to_metric_families

    from cdk_adapters.hosting.sagemaker_metrics import CONTAINER_METRICS_PATH

    client = served.client
    assert register(client, "prom-v1", zoo.adapter("good")).status_code == 200
    assert invoke(client, "prom-v1").status_code == 200
    answer = client.get(CONTAINER_METRICS_PATH)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}

    def adapter_samples(family: str) -> list:
        return [s for s in families[family].samples if s.labels.get("adapter") == "prom-v1"]

    assert families["cdk_adapters_requests"].type == "counter"
    [requests] = [
        s for s in adapter_samples("cdk_adapters_requests") if s.name.endswith("_total") and s.labels["status"] == "200"
    ]
    assert requests.value == 1
    assert families["cdk_adapters_request_latency_seconds"].type == "histogram"
    assert any(s.name.endswith("_count") and s.value == 1 for s in adapter_samples("cdk_adapters_request_latency_seconds"))
    for family in ("cdk_adapters_time_to_first_token_seconds", "cdk_adapters_prompt_tokens", "cdk_adapters_output_tokens"):
        assert adapter_samples(family), family
    assert any(name.startswith("vllm:") for name in families), "vLLM's engine series are served too"
