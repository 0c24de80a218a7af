"""Reading usage out of vLLM's response shapes, and SageMaker's CustomAttributes header.

The payloads are the byte shapes vLLM 0.31 emits (see the real-server tests for end-to-end proof).
"""

from __future__ import annotations

import json

import pytest

from adapter_server.response_usage import StreamObserver, usage_from_body
from adapter_server.sagemaker_contract import custom_attributes


def _event(document) -> bytes:
    return f"data: {json.dumps(document)}\n\n".encode()


TOKEN_CHUNK = _event({"id": "c", "choices": [{"index": 0, "text": "Hi", "finish_reason": None}]})
ROLE_CHUNK = _event({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
USAGE_CHUNK = _event(
    {"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}, "metrics": {"time_to_first_token_ms": 12.5}}
)
DONE = b"data: [DONE]\n\n"


def _run(observer: StreamObserver, chunks: list[bytes]) -> bytes:
    out = b"".join(observer.feed(chunk) for chunk in chunks)
    return out + observer.finish()


def test_usage_chunk_is_read_and_removed_when_the_caller_did_not_ask():
    stream = ROLE_CHUNK + TOKEN_CHUNK + USAGE_CHUNK + DONE
    # Split at awkward places, as a network would.
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    observer = StreamObserver(started=0.0, strip_usage_chunk=True)
    assert _run(observer, pieces) == ROLE_CHUNK + TOKEN_CHUNK + DONE
    assert (observer.usage.prompt_tokens, observer.usage.output_tokens, observer.usage.ttft_ms) == (5, 2, 12.5)


def test_usage_chunk_is_kept_when_the_caller_asked():
    observer = StreamObserver(started=0.0, strip_usage_chunk=False)
    stream = TOKEN_CHUNK + USAGE_CHUNK + DONE
    assert _run(observer, [stream]) == stream
    assert observer.usage.output_tokens == 2


def test_time_to_first_token_is_measured_when_vllm_reports_none():
    observer = StreamObserver(started=0.0, strip_usage_chunk=True)
    _run(observer, [ROLE_CHUNK, TOKEN_CHUNK, DONE])
    # Measured from `started` to the first chunk carrying a token (not the empty role chunk).
    assert observer.usage.ttft_ms is not None and observer.usage.ttft_ms > 0
    assert observer.usage.output_tokens is None


def test_unterminated_and_non_json_data_pass_through_untouched():
    observer = StreamObserver(started=0.0, strip_usage_chunk=True)
    assert _run(observer, [b"data: not json\n\n", b'data: {"partial']) == b'data: not json\n\ndata: {"partial'


def test_non_streaming_usage():
    body = json.dumps({"usage": {"prompt_tokens": 7, "completion_tokens": 8}, "metrics": {"time_to_first_token_ms": 3}})
    usage = usage_from_body(body.encode())
    assert (usage.prompt_tokens, usage.output_tokens, usage.ttft_ms) == (7, 8, 3.0)
    assert usage_from_body(b"<html>") == type(usage)()


@pytest.mark.parametrize(
    "header, expected",
    [
        ("route=/v1/chat/completions", {"route": "/v1/chat/completions"}),
        ("trace-id=abc; route=/v1/completions", {"trace-id": "abc", "route": "/v1/completions"}),
        ("Route=%2Fv1%2Fcompletions,x=1", {"route": "/v1/completions", "x": "1"}),
        ("free text without pairs", {}),
        (None, {}),
    ],
)
def test_custom_attributes(header, expected):
    assert custom_attributes(header) == expected
