"""The SageMaker Runtime API in front of a local adapter server.

SageMaker's runtime endpoint turns ``InvokeEndpoint`` into ``POST /invocations`` on the container,
with ``X-Amzn-SageMaker-Inference-Component`` replaced by the adapter header, and wraps what the
container answers: its body as is, an error as ``ModelError`` (424) carrying
``OriginalStatusCode``/``OriginalMessage``, a stream as event-stream ``PayloadPart`` events. This
front does the same on loopback, so the code that calls it is the code that calls AWS.

It also passes on the server's Prometheus ``GET /metrics``, so ``cdk-adapters usage --prometheus``
reads a local run at the address that serves it (SageMaker exposes no such route; CloudWatch has
the same per-adapter figures there).

Local mode has one endpoint, or one per cell of a service (`local.cells`), and no accounts;
request signatures are not checked.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from cdk_adapters.contract import runtime_api
from cdk_adapters.contract.adapter_names import adapter_component_name, adapter_name_key
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES
from cdk_adapters.local import event_stream
from cdk_adapters.local.cells import LocalService
from cdk_adapters.local.serving import LOCAL_ENDPOINT

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

COMPONENT_HEADER = runtime_api.COMPONENT_HEADER
CUSTOM_ATTRIBUTES_HEADER = runtime_api.CUSTOM_ATTRIBUTES_HEADER
ADAPTER_HEADER = runtime_api.ADAPTER_IDENTIFIER_HEADER
DISCOVERY_PATH = runtime_api.LOCAL_DISCOVERY_PATH
METRICS_PATH = runtime_api.METRICS_PATH
ACCOUNT = "local"
COMPONENT_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference "
    "components. Please include Inference Component Name header or consider using SageMaker models."
)


class RuntimeApiError(Exception):
    """An error the runtime API itself answers (not the container): `code` is botocore's error code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Invocation:
    """One parsed runtime call."""

    streaming: bool
    adapter: str | None
    headers: dict[str, str]
    body: bytes


