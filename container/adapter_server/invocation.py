"""The inference path: ``/invocations`` and the OpenAI generation routes.

A request that names no adapter is refused unless base-model access is enabled, and an unknown
adapter is a 404 naming it, so nothing silently falls back to the base model. The request is
rewritten (`invocation_request`) and forwarded to vLLM, streams included; on the way back its
answer is observed for one log line (an EMF document: per-adapter CloudWatch metrics) and the
per-adapter Prometheus metrics. Both count a request under the same adapter label, refusals too.
Where capture is on for the adapter, a sampled copy of the request and its answer follows the log
line (`capture`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapter_server import observability, sagemaker_contract
from adapter_server.admission import CallerGone, FairAdmission, sequence_refusal
from adapter_server.asgi_io import Receive, Refusal, Send, detached, read_body, read_json_object, send_error
from adapter_server.asgi_types import ASGIApp, Message, Scope
from adapter_server.capture import Capture
from adapter_server.invocation_request import (
    chosen_adapter,
    forwarded_body,
    forwarded_scope,
    refuse_remote_media,
    replaying,
    sequence_count,
    target_route,
)
from adapter_server.readiness import Readiness
from adapter_server.response_usage import StreamObserver, usage_from_body
from adapter_server.serving_context import ServingContext
from cdk_adapters.contract import capture_record, error_kinds, serving_env

_ADAPTER_HEADER = sagemaker_contract.ADAPTER_IDENTIFIER_HEADER.encode("latin-1")
_AMZN_REQUEST_ID_HEADER = b"x-amzn-requestid"
_REQUEST_ID_HEADER = b"x-request-id"
_LOGGED_HEADERS = frozenset({_ADAPTER_HEADER, _AMZN_REQUEST_ID_HEADER, _REQUEST_ID_HEADER})


@dataclass(slots=True)
class _Pending:
    """One request's record, and what its log line needs besides, until the line is written."""

    record: observability.RequestRecord
    label: str | None = None
    """Set on admission; a refusal before it is labelled by `InvocationHandler._label`."""
    capture: Capture | None = None
    """Set when this adapter's capture samples the request."""
    published: bool = False


def _named_headers(headers: list[tuple[bytes, bytes]]) -> dict[bytes, str]:
    """The first value of each header the record needs, in one pass over the request's headers."""
    found: dict[bytes, str] = {}
    for name, value in headers:
        name = name.lower()
        if name in _LOGGED_HEADERS and name not in found:
            found[name] = value.decode("latin-1")
    return found


