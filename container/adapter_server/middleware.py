"""The ASGI middleware that makes stock vLLM speak SageMaker's adapter contract safely.

Installed with ``--middleware adapter_server.middleware.SageMakerAdapterMiddleware``; vLLM calls
``app.add_middleware(SageMakerAdapterMiddleware)``, so every request passes through it before
vLLM's own routes. It owns:

* ``POST /adapters`` (JSON body or query form): the shared compatibility gate runs on ``src``
  before vLLM sees it; registration is idempotent by content digest and persisted.
* ``DELETE /adapters/{name}``: unload, 404 naming an unknown adapter; ``GET /adapters`` lists.
* start-up: persisted registrations are replayed through the engine; ``/ping`` answers 503 until
  they are all back, so SageMaker never routes to a server that silently lost adapters.
* ``/invocations`` and the OpenAI generation routes: a request that names no adapter is refused
  unless base-model access is enabled; an unknown adapter is a 404 naming it;
  ``CustomAttributes: route=/v1/...`` is honoured with the adapter still applied; streams work.
* one JSON log line and per-adapter Prometheus metrics per inference request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, unquote

from adapter_server import observability, sagemaker_contract
from adapter_server.engine_routes import ASGIApp, EngineAnswer, EngineRoutes, Message, Scope
from adapter_server.registrations import RegistrationStore, StateFileError, adapter_digest
from adapter_server.response_usage import StreamObserver, usage_from_body
from adapter_server.settings import ServingSettings
from cdk_adapters import serving_env
from cdk_adapters.compat import BaseModelFacts, check_adapter_dir
from cdk_adapters.problems import Problem

logger = logging.getLogger("adapter_server")

Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

READY_WAIT_SECONDS = 50.0
"""How long a request waits for start-up replay; SageMaker gives an invocation 60 s in all."""

MAX_BODY_BYTES = 6_291_456
"""SageMaker's InvokeEndpoint payload limit. Its front end enforces it too; the middleware holds
bodies in memory, so it refuses larger ones itself (local mode, callers inside the container)."""

GENERATION_PATHS = sagemaker_contract.GUARDED_GENERATION_PATHS


class _Refusal(Exception):
    """A request the middleware answers itself, with a JSON error."""

    def __init__(self, status: int, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.extra = status, kind, message, extra


class SageMakerAdapterMiddleware:
    """Pure ASGI middleware; one instance per vLLM API server process."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._startup: asyncio.Task | None = None
        self._ready: asyncio.Event | None = None
        self._failure: str | None = None
        self._pending_replay = 0
        self._registration_lock: asyncio.Lock | None = None
        self.settings = ServingSettings()
        self.store = RegistrationStore(None)
        self.engine: EngineRoutes | None = None
        self.base: BaseModelFacts | None = None
        self.max_lora_rank = 16
        self.served_model_names: frozenset[str] = frozenset()
        self.residency = observability.ResidencyTracker(1)
        self._engine_paths: Path | None = None

    # ----------------------------------------------------------------------------------- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._watch_lifespan(scope, send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._begin_startup(scope)
        path, method = scope["path"], scope["method"]
        try:
            if path == sagemaker_contract.ADAPTERS_PATH and method == "POST":
                await self._register(scope, receive, send)
            elif path == sagemaker_contract.ADAPTERS_PATH and method == "GET":
                await self._list(send)
            elif path.startswith(sagemaker_contract.ADAPTERS_PATH + "/") and method == "DELETE":
                await self._unregister(unquote(path[len(sagemaker_contract.ADAPTERS_PATH) + 1 :]), send)
            elif path in sagemaker_contract.VLLM_ADAPTER_ADMIN_PATHS:
                raise _Refusal(
                    403, "forbidden", f"{path} is closed: register adapters with POST /adapters, "
                    "which validates them first, and remove them with DELETE /adapters/{name}",
                )
            elif path in sagemaker_contract.HEALTH_PATHS:
                await self._health(scope, receive, send)
            elif method == "POST" and (path == sagemaker_contract.INVOCATIONS_PATH or path in GENERATION_PATHS):
                await self._infer(scope, receive, send)
            else:
                await self.app(scope, receive, send)
        except _Refusal as refusal:
            await _send_error(send, refusal)

    def _watch_lifespan(self, scope: Scope, send: Send) -> Send:
        """Start the replay as soon as vLLM's own start-up is complete."""

        async def watching_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self._begin_startup(scope)
            await send(message)

        return watching_send

    # ------------------------------------------------------------------------------- start-up

    def _begin_startup(self, scope: Scope) -> None:
        if self._startup is not None:
            return
        self._ready = asyncio.Event()
        self._registration_lock = asyncio.Lock()
        self._startup = asyncio.get_running_loop().create_task(self._start(scope["app"], scope.get("state")))

    async def _start(self, starlette_app: Any, lifespan_state: dict | None) -> None:
        assert self._ready is not None
        try:
            await self._configure(starlette_app, lifespan_state)
            await self._replay()
        except Exception as error:  # the failure is reported by /ping, never swallowed
            self._failure = self._failure or f"start-up failed: {error!r}"
            logger.exception("cdk-adapters start-up failed")
        finally:
            if self._failure:
                observability.emit(observability.REPLAY_EVENT, status="failed", error=self._failure)
            self._ready.set()

    async def _configure(self, starlette_app: Any, lifespan_state: dict | None) -> None:
        settings, problems = ServingSettings.from_environ()
        if problems:
            self._failure = "; ".join(str(p) for p in problems)
            return
        self.settings = settings
        args = starlette_app.state.args
        self.engine = EngineRoutes(self.app, starlette_app, lifespan_state)
        self.max_lora_rank = int(args.max_lora_rank)
        self.served_model_names = frozenset(args.served_model_name or [args.model])
        self.residency = observability.ResidencyTracker(int(args.max_loras))
        self.base = await asyncio.to_thread(
            BaseModelFacts.from_model_dir,
            args.model,
            model_id=settings.base_model_id,
            revision=settings.base_model_revision,
        )
        try:
            self.store = await asyncio.to_thread(RegistrationStore.load, settings.state_dir)
        except StateFileError as error:
            self._failure = str(error)
            return
        if settings.state_dir is None:
            logger.warning(
                "%s is not set: adapter registrations live in memory only and are lost if the server restarts",
                serving_env.STATE_DIR,
            )

    async def _replay(self) -> None:
        """Load every persisted registration again, checking that its files are unchanged."""
        if self._failure:
            return
        registrations = self.store.all()
        self._pending_replay = len(registrations)
        failures: list[str] = []
        for registration in registrations:
            started = time.monotonic()
            problems = await self._admission_problems(registration.name, registration.src)
            digest = None
            if not problems:
                digest = await asyncio.to_thread(adapter_digest, Path(registration.src))
                if digest != registration.sha256:
                    problems = [Problem(f"adapter {registration.name!r}", "src", f"files in {registration.src} changed since registration")]
            failure = "; ".join(str(p) for p in problems) or None
            if failure is None:
                assert self.engine is not None
                answer = await self._load(registration.name, registration.src, registration.sha256)
                if not answer.ok:
                    failure = f"adapter {registration.name!r}: vLLM refused to load it again: {answer.message()}"
            if failure is not None:
                failures.append(failure)
            self._pending_replay -= 1
            observability.emit(
                observability.REPLAY_EVENT,
                adapter=registration.name,
                status="failed" if failure else "loaded",
                error=failure,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )
        observability.REGISTERED_ADAPTERS.set(len(registrations) - len(failures))
        if failures:
            self._failure = "persisted adapters could not be restored: " + "; ".join(failures)

    async def _wait_until_ready(self) -> None:
        assert self._ready is not None
        try:
            await asyncio.wait_for(self._ready.wait(), READY_WAIT_SECONDS)
        except asyncio.TimeoutError:
            raise _Refusal(503, "starting", f"the server is still restoring {self._pending_replay} adapter(s)") from None
        if self._failure:
            raise _Refusal(503, "unhealthy", self._failure)

    async def _health(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._ready is not None
        if not self._ready.is_set():
            raise _Refusal(503, "starting", f"restoring persisted adapters ({self._pending_replay} left)")
        if self._failure:
            raise _Refusal(503, "unhealthy", self._failure)
        await self.app(scope, receive, send)

    # ---------------------------------------------------------------------------- registration

    async def _admission_problems(self, name: str, src: str) -> list[Problem]:
        assert self.base is not None
        problem = _src_problem(name, src)
        if problem is not None:
            return [problem]
        return await asyncio.to_thread(
            check_adapter_dir,
            name,
            Path(src),
            base=self.base,
            max_lora_rank=self.max_lora_rank,
            allow_vision_modules=self.settings.allow_vision_modules,
        )

    async def _register(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(scope, receive)
        name, src = _registration_request(scope, body)
        alias = sagemaker_contract.header(scope["headers"], sagemaker_contract.ADAPTER_ALIAS_HEADER) or name
        await self._wait_until_ready()
        assert self._registration_lock is not None and self.engine is not None
        started = time.monotonic()
        async with self._registration_lock:
            outcome, status, detail = await self._register_locked(name, src)
        observability.REGISTRATIONS.labels(outcome).inc()
        observability.emit(
            observability.REGISTRATION_EVENT,
            action="register",
            adapter=name,
            outcome=outcome,
            status=status,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            error=None if status == 200 else detail.message,
        )
        if status != 200:
            raise detail
        suffix = "" if outcome == "registered" else " (already registered with the same files)"
        await _send_text(send, 200, f"Adapter {alias} registered{suffix}")

    async def _register_locked(self, name: str, src: str) -> tuple[str, int, Any]:
        existing = self.store.get(name)
        if existing is not None and Path(src).is_dir():
            digest = await asyncio.to_thread(adapter_digest, Path(src))
            if digest == existing.sha256:
                return "unchanged", 200, None
            return "conflict", 409, _Refusal(
                409, "adapter_conflict",
                f"adapter {name!r} is already registered with different files (sha256 {existing.sha256[:12]}…, "
                f"these are {digest[:12]}…); unregister it first, or register the new files under a new "
                "versioned name",
                adapter=name,
            )
        problems = await self._admission_problems(name, src)
        if problems:
            return "rejected", 422, _Refusal(
                422, "adapter_rejected",
                f"adapter {name!r} cannot be served by this endpoint: " + "; ".join(p.message for p in problems),
                adapter=name,
                problems=[{"subject": p.subject, "field": p.field, "message": p.message} for p in problems],
            )
        if existing is not None:  # registered, but its old files are gone: the name is still taken
            return "conflict", 409, _Refusal(
                409, "adapter_conflict", f"adapter {name!r} is already registered from {existing.src}", adapter=name
            )
        digest = await asyncio.to_thread(adapter_digest, Path(src))
        assert self.engine is not None
        answer = await self._load(name, src, digest)
        if not answer.ok:
            if await self.engine.healthy():  # the engine is fine: these files are what it cannot load
                return "engine_error", 422, _Refusal(
                    422, "adapter_load_failed",
                    f"vLLM could not load adapter {name!r} from {src}: {answer.message()}; the files passed the "
                    "checks but are damaged or incomplete: re-create the archive from the PEFT output",
                    adapter=name,
                )
            return "engine_error", 503, _Refusal(
                503, "engine_error", f"vLLM did not load adapter {name!r} and is unhealthy: {answer.message()}",
                adapter=name,
            )
        try:
            await asyncio.to_thread(self.store.add, name, src, digest)
        except OSError as error:
            await self.engine.unload(name)
            return "engine_error", 500, _Refusal(
                500, "state_error", f"adapter {name!r} was not registered: cannot persist it ({error})", adapter=name
            )
        self.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(self.store.all()))
        return "registered", 200, None

    async def _load(self, name: str, src: str, digest: str) -> EngineAnswer:
        """Load through a path unique to this name and content, never `src` itself.

        vLLM's prefix cache keys an adapter's KV blocks by its name and path. SageMaker may
        extract a re-created adapter (same name, new files) into the same directory; loaded from
        there, it would be served the old adapter's cached KV for every shared prompt prefix.
        """
        if self._engine_paths is None:
            self._engine_paths = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="cdk-adapters-loaded-"))
        name_key = hashlib.sha256(name.encode()).hexdigest()[:16]
        link = self._engine_paths / f"{name_key}-{digest[:32]}"
        staged = link.with_name(link.name + ".new")
        staged.unlink(missing_ok=True)
        staged.symlink_to(Path(src).resolve(), target_is_directory=True)
        os.replace(staged, link)  # the newest src for this name and content wins
        assert self.engine is not None
        return await self.engine.load(name, str(link))

    async def _unregister(self, name: str, send: Send) -> None:
        await self._wait_until_ready()
        assert self._registration_lock is not None and self.engine is not None
        async with self._registration_lock:
            if name not in self.store:
                outcome, refusal = "unknown", _Refusal(
                    404, "adapter_not_found", f"adapter {name!r} is not registered on this endpoint", adapter=name
                )
            else:
                outcome, refusal = await self._unregister_locked(name)
        observability.emit(
            observability.REGISTRATION_EVENT, action="unregister", adapter=name, outcome=outcome,
            status=200 if refusal is None else refusal.status, error=None if refusal is None else refusal.message,
        )
        if refusal is not None:
            raise refusal
        await _send_text(send, 200, f"Adapter {name} unregistered")

    async def _unregister_locked(self, name: str) -> tuple[str, _Refusal | None]:
        """Forget the record first: if that cannot be persisted, nothing changed and the adapter still serves.

        Requests in flight keep their adapter to the end (vLLM's unload only forgets the name);
        new requests get 404 from the moment the record is gone.
        """
        existing = self.store.get(name)
        assert existing is not None and self.engine is not None
        try:
            await asyncio.to_thread(self.store.remove, name)
        except OSError as error:
            return "engine_error", _Refusal(
                500, "state_error", f"adapter {name!r} was not unregistered: cannot persist it ({error})", adapter=name
            )
        answer = await self.engine.unload(name)
        if not answer.ok and answer.status != 404:  # 404: vLLM had already lost it; forgetting is right
            await asyncio.to_thread(self.store.add, name, existing.src, existing.sha256)
            return "engine_error", _Refusal(
                502, "engine_error", f"vLLM did not unload adapter {name!r}: {answer.message()}", adapter=name
            )
        self.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(self.store.all()))
        return "unregistered", None

    async def _list(self, send: Send) -> None:
        await self._wait_until_ready()
        document = {"adapters": [{"name": r.name, "src": r.src, "sha256": r.sha256} for r in self.store.all()]}
        await _send_json(send, 200, document)

    # ------------------------------------------------------------------------------- inference

    async def _infer(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        headers = scope["headers"]
        path = scope["path"]
        record = observability.RequestRecord(
            adapter=sagemaker_contract.header(headers, sagemaker_contract.ADAPTER_IDENTIFIER_HEADER) or None,
            route=path,
            stream=False,
            request_id=sagemaker_contract.header(headers, "x-amzn-requestid")
            or sagemaker_contract.header(headers, "x-request-id"),
        )
        label = observability.UNREGISTERED_LABEL
        published = False

        def publish() -> None:
            # Called before the last byte goes out, so the log line exists when the caller has its answer.
            nonlocal published
            if not published:
                published = True
                record.publish(label)

        try:
            body = await _read_body(scope, receive)
            target = self._target_route(path, headers)
            record.route = target
            document = _json_object(body)
            body_names_model = target != sagemaker_contract.INVOCATIONS_PATH
            if record.adapter is None and body_names_model and document is not None:
                model = document.get("model")
                if isinstance(model, str) and model and model not in self.served_model_names:
                    record.adapter = model
            await self._wait_until_ready()
            if record.adapter is None:
                if not self.settings.allow_base_model:
                    raise _Refusal(
                        400, "adapter_required",
                        "the request names no adapter (header X-Amzn-SageMaker-Adapter-Identifier is missing: call "
                        "InvokeEndpoint with InferenceComponentName set to an adapter inference component); "
                        f"base-model access is disabled on this endpoint ({serving_env.ALLOW_BASE_MODEL})",
                    )
                label = observability.BASE_MODEL_LABEL
            elif record.adapter not in self.store:
                raise _Refusal(
                    404, "adapter_not_found", f"adapter {record.adapter!r} is not registered on this endpoint",
                    adapter=record.adapter,
                )
            else:
                label = record.adapter
                record.cold = self.residency.use(record.adapter)
            strip_usage = False
            if document is not None:
                if record.adapter is not None:
                    document["model"] = record.adapter
                record.stream = bool(document.get("stream"))
                usage_on_request = target == sagemaker_contract.INVOCATIONS_PATH or target in sagemaker_contract.ROUTABLE_PATHS
                if record.stream and usage_on_request:  # OpenAI completions/chat know stream_options
                    options = document.get("stream_options") if isinstance(document.get("stream_options"), dict) else {}
                    strip_usage = not options.get("include_usage")
                    document["stream_options"] = {**options, "include_usage": True}
                body = json.dumps(document).encode()
            forward_scope = dict(scope)
            forward_scope["headers"] = [(k, v) for k, v in headers if k.lower() != b"content-length"] + [
                (b"content-length", str(len(body)).encode())
            ]
            if target != path:
                forward_scope["path"] = target
                forward_scope["raw_path"] = target.encode()
            await self._forward(forward_scope, _replaying(body, receive), send, record, started, strip_usage, publish)
        except _Refusal as refusal:
            record.status, record.error = refusal.status, refusal.message
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
            publish()
            await _send_error(send, refusal)
        except BaseException:
            record.status = record.status or 500
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
            raise
        finally:
            publish()

    def _target_route(self, path: str, headers: list[tuple[bytes, bytes]]) -> str:
        if path != sagemaker_contract.INVOCATIONS_PATH:
            return path
        attributes = sagemaker_contract.custom_attributes(
            sagemaker_contract.header(headers, sagemaker_contract.CUSTOM_ATTRIBUTES_HEADER)
        )
        route = attributes.get(sagemaker_contract.ROUTE_ATTRIBUTE)
        if route is None:
            return path
        if route not in sagemaker_contract.ROUTABLE_PATHS:
            raise _Refusal(
                400, "bad_route",
                f"CustomAttributes route={route!r} is not allowed; use one of "
                + ", ".join(sorted(sagemaker_contract.ROUTABLE_PATHS)),
            )
        return route

    async def _forward(
        self, scope: Scope, receive: Receive, send: Send, record: observability.RequestRecord,
        started: float, strip_usage: bool, publish: Callable[[], None],
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

        await self.app(scope, receive, observing_send)
        if record.latency_ms is None:  # the application ended without a final body message
            complete()


# ----------------------------------------------------------------------------------- helpers


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole request body, or a 413 once it is larger than SageMaker would ever pass on."""
    declared = sagemaker_contract.header(scope["headers"], "content-length")
    size, chunks, more = 0, [], True
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
    if size > MAX_BODY_BYTES:
        raise _Refusal(
            413, "payload_too_large",
            f"the request body is {size} bytes; SageMaker's InvokeEndpoint accepts at most {MAX_BODY_BYTES} bytes "
            "(6 MiB): send a shorter prompt or split the work into several requests",
        )
    return b"".join(chunks)


def _src_problem(name: str, src: str) -> Problem | None:
    """``src`` must be the absolute directory SageMaker extracted the adapter archive into."""
    path = Path(src)
    subject = f"adapter {name!r}"
    if not path.is_absolute():
        return Problem(subject, "src", f"{src!r} must be an absolute path (SageMaker passes where it extracted the archive)")
    if not path.exists():
        return Problem(subject, "src", f"{src} does not exist: the adapter archive was not extracted there")
    if not path.is_dir():
        return Problem(
            subject, "src",
            f"{src} is a file, not a directory: pass the directory the adapter archive was extracted into, "
            "with adapter_config.json at its top",
        )
    return None


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the (possibly rewritten) body over once, then the real stream (disconnects)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _json_object(body: bytes) -> dict | None:
    try:
        document = json.loads(body) if body else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return document if isinstance(document, dict) else None


def _registration_request(scope: Scope, body: bytes) -> tuple[str, str]:
    """``name`` and ``src`` from a JSON body or, as SageMaker may send them, the query string."""
    fields: dict[str, Any] = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    if body.strip():
        document = _json_object(body)
        if document is None:
            observability.REGISTRATIONS.labels("bad_request").inc()
            raise _Refusal(400, "bad_request", "POST /adapters needs a JSON object body or query parameters name and src")
        fields.update(document)
    missing = [key for key in ("name", "src") if not isinstance(fields.get(key), str) or not fields[key].strip()]
    if missing:
        observability.REGISTRATIONS.labels("bad_request").inc()
        raise _Refusal(
            400, "bad_request",
            "POST /adapters is missing " + " and ".join(missing) + " (send them as a JSON body or as query parameters)",
        )
    return fields["name"].strip(), fields["src"].strip()


async def _send_json(send: Send, status: int, document: Any) -> None:
    body = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_text(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_error(send: Send, refusal: _Refusal) -> None:
    """OpenAI-style error JSON, so clients that parse vLLM's errors parse ours too."""
    await _send_json(
        send, refusal.status, {"error": {"message": refusal.message, "type": refusal.kind, "code": refusal.status, **refusal.extra}}
    )