class RuntimeFront:
    """ASGI app: SageMaker Runtime's two invocation routes, ``/ping``, the discovery record and the
    server's ``/metrics``."""

    def __init__(self, record: DiscoveryRecord | LocalService, backend_url: str) -> None:
        self.record = record
        self._discovery = (record.service if isinstance(record, LocalService) else record).to_json().encode()
        self.backend_url = backend_url
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.backend_url, timeout=httpx.Timeout(120.0))
        return self._client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, self)
            return
        path, method = scope["path"], scope["method"]
        try:
            host = next((value.decode("latin-1") for name, value in scope["headers"] if name.lower() == b"host"), None)
            if runtime_api.refuses_host(scope.get("server"), host):
                # A web page that rebinds its DNS name to 127.0.0.1 reaches the port, never with this Host.
                raise RuntimeApiError(403, "AccessDeniedException", f"Host {host!r} is not this loopback endpoint")
            if method == "GET" and path == "/ping":
                await _send_whole(send, 200, {"content-type": "text/plain"}, b"ok")
            elif method == "GET" and path == DISCOVERY_PATH:
                await _send_whole(send, 200, {"content-type": "application/json"}, self._discovery)
            elif method == "GET" and path == METRICS_PATH:
                await self._metrics(send)
            elif method == "POST" and path.startswith("/endpoints/"):
                invocation = await self._parse(scope, receive)
                if invocation.streaming:
                    await self._stream(invocation, send)
                else:
                    await self._invoke(invocation, send)
            else:
                raise RuntimeApiError(404, "UnknownOperationException", f"{method} {path} is not a SageMaker Runtime operation")
        except RuntimeApiError as error:
            await _send_runtime_error(send, error)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _parse(self, scope: Scope, receive: Receive) -> Invocation:
        parts = scope["path"].split("/")
        if len(parts) != 4 or parts[3] not in ("invocations", "invocations-response-stream"):
            raise RuntimeApiError(404, "UnknownOperationException", f"POST {scope['path']} is not a SageMaker Runtime operation")
        endpoint = parts[2]
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > INVOKE_ENDPOINT_MAX_BYTES:
            raise _too_large(int(declared))  # refused before a byte of it is read
        body = await _read_body(receive, INVOKE_ENDPOINT_MAX_BYTES)
        cell = self._cell(endpoint)
        if cell is None:
            raise RuntimeApiError(400, "ValidationError", f"Endpoint {endpoint} of account {ACCOUNT} not found.")
        component = headers.get(COMPONENT_HEADER)
        if not component:
            raise RuntimeApiError(400, "ValidationError", COMPONENT_REQUIRED)
        return Invocation(parts[3] != "invocations", _adapter_for(component, *cell), headers, body)

    def _cell(self, endpoint: str) -> tuple[DiscoveryRecord, frozenset[str] | None] | None:
        """The record of the endpoint called, and the adapters it serves (None: any registered one)."""
        if isinstance(self.record, LocalService):
            return self.record.endpoint(endpoint)
        return (self.record, None) if endpoint == self.record.endpoint_name else None

    def _backend_headers(self, invocation: Invocation) -> dict[str, str]:
        headers = {
            "content-type": invocation.headers.get("content-type", "application/json"),
            "x-amzn-requestid": str(uuid.uuid4()),
        }
        if invocation.adapter is not None:
            headers[ADAPTER_HEADER] = invocation.adapter
        if CUSTOM_ATTRIBUTES_HEADER in invocation.headers:
            headers[CUSTOM_ATTRIBUTES_HEADER] = invocation.headers[CUSTOM_ATTRIBUTES_HEADER]
        return headers

    async def _invoke(self, invocation: Invocation, send: Send) -> None:
        answer = await self._backend_call(invocation)
        if answer.status_code >= 300:
            await _send_model_error(send, answer.status_code, answer.content)
            return
        headers = {
            "content-type": answer.headers.get("content-type", "application/json"),
            "x-amzn-invoked-production-variant": "AllTraffic",
        }
        if CUSTOM_ATTRIBUTES_HEADER in answer.headers:
            headers[CUSTOM_ATTRIBUTES_HEADER] = answer.headers[CUSTOM_ATTRIBUTES_HEADER]
        await _send_whole(send, 200, headers, answer.content)

    async def _stream(self, invocation: Invocation, send: Send) -> None:
        request = self.client.build_request(
            "POST", "/invocations", content=invocation.body, headers=self._backend_headers(invocation)
        )
        try:
            answer = await self.client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise RuntimeApiError(500, "InternalFailure", f"the local adapter server did not answer: {error}") from None
        try:
            if answer.status_code >= 300:
                await _send_model_error(send, answer.status_code, await answer.aread())
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": _encode_headers(
                        {
                            "content-type": event_stream.CONTENT_TYPE,
                            "x-amzn-sagemaker-content-type": answer.headers.get("content-type", "application/octet-stream"),
                            "x-amzn-invoked-production-variant": "AllTraffic",
                        }
                    ),
                }
            )
            try:
                async for piece in answer.aiter_raw():
                    if piece:
                        await send({"type": "http.response.body", "body": event_stream.payload_part(piece), "more_body": True})
            except httpx.HTTPError as error:
                failure = event_stream.model_stream_error(f"the model's stream failed: {error}")
                await send({"type": "http.response.body", "body": failure, "more_body": False})
                return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await answer.aclose()

    async def _metrics(self, send: Send) -> None:
        try:
            answer = await self.client.get(METRICS_PATH)
        except httpx.HTTPError as error:
            raise RuntimeApiError(500, "InternalFailure", f"the local adapter server did not answer: {error}") from None
        await _send_whole(
            send, answer.status_code, {"content-type": answer.headers.get("content-type", "text/plain")}, answer.content
        )

    async def _backend_call(self, invocation: Invocation) -> httpx.Response:
        try:
            return await self.client.post("/invocations", content=invocation.body, headers=self._backend_headers(invocation))
        except httpx.HTTPError as error:
            raise RuntimeApiError(500, "InternalFailure", f"the local adapter server did not answer: {error}") from None


