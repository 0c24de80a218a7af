"""The ASGI plumbing every handler shares: reading a bounded body, reading it as a JSON object
(`request_json`, strictly), and answering with JSON or text.

Handlers raise `Refusal` for a request they answer themselves; whoever catches it sends
`send_error`'s OpenAI-style JSON, so clients that parse vLLM's errors parse ours too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from adapter_server import sagemaker_contract
from adapter_server.asgi_types import Message, Scope
from adapter_server.request_json import JsonBodyError, parse_json_object
from cdk_adapters.contract import error_kinds, runtime_api

Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = runtime_api.INVOKE_ENDPOINT_MAX_BYTES
"""SageMaker's InvokeEndpoint payload limit. Its front end enforces it too; the middleware holds
bodies in memory, so it refuses larger ones itself (local mode, callers inside the container)."""


MAX_HEADER_BYTES = 32 * 1024
"""The most header bytes (names and values together) a request may carry. SageMaker sends a few
hundred (``CustomAttributes`` is at most 1,024 characters); vLLM's HTTP server sets no limit of its
own, so without this a request could make every header a log line of any size."""


class Refusal(Exception):
    """A request the middleware answers itself, with a JSON error."""

    def __init__(self, status: int, kind: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.extra = status, kind, message, extra
        self.headers = headers or {}


def detached(refusal: Refusal) -> Refusal:
    """`refusal` without its traceback and chained exceptions, whose frames hold the request's body:
    what a handler keeps while it holds a refusal back (`refusal_pacing`)."""
    refusal.__context__ = refusal.__cause__ = None
    return refusal.with_traceback(None)


def refuse_oversized_headers(scope: Scope) -> None:
    """431 when the request's headers together exceed `MAX_HEADER_BYTES`."""
    size = sum(len(name) + len(value) for name, value in scope["headers"])
    if size > MAX_HEADER_BYTES:
        raise Refusal(
            431,
            error_kinds.HEADERS_TOO_LARGE,
            f"the request's headers are {size} bytes; this server accepts at most {MAX_HEADER_BYTES} "
            "(SageMaker's own headers are a few hundred bytes, CustomAttributes at most 1,024 characters)",
        )


BODY_DEADLINE_S = runtime_api.BODY_DEADLINE_S


async def read_body(scope: Scope, receive: Receive, *, deadline_s: float = BODY_DEADLINE_S) -> bytes:
    """The whole request body, a 413 once it is larger than SageMaker would ever pass on, or a 408
    when it has not arrived within `deadline_s`."""
    declared = sagemaker_contract.header(scope["headers"], "content-length")
    size, chunks, more = 0, [], True
    try:
        async with asyncio.timeout(deadline_s):
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                more = message.get("more_body", False)
                size += len(message.get("body", b""))
                if size <= MAX_BODY_BYTES and not (declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES):
                    chunks.append(message.get("body", b""))
                else:
                    chunks = []  # keep reading (and dropping) the rest, so the client gets to read the answer
    except TimeoutError:
        raise Refusal(
            408,
            error_kinds.BODY_TIMEOUT,
            f"the request body did not arrive within {deadline_s:g} s ({size} bytes came); send it at once",
        ) from None
    if size > MAX_BODY_BYTES:
        raise Refusal(
            413,
            error_kinds.PAYLOAD_TOO_LARGE,
            f"the request body is {size} bytes; SageMaker's InvokeEndpoint accepts at most {MAX_BODY_BYTES} bytes "
            "(6 MiB): send smaller or fewer images or a shorter prompt, or split the work into several requests",
        )
    return b"".join(chunks)


OFF_LOOP_BYTES = 64 * 1024
"""Bodies larger than this are parsed in a worker thread (the event loop keeps answering)."""


async def read_json_object(body: bytes, what: str = "the request body") -> dict[str, Any]:
    """`json_object`, off the event loop for a body over `OFF_LOOP_BYTES`."""
    if len(body) <= OFF_LOOP_BYTES:
        return json_object(body, what)
    return await asyncio.to_thread(json_object, body, what)


def json_object(body: bytes, what: str = "the request body") -> dict[str, Any]:
    """The body as a JSON object, or a 400 ``invalid_json`` naming what is wrong with it (`request_json`)."""
    try:
        return parse_json_object(body)
    except JsonBodyError as error:
        raise Refusal(400, error_kinds.INVALID_JSON, f"{what} {error}") from None


async def send_json(send: Send, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
    await _send_whole(send, status, b"application/json", json.dumps(document).encode(), headers)


async def send_text(send: Send, status: int, text: str) -> None:
    await _send_whole(send, status, b"text/plain; charset=utf-8", text.encode())


async def send_error(send: Send, refusal: Refusal) -> None:
    """OpenAI-style error JSON, so clients that parse vLLM's errors parse ours too."""
    await send_json(
        send,
        refusal.status,
        {"error": {"message": refusal.message, "type": refusal.kind, "code": refusal.status, **refusal.extra}},
        refusal.headers,
    )


async def _send_whole(send: Send, status: int, content_type: bytes, body: bytes, headers: dict[str, str] | None = None) -> None:
    extra = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
