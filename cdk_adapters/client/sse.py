"""Server-sent events out of InvokeEndpointWithResponseStream's ``PayloadPart`` events.

SageMaker forwards the container's bytes in whatever pieces they arrive: one ``PayloadPart`` may
hold half an event, or several. The parser buffers until an event's blank line and yields each
``data:`` value parsed as JSON, stopping at vLLM's ``[DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

DONE = "[DONE]"


def payload_bytes(events: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """The ``Bytes`` of each ``PayloadPart`` in botocore's event stream (other events are errors,
    which botocore raises itself)."""
    for event in events:
        part = event.get("PayloadPart")
        if part is not None:
            yield part.get("Bytes", b"")


def parse_events(pieces: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """Each event's JSON data, in order, however the bytes were split."""
    buffer = b""
    for piece in pieces:
        buffer = (buffer + piece).replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            raw, buffer = buffer.split(b"\n\n", 1)
            data = _data(raw)
            if data == DONE:
                return
            if data is not None:
                yield json.loads(data)
    tail = _data(buffer.strip())
    if tail is not None and tail != DONE:
        yield json.loads(tail)


def _data(raw: bytes) -> str | None:
    lines = [line[5:].lstrip() for line in raw.decode("utf-8").split("\n") if line.startswith("data:")]
    return "\n".join(lines) if lines else None


def chunk_text(chunk: dict[str, Any]) -> str:
    """The text a completion or chat chunk adds (empty for the usage chunk)."""
    text = []
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta")
        text.append((delta.get("content") or "") if isinstance(delta, dict) else (choice.get("text") or ""))
    return "".join(text)
