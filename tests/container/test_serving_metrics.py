"""Real request lines from a real server are valid EMF documents that follow the shared schema.

The shared server runs with a namespace and endpoint name that are not the defaults (see
conftest), so the lines also prove the container decodes the construct's settings. Refusals are
counted under the same adapter in the line's dimension and in Prometheus.
"""

from __future__ import annotations

import json
import re

import pytest

from cdk_adapters.contract import request_metrics as rm
from tests.container.conftest import METRICS_ENDPOINT_NAME, METRICS_NAMESPACE
from tests.container.emf_rules import declared_metrics, emf_problems
from tests.container.sagemaker_calls import (
    CUSTOM_ATTRIBUTES_HEADER,
    INVOCATION_BODY_LIMIT,
    NEW_TOKENS,
    completion_body,
    invoke,
    register,
    server_sent_events,
    unregister,
)

pytestmark = pytest.mark.vllm


def _raw_request_lines(server) -> list[str]:
    """The request lines exactly as CloudWatch Logs would receive them."""
    lines = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"event": "{rm.REQUEST_EVENT}"' in line:
            lines.append(line)
    return lines


def _counted(metrics_text: str, adapter: str, status: int) -> float:
    match = re.search(
        rf'^cdk_adapters_requests_total\{{adapter="{re.escape(adapter)}",status="{status}"\}} (\S+)$', metrics_text, re.MULTILINE
    )
    return float(match.group(1)) if match else 0.0


def test_request_lines_are_emf_documents_whose_values_match_the_answers(served, zoo):
    client = served.client
    assert register(client, "emf-v1", zoo.adapter("good")).status_code == 200
    already = len(_raw_request_lines(served))

    whole = invoke(client, "emf-v1")
    stream = invoke(client, "emf-v1", completion_body(stream=True, stream_options={"include_usage": True}))
    missing = invoke(client, "emf-missing-v1")
    assert (whole.status_code, stream.status_code, missing.status_code) == (200, 200, 404)

    lines = _raw_request_lines(served)[already:]
    assert len(lines) == 3
    for line in lines:
        assert emf_problems(line, namespace=METRICS_NAMESPACE, endpoint_name=METRICS_ENDPOINT_NAME) == [], line
    whole_line, stream_line, missing_line = (json.loads(line) for line in lines)
    print(f"\nEMF line for one request:\n{lines[0]}")

    # Served requests declare every metric; the values are the answer's own usage and the log fields'.
    assert declared_metrics(lines[0]) == declared_metrics(lines[1]) == [spec.name for spec in rm.METRICS]
    usage = whole.json()["usage"]
    stream_usage = server_sent_events(stream)[-2]["usage"]
    for line, answer_usage in ((whole_line, usage), (stream_line, stream_usage)):
        assert line["Adapter"] == "emf-v1" and line["EndpointName"] == METRICS_ENDPOINT_NAME
        assert line["OutputTokens"] == answer_usage["completion_tokens"] == line["output_tokens"] == NEW_TOKENS
        assert line["PromptTokens"] == answer_usage["prompt_tokens"] == line["prompt_tokens"]
        assert line["Latency"] == line["latency_ms"] and line["TimeToFirstToken"] == line["ttft_ms"]
        assert 0 < line["TimeToFirstToken"] <= line["Latency"]
        assert (line["Errors4XX"], line["Errors5XX"]) == (0, 0)
    assert (whole_line["ColdStarts"], stream_line["ColdStarts"]) == (1, 0)
    assert (whole_line["cold"], stream_line["cold"]) == (True, False)

    # An unregistered name: the shared label, no token metrics, one client error.
    assert missing_line["adapter"] == "emf-missing-v1" and missing_line["Adapter"] == rm.UNREGISTERED_ADAPTER
    assert declared_metrics(lines[2]) == ["Latency", "Errors4XX", "Errors5XX", "ColdStarts", "Throttled"]
    assert (missing_line["Errors4XX"], missing_line["Errors5XX"], missing_line["ColdStarts"], missing_line["Throttled"]) == (
        1,
        0,
        0,
        0,
    )
    # Admitted through fair share (on by default): the wait for a place and the adapter's requests in the engine.
    for line in (whole_line, stream_line):
        assert line["QueueWait"] == line["queue_ms"] >= 0 and line["InFlight"] == line["in_flight"] >= 1
    # Each line reads back through the contract's own decoder as the metrics it declares.
    decoded = rm.decode_line(lines[0])
    assert decoded.dimensions == {"EndpointName": METRICS_ENDPOINT_NAME, "Adapter": "emf-v1"}
    assert decoded.metrics["OutputTokens"] == NEW_TOKENS and decoded.fields["in_flight"] == whole_line["InFlight"]


def test_refusals_on_a_registered_adapter_count_under_it_in_the_line_and_in_prometheus(served, zoo):
    client = served.client
    assert register(client, "emf-refused-v1", zoo.adapter("good-2")).status_code == 200
    already = len(_raw_request_lines(served))

    bad_route = invoke(client, "emf-refused-v1", **{CUSTOM_ATTRIBUTES_HEADER: "route=/v1/load_lora_adapter"})
    oversized = client.post(
        "/invocations",
        content=b"x" * (INVOCATION_BODY_LIMIT + 1),
        headers={"X-Amzn-SageMaker-Adapter-Identifier": "emf-refused-v1", "Content-Type": "application/json"},
    )
    assert (bad_route.status_code, oversized.status_code) == (400, 413)

    lines = _raw_request_lines(served)[already:]
    assert [json.loads(line)["status"] for line in lines] == [400, 413]
    for line in lines:
        assert emf_problems(line, namespace=METRICS_NAMESPACE, endpoint_name=METRICS_ENDPOINT_NAME) == [], line
        document = json.loads(line)
        assert document["adapter"] == document["Adapter"] == "emf-refused-v1"
        assert document["Errors4XX"] == 1
    metrics = client.get("/metrics").text
    assert _counted(metrics, "emf-refused-v1", 400) == 1
    assert _counted(metrics, "emf-refused-v1", 413) == 1


def test_unregister_lines_say_how_long_it_took(served, zoo):
    client = served.client
    assert register(client, "emf-removed-v1", zoo.adapter("good")).status_code == 200
    assert unregister(client, "emf-removed-v1").status_code == 200
    assert unregister(client, "emf-removed-v1").status_code == 404
    removals = [
        event
        for event in served.events("cdk_adapters.registration")
        if event["action"] == "unregister" and event["adapter"] == "emf-removed-v1"
    ]
    assert [event["outcome"] for event in removals] == ["unregistered", "unknown"]
    assert all(isinstance(event["duration_ms"], float) and event["duration_ms"] >= 0 for event in removals)