class InvocationHandler:
    """Guards, rewrites and forwards one inference request to vLLM (`app`), and logs it."""

    def __init__(self, app: ASGIApp, *, context: ServingContext, readiness: Readiness) -> None:
        self._app = app
        self._context = context
        self._readiness = readiness
        self._log: observability.RequestLog | None = None

    def _request_log(self) -> observability.RequestLog:
        """The renderer for the current settings (start-up replaces the defaults once)."""
        settings = self._context.settings.metrics
        if self._log is None or self._log.settings is not settings:
            self._log = observability.RequestLog(settings)
        return self._log

    def _label(self, adapter: str | None) -> str:
        """The metrics label of a request refused before admission: its adapter, if registered."""
        if adapter is None:
            return observability.BASE_MODEL_LABEL if self._context.settings.allow_base_model else observability.UNREGISTERED_LABEL
        key = self._context.store.resolve(self._context.settings.adapter_key(adapter))
        return key if key is not None else observability.UNREGISTERED_LABEL

    def _capture_writer(self, adapter: str | None) -> Callable[[str], None]:
        """Writes one capture record to `adapter`'s own stream (one tenant's records, no other's)."""
        stream = capture_record.capture_stream(adapter)
        log = self._context.capture_log
        return lambda line: log.write(stream, line)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        named = _named_headers(scope["headers"])
        given = named.get(_ADAPTER_HEADER) or None
        record = observability.RequestRecord(
            # The adapter key (`adapter_identity`) from the start, so even a refusal logs one identity.
            adapter=self._context.settings.adapter_key(given) if given else None,
            route=scope["path"],
            stream=False,
            request_id=named.get(_AMZN_REQUEST_ID_HEADER) or named.get(_REQUEST_ID_HEADER),
        )
        pending = _Pending(record)
        refused: Refusal | None = None
        try:
            await self._serve(scope, receive, send, given, pending, started)
        except Refusal as refusal:
            record.status, record.error = refusal.status, refusal.message
            # The server's own time, without a pacing hold: a looping tenant cannot raise the latency alarms.
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
            self._publish(pending)
            refused = detached(refusal)
        except BaseException:
            record.status = record.status or 500
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
            raise
        finally:
            self._publish(pending)
        if refused is not None:
            await self._context.refusal_pacing.pace(pending.label or self._label(record.adapter), refused.status)
            await send_error(send, refused)

    def _publish(self, pending: _Pending) -> None:
        """Write `pending`'s log line (and its capture record) unless that is done already.

        Called before the last byte goes out, so the log line exists when the caller has its answer.
        """
        if pending.published:
            return
        pending.published = True
        record = pending.record
        record.publish(pending.label or self._label(record.adapter), self._request_log())
        if pending.capture is not None:
            pending.capture.publish(
                status=record.status,
                prompt_tokens=record.prompt_tokens,
                completion_tokens=record.output_tokens,
                request_id=record.request_id,
                write=self._capture_writer(record.adapter),
            )

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, given: str | None, pending: _Pending, started: float
    ) -> None:
        """Guard, admit and forward the request `pending` records (`given`: the adapter its header names)."""
        record = pending.record
        path = scope["path"]
        target = target_route(path, scope["headers"])
        record.route = target
        # Local runs only, and never on /invocations (SageMaker's door, and local mode's front).
        body_names_adapter = self._context.settings.body_names_adapter and path != sagemaker_contract.INVOCATIONS_PATH
        await self._readiness.wait()
        # What cannot be served is refused before a byte of the body is read or parsed.
        if given is not None:
            record.adapter = self._resolve(given)
        elif not body_names_adapter:
            self._refuse_without_adapter()
        body = await read_body(scope, receive)
        document = await read_json_object(body)
        refuse_remote_media(document)
        if record.adapter is None:
            chosen = chosen_adapter(None, document, self._context.served_model_names, body_names_adapter=body_names_adapter)
            record.adapter = self._resolve(chosen) if chosen is not None else None
        pending.label = label = self._resolve_adapter(record)
        cost = sequence_count(document)
        forwarded = forwarded_body(document, record.adapter, self._context.base_model_name, target)
        record.stream = forwarded.stream
        pending.capture = capture = Capture.begin(self._context.settings.capture, record.adapter, target, document)

        def forward() -> Awaitable[None]:
            return self._forward(
                forwarded_scope(scope, forwarded.body, target, record.adapter),
                replaying(forwarded.body, receive),
                capture.watching(send) if capture is not None else send,
                record,
                started,
                forwarded.strip_usage,
                lambda: self._publish(pending),
            )

        admission = self._context.admission
        if admission is None:
            refusal = sequence_refusal(label, cost, self._context.settings.tenant_limits.for_adapter(label), None)
            if refusal is not None:
                raise refusal
            await forward()
        else:
            await self._forward_in_turn(admission, label, cost, forward, receive, record, started)

    async def _forward_in_turn(
        self,
        admission: FairAdmission,
        label: str,
        cost: int,
        forward: Callable[[], Awaitable[None]],
        receive: Receive,
        record: observability.RequestRecord,
        started: float,
    ) -> None:
        """Forward once `admission` gives this adapter `cost` places in the engine (fair share); a
        caller that leaves before then is logged (499) and never reaches the engine."""
        waiting = observability.waiting_gauge(label)
        waiting.inc()  # a place free at once is taken without yielding, so no scrape sees this
        still_waiting = True
        try:
            async with admission.place(label, lambda: _until_disconnect(receive), cost) as admitted:
                waiting.dec()
                still_waiting = False
                record.queue_ms, record.in_flight = admitted.queue_ms, admitted.in_flight
                in_engine = observability.in_engine_gauge(label)
                in_engine.inc(cost)
                try:
                    await forward()
                finally:
                    in_engine.dec(cost)
        except CallerGone:
            record.status, record.error = 499, "the caller disconnected while the request waited for a place"
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
        finally:
            if still_waiting:  # refused (429) or left before it had a place
                waiting.dec()

    def _refuse_without_adapter(self) -> None:
        """400 for a request that names no adapter while base-model access is off."""
        if not self._context.settings.allow_base_model:
            raise Refusal(
                400,
                error_kinds.ADAPTER_REQUIRED,
                "the request names no adapter (header X-Amzn-SageMaker-Adapter-Identifier is missing: call "
                "InvokeEndpoint with InferenceComponentName set to an adapter inference component); "
                f"base-model access is disabled on this endpoint ({serving_env.ALLOW_BASE_MODEL})",
            )

    def _resolve(self, given: str) -> str:
        """The registered adapter `given` names (a component name or the adapter's own name, by
        `adapter_identity`), or 404 naming what was given."""
        key = self._context.store.resolve(self._context.settings.adapter_key(given))
        if key is None:
            raise Refusal(
                404,
                error_kinds.ADAPTER_NOT_FOUND,
                f"adapter {given!r} is not registered on this endpoint",
                adapter=self._context.settings.adapter_key(given),
            )
        return key

    def _resolve_adapter(self, record: observability.RequestRecord) -> str:
        """The request's metrics label (its resolved adapter, or the base model's)."""
        if record.adapter is None:
            self._refuse_without_adapter()
            return observability.BASE_MODEL_LABEL
        record.cold = self._context.residency.use(record.adapter)
        return record.adapter

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        record: observability.RequestRecord,
        started: float,
        strip_usage: bool,
        publish: Callable[[], None],
    ) -> None:
        observer: StreamObserver | None = None
        collected: list[bytes] = []

        def complete() -> None:
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
            usage = observer.usage if observer is not None else usage_from_body(b"".join(collected))
            record.prompt_tokens, record.output_tokens = usage.prompt_tokens, usage.output_tokens
            record.ttft_ms = round(usage.ttft_ms, 3) if usage.ttft_ms is not None else None
            publish()

        async def observing_send(message: Message) -> None:
            nonlocal observer
            if message["type"] == "http.response.start":
                record.status = int(message["status"])
                content_type = sagemaker_contract.header(message.get("headers", []), "content-type") or ""
                if content_type.startswith("text/event-stream"):
                    observer = StreamObserver(started=started, strip_usage_chunk=strip_usage)
            elif message["type"] == "http.response.body":
                if observer is not None:
                    chunk = observer.feed(message.get("body", b""))
                    if not message.get("more_body", False):
                        chunk += observer.finish()
                    message = {**message, "body": chunk}
                else:
                    collected.append(message.get("body", b""))
                if not message.get("more_body", False):
                    complete()
            await send(message)

        await self._app(scope, receive, observing_send)
        if record.latency_ms is None:  # the application ended without a final body message
            complete()


async def _until_disconnect(receive: Receive) -> None:
    """Returns when the caller disconnects (the body is read already: nothing else can arrive)."""
    while (await receive())["type"] != "http.disconnect":
        pass
