"""Per-adapter capture: a sampled copy of a request and its answer, as one line on stdout.

Off unless the endpoint or the adapter's row turns it on (`CaptureSettings`, rendered by the
construct into ``CDK_ADAPTERS_CAPTURE``). For a request the draw samples, `begin` keeps the request
body and `watching` tees the answer's bytes (whole or streamed, up to a bound) on their way to the
caller, untouched; `publish` writes the record once the request log line is written. The record's
format lives in `cdk_adapters.contract.capture_record`, which ``cdk-adapters eval --from-capture``
reads back. Writing to stdout puts the record in the endpoint's CloudWatch log stream, which the
execution role can already write: capture needs no bucket and no new permission.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from adapter_server.asgi_types import Message
from cdk_adapters.contract import capture_record
from cdk_adapters.contract.capture_record import CapturePolicy, CaptureSettings

_BUFFER_FACTOR = 4
"""The answer is kept up to this many times ``max_bytes`` (a stream's framing is bulky); past it
the record is written truncated."""


class Capture:
    """One sampled request on its way through; `begin` returns None for one that is not captured."""

    def __init__(self, settings: CaptureSettings, adapter: str | None, route: str, document: dict[str, Any]) -> None:
        self.settings = settings
        self.adapter = adapter
        self.route = route
        self.document = document
        self.time = _utc_now()
        self._answer: list[bytes] = []
        self._size = 0
        self._overflow = False
        self._complete = False
        self._written = False
        self._outcome: dict[str, Any] | None = None
        self._write: Callable[[str], None] = lambda line: None

    @classmethod
    def begin(
        cls,
        policy: CapturePolicy,
        adapter: str | None,
        route: str,
        document: dict[str, Any],
        draw: Callable[[], float] = random.random,
    ) -> Capture | None:
        settings = policy.for_adapter(adapter) if adapter is not None else policy.default
        if settings is None or draw() >= settings.sample_rate:
            return None
        return cls(settings, adapter, route, document)

    def watching(self, send: Callable[[Message], Any]) -> Callable[[Message], Any]:
        """`send`, with the answer's body bytes kept (bounded) as they pass; the record is written
        just before the last of them goes out, so it is in the log when the caller has its answer."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                self._size += len(body)
                if self._size > self.settings.max_bytes * _BUFFER_FACTOR:
                    self._overflow, self._answer = True, []
                elif not self._overflow:
                    self._answer.append(body)
                if not message.get("more_body", False):
                    self._complete = True
                    self._write_if_ready()
            await send(message)

        return watched

    def publish(
        self,
        *,
        status: int | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        request_id: str | None,
        write: Callable[[str], None],
    ) -> None:
        """The request's outcome, known when its log line is written (just before the answer's last
        bytes pass `watching`, or with no answer at all): the record goes out once both are in."""
        self._outcome = {
            "status": status or 0,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "request_id": request_id,
        }
        self._write = write
        self._write_if_ready(force=status is not None and status != 200)

    def _write_if_ready(self, *, force: bool = False) -> None:
        if self._outcome is None or self._written or not (self._complete or force):
            return
        self._written = True
        record = capture_record.record_from_exchange(
            adapter=self.adapter,
            time=self.time,
            route=self.route,
            request=self.document,
            answer_text=None if self._overflow else answer_text(b"".join(self._answer)),
            settings=self.settings,
            **self._outcome,
        )
        self._write(capture_record.encode(record, max_bytes=self.settings.max_bytes))


def answer_text(body: bytes) -> str | None:
    """The text of a whole OpenAI answer, or of a stream's chunks joined; None when unreadable."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.lstrip().startswith("{"):
        try:
            return _choice_text(json.loads(text), delta=False)
        except ValueError:
            return None
    pieces = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        try:
            pieces.append(_choice_text(json.loads(data), delta=True) or "")
        except ValueError:
            return None
    return "".join(pieces)


def _choice_text(document: Any, *, delta: bool) -> str | None:
    if not isinstance(document, dict) or not isinstance(document.get("choices"), list):
        return None
    choices = document["choices"]
    if not choices:
        return ""
    choice = choices[0] if isinstance(choices[0], dict) else {}
    part = choice.get("delta" if delta else "message")
    if isinstance(part, dict):
        return part.get("content") or ""
    return choice.get("text") or ""


def _utc_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
