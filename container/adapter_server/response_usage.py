"""Reading token counts and time to first token out of vLLM's responses.

Non-streaming responses carry ``usage`` (and, with ``--enable-per-request-metrics``,
``metrics.time_to_first_token_ms``). A stream carries them only in a final usage chunk that
vLLM sends when the request asks for ``stream_options.include_usage``; the middleware asks for
it on every stream and, when the caller had not, removes that chunk again so the caller sees
exactly the stream it asked for.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    """vLLM's own measurement when present, else ours (first token byte seen)."""


def _read_usage(document: Any, usage: Usage) -> None:
    if not isinstance(document, dict):
        return
    counts = document.get("usage")
    if isinstance(counts, dict):
        if isinstance(counts.get("prompt_tokens"), int):
            usage.prompt_tokens = counts["prompt_tokens"]
        if isinstance(counts.get("completion_tokens"), int):
            usage.output_tokens = counts["completion_tokens"]
    metrics = document.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("time_to_first_token_ms"), (int, float)):
        usage.ttft_ms = float(metrics["time_to_first_token_ms"])


def usage_from_body(body: bytes) -> Usage:
    """Usage of a complete (non-streaming) JSON response; empty when the body is not JSON."""
    usage = Usage()
    with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError):
        _read_usage(json.loads(body), usage)
    return usage


def _has_token(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return False
    raw_delta = choice.get("delta")
    delta = raw_delta if isinstance(raw_delta, dict) else {}
    return bool(choice.get("text") or choice.get("token_ids") or delta.get("content") or choice.get("finish_reason"))


@dataclass
class StreamObserver:
    """Watches a server-sent-event stream chunk by chunk; optionally drops the usage-only chunk."""

    started: float
    strip_usage_chunk: bool
    usage: Usage = field(default_factory=Usage)
    _buffer: bytes = b""
    _first_token_at: float | None = None

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to forward now: complete events, minus a stripped usage chunk."""
        self._buffer += chunk
        out: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                break
            event, self._buffer = self._buffer[: end + 2], self._buffer[end + 2 :]
            if self._observe(event):
                out.append(event)
        return b"".join(out)

    def finish(self) -> bytes:
        """Whatever was left unterminated (forwarded as is), and the final measurements."""
        rest, self._buffer = self._buffer, b""
        if self.usage.ttft_ms is None and self._first_token_at is not None:
            self.usage.ttft_ms = (self._first_token_at - self.started) * 1000.0
        return rest

    def _observe(self, event: bytes) -> bool:
        """Record what `event` says; False when it must not reach the caller."""
        data = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if not data or data == b"[DONE]":
            return True
        try:
            document = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return True
        if not isinstance(document, dict):
            return True
        choices = document.get("choices")
        if self._first_token_at is None and isinstance(choices, list) and any(_has_token(c) for c in choices):
            self._first_token_at = time.monotonic()
        if isinstance(document.get("usage"), dict) and choices == []:
            _read_usage(document, self.usage)
            return not self.strip_usage_chunk
        if isinstance(document.get("usage"), dict):
            _read_usage(document, self.usage)
        return True
