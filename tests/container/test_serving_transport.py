"""Streams, routed chat and the payload limit through /invocations, with the request log checked too."""

from __future__ import annotations

import httpx
import pytest

from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    INVOCATION_BODY_LIMIT,
    chat_body,
    completion_body,
    invoke,
    register,
    request_lines,
    server_sent_events,
    unregister,
)
from tests.support.held_places import CHAT_PATH, HELD_STREAM, Call, wait_for

pytestmark = pytest.mark.vllm

ROUTE_TO_CHAT = {CUSTOM_ATTRIBUTES_HEADER: "route=/v1/chat/completions"}


def test_a_stream_logs_the_same_token_counts_as_the_whole_answer(served, zoo):
    client = served.client
    assert register(client, "stream-log-v1", zoo.adapter("good")).status_code == 200
    already = len(served.events("cdk_adapters.request"))
    whole = invoke(client, "stream-log-v1").json()
    streamed = invoke(client, "stream-log-v1", completion_body(stream=True))
    assert streamed.status_code == 200

    whole_line, stream_line = request_lines(served, already)
    assert (whole_line["stream"], stream_line["stream"]) == (False, True)
    for line in (whole_line, stream_line):
        assert line["prompt_tokens"] == whole["usage"]["prompt_tokens"] == len(whole["choices"][0]["prompt_token_ids"])
        assert line["output_tokens"] == whole["usage"]["completion_tokens"]
        assert 0 < line["ttft_ms"] <= line["latency_ms"]


def test_a_routed_chat_stream_carries_the_adapters_answer(served, zoo):
    client = served.client
    assert register(client, "chat-stream-v1", zoo.adapter("good-2")).status_code == 200
    direct = client.post("/v1/chat/completions", json=chat_body(), headers={ADAPTER_HEADER: "chat-stream-v1"}).json()
    already = len(served.events("cdk_adapters.request"))

    streamed = invoke(client, "chat-stream-v1", chat_body(stream=True), **ROUTE_TO_CHAT)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = server_sent_events(streamed)
    assert events[-1] == "[DONE]"
    chunks = [event for event in events[:-1] if event["choices"]]
    assert all(chunk["model"] == "chat-stream-v1" for chunk in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == direct["choices"][0]["message"]["content"]
    assert all(event.get("usage") is None for event in events[:-1])  # the caller did not ask for usage

    (line,) = request_lines(served, already)
    assert (line["adapter"], line["route"], line["stream"], line["status"]) == (
        "chat-stream-v1",
        "/v1/chat/completions",
        True,
        200,
    )
    assert (line["prompt_tokens"], line["output_tokens"]) == (
        direct["usage"]["prompt_tokens"],
        direct["usage"]["completion_tokens"],
    )


def _streamed_text(answer: bytes) -> tuple[list, str]:
    events = server_sent_events(httpx.Response(200, content=answer))
    chunks = [event for event in events[:-1] if event["choices"]]
    return events, "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)


def test_deleting_an_adapter_mid_stream_lets_the_stream_finish(served, zoo):
    """The DELETE lands while the stream is surely in flight: its caller reads nothing until then,
    and the answer (about 315 KB) is twice what the connection holds in transit, so it cannot have
    ended (`held_places`). New requests are refused at once; the stream still ends whole and
    unchanged, and the server logs the unregistration before the stream's end, in that order."""
    client = served.client
    assert register(client, "leaving-v1", zoo.adapter("good")).status_code == 200
    body = {key: value for key, value in HELD_STREAM.items() if key != "seed"} | {"temperature": 0}
    read_at_once = client.post(CHAT_PATH, json=body, headers={ADAPTER_HEADER: "leaving-v1"})
    assert read_at_once.status_code == 200
    _, expected = _streamed_text(read_at_once.content)
    already = len(served.events())
    requests_before = len(served.events("cdk_adapters.request"))
    held = Call(served, "leaving-v1", body, path=CHAT_PATH, slow_reader=True)
    try:
        wait_for(client, "the stream is in the engine", lambda now: now.of("leaving-v1") == (1, 0))
        removed = unregister(client, "leaving-v1")
        assert removed.status_code == 200, removed.text
        assert invoke(client, "leaving-v1").status_code == 404  # new requests: gone at once
        status, answer = held.answer()
    finally:
        held.leave()
    assert status == 200
    events, text = _streamed_text(answer)
    assert events[-1] == "[DONE]" and text == expected, "the stream in flight is never cut short or changed"
    lines = [(e["event"], e.get("action") or e.get("status")) for e in served.events()[already:]]
    assert lines == [("cdk_adapters.registration", "unregister"), ("cdk_adapters.request", 404), ("cdk_adapters.request", 200)]
    (streamed,) = [line for line in request_lines(served, requests_before) if line["status"] == 200]
    (refused,) = [line for line in request_lines(served, requests_before) if line["status"] == 404]
    assert (streamed["stream"], streamed["output_tokens"]) == (True, HELD_STREAM["max_tokens"])
    assert refused["output_tokens"] is None


def test_a_body_over_sagemakers_payload_limit_is_413(served, zoo):
    client = served.client
    assert register(client, "payload-v1", zoo.adapter("good")).status_code == 200
    exact = completion_body()
    # JSON allows any amount of whitespace: a valid request of exactly the limit is still served.
    encoded = httpx.Request("POST", "/", json=exact).content
    at_limit = encoded[:-1] + b" " * (INVOCATION_BODY_LIMIT - len(encoded)) + b"}"
    assert len(at_limit) == INVOCATION_BODY_LIMIT
    headers = {ADAPTER_HEADER: "payload-v1", "content-type": "application/json"}
    assert client.post("/invocations", content=at_limit, headers=headers).status_code == 200

    already = len(served.events("cdk_adapters.request"))
    over = at_limit[:-1] + b" }"
    declared = client.post("/invocations", content=over, headers=headers)
    chunked = client.post("/invocations", content=iter([over[:4096], over[4096:]]), headers=headers)
    for response in (declared, chunked):
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["type"] == "payload_too_large"
        assert "6291456 bytes" in error["message"] and "InvokeEndpoint" in error["message"]
    assert [line["status"] for line in request_lines(served, already)] == [413, 413]
