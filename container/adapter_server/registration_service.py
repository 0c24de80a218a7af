"""The registration service: ``POST /adapters``, ``DELETE /adapters/{name}`` and ``GET /adapters``.

An adapter passes the shared compatibility gate on ``src`` before vLLM sees it. Registration is
idempotent by content digest (same name and files: 200; other files: 409) and persisted in the
`registrations.RegistrationStore`, from which start-up `restore`s each one after a restart in
place. Registrations and removals take one lock, so they never interleave.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from adapter_server import observability, sagemaker_contract
from adapter_server.asgi_io import Receive, Refusal, Send, json_object, read_body, send_json, send_text
from adapter_server.engine_routes import EngineAnswer, Scope
from adapter_server.readiness import Readiness
from adapter_server.registrations import Registration, adapter_digest
from adapter_server.serving_context import ServingContext
from cdk_adapters.compat import check_adapter_dir
from cdk_adapters.problems import Problem
from cdk_adapters.contract import error_kinds


class RegistrationService:
    """Admits, loads, unloads and lists adapters, keeping vLLM and the persisted record in step."""

    def __init__(self, *, context: ServingContext, readiness: Readiness) -> None:
        self._context = context
        self._readiness = readiness
        self._lock = asyncio.Lock()
        self._engine_paths: Path | None = None

    # ------------------------------------------------------------------------------ HTTP

    async def register(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(scope, receive)
        name, src = registration_request(scope, body)
        alias = sagemaker_contract.header(scope["headers"], sagemaker_contract.ADAPTER_ALIAS_HEADER) or name
        await self._readiness.wait()
        assert self._context.engine is not None
        started = time.monotonic()
        async with self._lock:
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
        await send_text(send, 200, f"Adapter {alias} registered{suffix}")

    async def unregister(self, name: str, send: Send) -> None:
        await self._readiness.wait()
        assert self._context.engine is not None
        started = time.monotonic()
        async with self._lock:
            if name not in self._context.store:
                outcome, refusal = "unknown", Refusal(
                    404, error_kinds.ADAPTER_NOT_FOUND, f"adapter {name!r} is not registered on this endpoint", adapter=name
                )
            else:
                outcome, refusal = await self._unregister_locked(name)
        observability.emit(
            observability.REGISTRATION_EVENT, action="unregister", adapter=name, outcome=outcome,
            status=200 if refusal is None else refusal.status,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            error=None if refusal is None else refusal.message,
        )
        if refusal is not None:
            raise refusal
        await send_text(send, 200, f"Adapter {name} unregistered")

    async def list_adapters(self, send: Send) -> None:
        await self._readiness.wait()
        document = {"adapters": [{"name": r.name, "src": r.src, "sha256": r.sha256} for r in self._context.store.all()]}
        await send_json(send, 200, document)

    # --------------------------------------------------------------------------- start-up

    async def restore(self, registration: Registration) -> str | None:
        """Load a persisted registration again, checking that its files are unchanged; why not, if not."""
        problems = await self._admission_problems(registration.name, registration.src)
        if not problems:
            digest = await asyncio.to_thread(adapter_digest, Path(registration.src))
            if digest != registration.sha256:
                problems = [Problem(f"adapter {registration.name!r}", "src", f"files in {registration.src} changed since registration")]
        failure = "; ".join(str(p) for p in problems) or None
        if failure is None:
            assert self._context.engine is not None
            answer = await self._load(registration.name, registration.src, registration.sha256)
            if not answer.ok:
                failure = f"adapter {registration.name!r}: vLLM refused to load it again: {answer.message()}"
        return failure

    # ---------------------------------------------------------------------------- service

    async def _register_locked(self, name: str, src: str) -> tuple[str, int, Any]:
        context = self._context
        existing = context.store.get(name)
        if existing is not None and Path(src).is_dir():
            digest = await asyncio.to_thread(adapter_digest, Path(src))
            if digest == existing.sha256:
                return "unchanged", 200, None
            return "conflict", 409, Refusal(
                409, error_kinds.ADAPTER_CONFLICT,
                f"adapter {name!r} is already registered with different files (sha256 {existing.sha256[:12]}…, "
                f"these are {digest[:12]}…); unregister it first, or register the new files under a new "
                "versioned name",
                adapter=name,
            )
        problems = await self._admission_problems(name, src)
        if problems:
            return "rejected", 422, Refusal(
                422, error_kinds.ADAPTER_REJECTED,
                f"adapter {name!r} cannot be served by this endpoint: " + "; ".join(p.message for p in problems),
                adapter=name,
                problems=[{"subject": p.subject, "field": p.field, "message": p.message, "rule": p.rule} for p in problems],
            )
        if existing is not None:  # registered, but its old files are gone: the name is still taken
            return "conflict", 409, Refusal(
                409, error_kinds.ADAPTER_CONFLICT, f"adapter {name!r} is already registered from {existing.src}", adapter=name
            )
        digest = await asyncio.to_thread(adapter_digest, Path(src))
        assert context.engine is not None
        answer = await self._load(name, src, digest)
        if not answer.ok:
            if await context.engine.healthy():  # the engine is fine: these files are what it cannot load
                return "engine_error", 422, Refusal(
                    422, error_kinds.ADAPTER_LOAD_FAILED,
                    f"vLLM could not load adapter {name!r} from {src}: {answer.message()}; the files passed the "
                    "checks but are damaged or incomplete: re-create the archive from the PEFT output",
                    adapter=name,
                )
            return "engine_error", 503, Refusal(
                503, error_kinds.ENGINE_ERROR, f"vLLM did not load adapter {name!r} and is unhealthy: {answer.message()}",
                adapter=name,
            )
        try:
            await asyncio.to_thread(context.store.add, name, src, digest)
        except OSError as error:
            await context.engine.unload(name)
            return "engine_error", 500, Refusal(
                500, error_kinds.STATE_ERROR, f"adapter {name!r} was not registered: cannot persist it ({error})", adapter=name
            )
        context.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(context.store.all()))
        return "registered", 200, None

    async def _unregister_locked(self, name: str) -> tuple[str, Refusal | None]:
        """Forget the record first: if that cannot be persisted, nothing changed and the adapter still serves.

        Requests in flight keep their adapter to the end (vLLM's unload only forgets the name);
        new requests get 404 from the moment the record is gone.
        """
        context = self._context
        existing = context.store.get(name)
        assert existing is not None and context.engine is not None
        try:
            await asyncio.to_thread(context.store.remove, name)
        except OSError as error:
            return "engine_error", Refusal(
                500, error_kinds.STATE_ERROR, f"adapter {name!r} was not unregistered: cannot persist it ({error})", adapter=name
            )
        answer = await context.engine.unload(name)
        if not answer.ok and answer.status != 404:  # 404: vLLM had already lost it; forgetting is right
            await asyncio.to_thread(context.store.add, name, existing.src, existing.sha256)
            return "engine_error", Refusal(
                502, error_kinds.ENGINE_ERROR, f"vLLM did not unload adapter {name!r}: {answer.message()}", adapter=name
            )
        context.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(context.store.all()))
        return "unregistered", None

    async def _admission_problems(self, name: str, src: str) -> list[Problem]:
        context = self._context
        assert context.base is not None
        problem = src_problem(name, src)
        if problem is not None:
            return [problem]
        return await asyncio.to_thread(
            check_adapter_dir,
            name,
            Path(src),
            context.reference,
        )

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
        assert self._context.engine is not None
        return await self._context.engine.load(name, str(link))


def registration_request(scope: Scope, body: bytes) -> tuple[str, str]:
    """``name`` and ``src`` from a JSON body or, as SageMaker may send them, the query string."""
    fields: dict[str, Any] = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    if body.strip():
        document = json_object(body)
        if document is None:
            observability.REGISTRATIONS.labels("bad_request").inc()
            raise Refusal(400, error_kinds.BAD_REQUEST, "POST /adapters needs a JSON object body or query parameters name and src")
        fields.update(document)
    missing = [key for key in ("name", "src") if not isinstance(fields.get(key), str) or not fields[key].strip()]
    if missing:
        observability.REGISTRATIONS.labels("bad_request").inc()
        raise Refusal(
            400, error_kinds.BAD_REQUEST,
            "POST /adapters is missing " + " and ".join(missing) + " (send them as a JSON body or as query parameters)",
        )
    return fields["name"].strip(), fields["src"].strip()


def src_problem(name: str, src: str) -> Problem | None:
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
