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
from adapter_server.registrations import DigestRefused, Registration, content_digest
from adapter_server.serving_context import ServingContext
from cdk_adapters.gate import check_adapter_dir
from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_MAX_LENGTH, validate_component_name
from cdk_adapters.contract import error_kinds
from cdk_adapters.problems import Problem


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
                outcome, refusal = "unknown", unknown_adapter(name)
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
        """Load a persisted registration again, checking that its files are unchanged; why not, if not.

        The gate reads configs and weight headers again; the weights' bytes are hashed again only
        when the files' stat fingerprint is not the recorded one (`registrations.content_digest`).
        """
        problems = await self._admission_problems(registration.name, registration.src)
        if not problems:
            digest, _ = await self._digest(registration.src, registration)
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
        """The gate first (it reads little), then the digest (it reads every byte) for idempotency."""
        context = self._context
        existing = context.store.get(name)
        problems = await self._admission_problems(name, src)
        if problems:
            return "rejected", 422, Refusal(
                422, error_kinds.ADAPTER_REJECTED,
                f"adapter {name!r} cannot be served by this endpoint: " + "; ".join(p.message for p in problems),
                adapter=name,
                problems=[{"subject": p.subject, "field": p.field, "message": p.message, "rule": p.rule} for p in problems],
            )
        # A retry of the same registration (same name and src, files untouched) reads no bytes again.
        digest, fingerprint = await self._digest(src, existing if existing is not None and existing.src == src else None)
        if digest is None:  # links or unreadable files appeared after the gate looked
            return "rejected", 422, Refusal(
                422, error_kinds.ADAPTER_REJECTED,
                f"adapter {name!r} cannot be served by this endpoint: {src} changed while it was checked "
                "(it now holds symbolic links or files that cannot be read); extract the archive again and retry",
                adapter=name,
            )
        if existing is not None:
            if digest == existing.sha256:
                return "unchanged", 200, None
            return "conflict", 409, Refusal(
                409, error_kinds.ADAPTER_CONFLICT,
                f"adapter {name!r} is already registered with different files (sha256 {existing.sha256[:12]}…, "
                f"these are {digest[:12]}…); unregister it first, or register the new files under a new "
                "versioned name",
                adapter=name,
            )
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
            await asyncio.to_thread(context.store.add, name, src, digest, fingerprint)
        except OSError as error:
            await context.engine.unload(name)
            return "engine_error", 500, Refusal(
                500, error_kinds.STATE_ERROR, f"adapter {name!r} was not registered: cannot persist it ({error})", adapter=name
            )
        context.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(context.store))
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
            await asyncio.to_thread(context.store.add, name, existing.src, existing.sha256, existing.fingerprint)
            return "engine_error", Refusal(
                502, error_kinds.ENGINE_ERROR, f"vLLM did not unload adapter {name!r}: {answer.message()}", adapter=name
            )
        context.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(context.store))
        return "unregistered", None

    async def _admission_problems(self, name: str, src: str) -> list[Problem]:
        context = self._context
        assert context.base is not None
        problem = src_problem(name, src)
        if problem is not None:
            return [problem]
        try:
            return await asyncio.to_thread(check_adapter_dir, name, Path(src), context.reference)
        except OSError as error:  # unreadable files, or a directory changing while it is read
            return [Problem(f"adapter {name!r}", "src", f"{src} cannot be read: {error.strerror or error}")]

    async def _digest(self, src: str, recorded: Registration | None = None) -> tuple[str | None, str | None]:
        """(`content_digest`) of `src`, or (None, None) when it holds links or cannot be read (the
        gate says why); `recorded` spares reading unchanged files again."""
        try:
            return await asyncio.to_thread(content_digest, Path(src), recorded)
        except (DigestRefused, OSError):
            return None, None

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
    """``name`` and ``src`` from a JSON body or, as SageMaker may send them, the query string.

    Both forms at once are fine when they agree. The name must be one SageMaker could have given
    an inference component (`adapter_names.validate_component_name`): it becomes a file name, a metrics
    label and a log field, so nothing else gets that far.
    """
    try:
        fields = _registration_fields(scope, body)
        missing = [key for key in ("name", "src") if fields.get(key) is None or str(fields[key]).strip() == ""]
        if missing:
            raise Refusal(
                400, error_kinds.BAD_REQUEST,
                "POST /adapters is missing " + " and ".join(missing) + " (send them as a JSON body or as query parameters)",
            )
        not_text = [key for key in ("name", "src") if not isinstance(fields[key], str)]
        if not_text:
            raise Refusal(
                400, error_kinds.BAD_REQUEST,
                "POST /adapters: " + " and ".join(f"{key} must be a string, not {type(fields[key]).__name__}" for key in not_text),
            )
        name, src = fields["name"].strip(), fields["src"].strip()
        refusal = invalid_name(name, "nothing was registered")
        if refusal is not None:
            raise refusal
    except Refusal:
        observability.REGISTRATIONS.labels("bad_request").inc()
        raise
    return name, src