def _adapter_for(component: str, record: DiscoveryRecord, held: frozenset[str] | None) -> str | None:
    """What the adapter header carries for an inference component: ``None`` for the base
    component, else the component name itself, as SageMaker is expected to send it (the
    container maps it to the adapter, `adapter_identity`; its tests cover the other answers).

    A cell's endpoint knows only its own adapters' components (`held`); the one server behind
    every cell registered each adapter under its plain local component name."""
    if component.lower() == record.base_inference_component_name.lower():
        return None
    prefix = record.component_prefix.lower() + "-"
    if not component.lower().startswith(prefix) or len(component) == len(prefix):
        raise RuntimeApiError(400, "ValidationError", f"Inference Component {component} not found.")
    if held is None:
        # A component whose adapter is not registered still reaches the container, which answers
        # 404 naming it, as an adapter component whose adapter the container lost would.
        return adapter_name_key(component)
    adapter = adapter_name_key(component[len(prefix) :])
    if adapter not in held:
        raise RuntimeApiError(400, "ValidationError", f"Inference Component {component} not found.")
    return adapter_component_name(LOCAL_ENDPOINT, adapter)


async def _lifespan(receive: Receive, send: Send, front: RuntimeFront) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await front.close()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive, limit: int, deadline_s: float = runtime_api.BODY_DEADLINE_S) -> bytes:
    """The whole body, refused (413) as soon as it passes `limit` bytes: a chunked body states no
    length, and holding all of an endless one in memory is what the limit is for. A body that has
    not arrived within `deadline_s` is refused (408), so a stalled upload frees its connection."""
    chunks, size, more = [], 0, True
    try:
        async with asyncio.timeout(deadline_s):
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _too_large(None)
                chunks.append(chunk)
                more = message.get("more_body", False)
    except TimeoutError:
        raise RuntimeApiError(408, "RequestTimeout", f"the request body did not arrive within {deadline_s:g} s") from None
    return b"".join(chunks)


def _too_large(size: int | None) -> RuntimeApiError:
    """413 for a body of `size` bytes (None: longer than the limit, stopped while reading)."""
    stated = f"{size} bytes" if size is not None else f"more than {INVOKE_ENDPOINT_MAX_BYTES} bytes"
    return RuntimeApiError(
        413, "ValidationError", f"Request payload of {stated} exceeds the {INVOKE_ENDPOINT_MAX_BYTES}-byte InvokeEndpoint limit."
    )


async def _send_model_error(send: Send, status: int, original: bytes) -> None:
    """The container's error as SageMaker wraps it: ``ModelError`` with the original status and body."""
    text = original.decode("utf-8", errors="replace")
    side = "client" if status < 500 else "server"
    document = {
        "ErrorCode": f"{side.upper()}_ERROR_FROM_MODEL",
        "Message": f'Received {side} error ({status}) from primary with message "{text}". '
        "See the adapter server's log (cdk-adapters local prints where it is).",
        "OriginalStatusCode": status,
        "OriginalMessage": text,
    }
    await _send_whole(
        send, 424, {"content-type": "application/json", "x-amzn-errortype": "ModelError"}, json.dumps(document).encode()
    )


async def _send_runtime_error(send: Send, error: RuntimeApiError) -> None:
    await _send_whole(
        send,
        error.status,
        {"content-type": "application/json", "x-amzn-errortype": error.code},
        json.dumps({"message": error.message}).encode(),
    )


async def _send_whole(send: Send, status: int, headers: Mapping[str, str], body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": _encode_headers({**headers, "content-length": str(len(body)), "x-amzn-requestid": str(uuid.uuid4())}),
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _encode_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
