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


MID_STREAM_ATTEMPTS = 8
"""The tiny model can finish 240 tokens before the DELETE lands; try again until the DELETE wins."""


def test_deleting_an_adapter_mid_stream_lets_the_stream_finish(served, zoo):
    client = served.client
    assert register(client, "leaving-v1", zoo.adapter("good")).status_code == 200
    body = completion_body(max_tokens=240)  # long enough that the DELETE usually lands while tokens still flow
    expected = invoke(client, "leaving-v1", body).json()["choices"][0]["token_ids"]
    deleted_mid_stream = [
        ("cdk_adapters.registration", "unregister"),
        ("cdk_adapters.request", 404),
        ("cdk_adapters.request", 200),
    ]
    for attempt in range(MID_STREAM_ATTEMPTS):
        if attempt:
            assert register(client, "leaving-v1", zoo.adapter("good")).status_code == 200
        already = len(served.events())
        requests_before = len(served.events("cdk_adapters.request"))
        with (
            httpx.Client(base_url=served.url, timeout=120) as streaming,
            streaming.stream(
                "POST", "/invocations", json={**body, "stream": True}, headers={ADAPTER_HEADER: "leaving-v1"}
            ) as stream,
        ):
            assert stream.status_code == 200
            pieces = stream.iter_bytes()
            received = next(pieces)
            removed = unregister(client, "leaving-v1")
            assert removed.status_code == 200, removed.text
            assert invoke(client, "leaving-v1").status_code == 404  # new requests: gone at once
            received += b"".join(pieces)

        # Whatever the timing, the stream in flight is never cut short or changed.
        events = server_sent_events(httpx.Response(200, content=received))
        assert events[-1] == "[DONE]"
        assert [t for e in events[:-1] if e["choices"] for t in e["choices"][0]["token_ids"]] == expected
        # In the server's own order: the unregistration came before the end of the stream. The refused
        # request's line may land before or after that end (seen both ways in CI); either is this case.
        lines = [(e["event"], e.get("action") or e.get("status")) for e in served.events()[already:]]
        assert sorted(lines) == sorted(deleted_mid_stream), lines
        if lines.index(deleted_mid_stream[0]) < lines.index(deleted_mid_stream[2]):
            break
        # The only other order: the stream had already ended when the DELETE arrived. Try again.
        assert lines == [deleted_mid_stream[2], *deleted_mid_stream[:2]], lines
    else:
        pytest.fail(f"in {MID_STREAM_ATTEMPTS} attempts the stream always ended before the DELETE arrived")
    # The stream's own line, wherever the refused request's line landed: it counted every token.
    (streamed,) = [line for line in request_lines(served, requests_before) if line["status"] == 200]
    (refused,) = [line for line in request_lines(served, requests_before) if line["status"] == 404]
    assert (streamed["stream"], streamed["output_tokens"]) == (True, 240)
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