def _registration_fields(scope: Scope, body: bytes) -> dict[str, Any]:
    """The query's fields and the body's, refusing a field given twice with different values."""
    query: dict[str, str] = {}
    for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        if key in query and query[key] != value:
            raise Refusal(400, error_kinds.BAD_REQUEST, f"POST /adapters: the query string gives {key} twice, differently")
        query[key] = value
    fields: dict[str, Any] = dict(query)
    if body.strip():
        document = json_object(body, "the POST /adapters body")
        for key in ("name", "src"):
            if key in query and key in document and document[key] != query[key]:
                raise Refusal(
                    400, error_kinds.BAD_REQUEST,
                    f"POST /adapters gives {key} in the query string ({query[key][:80]!r}) and in the body "
                    f"({str(document[key])[:80]!r}); send it once",
                )
        fields.update(document)
    return fields


def shown_name(name: str) -> str:
    """`name` quoted for a message, cut short: a refused name may be thousands of characters."""
    limit = SAGEMAKER_NAME_MAX_LENGTH + 1
    return repr(name) if len(name) <= limit else repr(name[:limit]) + f"… ({len(name)} characters)"


def invalid_name(name: str, consequence: str) -> Refusal | None:
    """400 ``invalid_name`` when `name` is no name SageMaker could give an inference component."""
    problems = validate_component_name(name, f"adapter {shown_name(name)}")
    if not problems:
        return None
    return Refusal(
        400, error_kinds.INVALID_NAME,
        f"{problems[0].subject}: name " + "; ".join(p.message for p in problems)
        + f" (SageMaker's rule for inference component names); {consequence}",
        problems=[{"subject": p.subject, "field": p.field, "message": p.message} for p in problems],
    )


def unknown_adapter(name: str) -> Refusal:
    """404 for a name that could be registered but is not; 400 for one that never could be."""
    return invalid_name(name, "no adapter can have it") or Refusal(
        404, error_kinds.ADAPTER_NOT_FOUND, f"adapter {name!r} is not registered on this endpoint", adapter=name
    )


def src_problem(name: str, src: str) -> Problem | None:
    """``src`` must be the absolute directory SageMaker extracted the adapter archive into."""
    path = Path(src)
    subject = f"adapter {name!r}"
    if not path.is_absolute():
        return Problem(subject, "src", f"{src[:200]!r} must be an absolute path (SageMaker passes where it extracted the archive)")
    if "\0" in src:
        return Problem(subject, "src", f"{src[:200]!r} holds a NUL character, which no path can")
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as error:  # e.g. a name longer than the file system allows
        return Problem(subject, "src", f"{src[:200]!r} cannot be read: {error.strerror or error}")
    if not exists:
        return Problem(subject, "src", f"{src} does not exist: the adapter archive was not extracted there")
    if not is_dir:
        return Problem(
            subject, "src",
            f"{src} is a file, not a directory: pass the directory the adapter archive was extracted into, "
            "with adapter_config.json at its top",
        )
    return None
