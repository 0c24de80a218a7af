"""The registration service: ``POST /adapters``, ``DELETE /adapters/{name}`` and ``GET /adapters``.

An adapter passes the shared compatibility gate before vLLM sees it, and vLLM loads a private,
read-only copy of the admitted files (`registrations.copy_admitted`, kept by `served_copies`),
never ``src``: files changed there afterwards cannot change what is served. Every name SageMaker
may send (the registration's ``name``, the ``X-Amzn-SageMaker-Adapter-Alias`` header) is reduced to
one adapter key (`adapter_identity`), the name the registration, vLLM and every per-adapter feature
use.
Registration is idempotent by content digest (same name and files: 200; other files: 409) and
persisted in the `registrations.RegistrationStore`, from which start-up `restore`s each one after a
restart in place.

The gate and the copy (which reads every byte) run under a lock per adapter, so a slow or large
registration never holds up another adapter's; only the commit (vLLM's load and the persisted
record) takes the one lock that keeps vLLM and the record in step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from adapter_server import observability, sagemaker_contract
from adapter_server.asgi_io import Receive, Refusal, Send, json_object, read_body, send_json, send_text
from adapter_server.asgi_types import Scope
from adapter_server.readiness import Readiness
from adapter_server.registrations import Registration, remove_copy, stat_fingerprint
from adapter_server.served_copies import ServedCopies
from adapter_server.serving_context import ServingContext
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_MAX_LENGTH, validate_component_name
from cdk_adapters.gate import check_adapter_dir
from cdk_adapters.problems import Problem


class RegistrationService:
    """Admits, loads, unloads and lists adapters, keeping vLLM and the persisted record in step."""

    def __init__(self, *, context: ServingContext, readiness: Readiness) -> None:
        self._context = context
        self._readiness = readiness
        self._lock = asyncio.Lock()
        """Held while vLLM and the persisted record change (the commit of a registration or removal)."""
        self._adapter_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        """One lock per adapter key (and how many hold or wait for it): one adapter's registration
        and removal never interleave, other adapters' go on beside them."""
        self._copies = ServedCopies(context)
        """The private copies vLLM loads (never ``src``)."""

    # ------------------------------------------------------------------------------ HTTP

    async def register(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(scope, receive)
        name, src = registration_request(scope, body)
        alias = sagemaker_contract.header(scope["headers"], sagemaker_contract.ADAPTER_ALIAS_HEADER) or None
        await self._readiness.wait()
        assert self._context.engine is not None
        refuse_untyped_local_body(scope, body, local=self._context.settings.body_names_adapter)
        # An alias that is no component name (SageMaker's aliases are unconfirmed) is only echoed.
        key, known_as = self._keys(name, alias if alias is not None and not validate_component_name(alias, "") else None)
        started = time.monotonic()
        async with self._adapter_lock(key):
            outcome, status, detail = await self._register_adapter(key, known_as, src)
        observability.REGISTRATIONS.labels(outcome).inc()
        observability.emit(
            observability.REGISTRATION_EVENT,
            action="register",
            adapter=key,
            outcome=outcome,
            status=status,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            error=None if status == 200 else detail.message,
        )
        if status != 200:
            raise detail
        suffix = "" if outcome == "registered" else " (already registered with the same files)"
        await send_text(send, 200, f"Adapter {alias or name} registered{suffix}")

    async def unregister(self, name: str, send: Send) -> None:
        await self._readiness.wait()
        assert self._context.engine is not None
        started = time.monotonic()
        given = self._context.settings.adapter_key(name)
        async with self._adapter_lock(given):
            key = self._context.store.resolve(given)
            refusal: Refusal | None
            async with self._lock:
                if key is None:
                    outcome, refusal = "unknown", unknown_adapter(name)
                else:
                    outcome, refusal = await self._unregister_locked(key)
        observability.emit(
            observability.REGISTRATION_EVENT,
            action="unregister",
            adapter=key or given,
            outcome=outcome,
            status=200 if refusal is None else refusal.status,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            error=None if refusal is None else refusal.message,
        )
        if refusal is not None:
            raise refusal
        await send_text(send, 200, f"Adapter {name} unregistered")

    def _keys(self, name: str, alias: str | None) -> tuple[str, tuple[str, ...]]:
        """The adapter key a registration is kept under, and the other keys that also name it.

        Whichever of `name` and `alias` is a component name of this endpoint decides (the name
        first): that is the identity the construct rendered limits and capture under. SageMaker's
        real choice is unconfirmed, so both resolve to the registration either way.
        """
        settings = self._context.settings
        given = [name] if alias is None else [name, alias]
        keys = [settings.adapter_key(value) for value in given]
        ours = [key for value, key in zip(given, keys) if key != value.lower()]
        key = ours[0] if ours else keys[0]
        return key, tuple(dict.fromkeys(k for k in keys if k != key))

    @asynccontextmanager
    async def _adapter_lock(self, key: str) -> AsyncIterator[None]:
        lock, holders = self._adapter_locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._adapter_locks[key] = (lock, holders + 1)
        try:
            async with lock:
                yield
        finally:
            lock, holders = self._adapter_locks[key]
            if holders == 1:
                del self._adapter_locks[key]
            else:
                self._adapter_locks[key] = (lock, holders - 1)

    async def list_adapters(self, send: Send) -> None:
        await self._readiness.wait()
        document = {
            "adapters": [
                {"name": r.name, "src": r.src, "sha256": r.sha256, **({"known_as": list(r.known_as)} if r.known_as else {})}
                for r in self._context.store.all()
            ]
        }
        await send_json(send, 200, document)

    # --------------------------------------------------------------------------- start-up

    async def restore(self, registration: Registration) -> str | None:
        """Load a persisted registration again; why not, if it cannot be.

        vLLM loads the private copy made at registration (the gate reads its configs and weight
        headers again; its bytes are ours and read-only, so they are not hashed again). Without
        that copy (a state file from before copies, or a wiped copy), ``src`` must still hold the
        recorded files: it is gated, copied and hashed again.
        """
        served = Path(registration.served_from) if registration.served_from else None
        if served is not None and served.is_dir():
            problems = await self._admission_problems(registration.name, str(served))
        else:
            problems = await self._admission_problems(registration.name, registration.src)
            if not problems:
                copied = await self._copies.copy(registration.name, registration.src)
                if copied is None or copied[0] != registration.sha256:
                    if copied is not None:
                        await asyncio.to_thread(remove_copy, copied[2])
                    problems = [
                        Problem(
                            f"adapter {registration.name!r}", "src", f"files in {registration.src} changed since registration"
                        )
                    ]
                else:
                    served = copied[2]
                    await asyncio.to_thread(
                        self._context.store.add,
                        registration.name,
                        registration.src,
                        registration.sha256,
                        copied[1],
                        known_as=registration.known_as,
                        served_from=str(served),
                    )
        failure = "; ".join(str(p) for p in problems) or None
        if failure is None:
            assert self._context.engine is not None and served is not None
            answer = await self._context.engine.load(registration.name, str(served))
            if not answer.ok:
                failure = f"adapter {registration.name!r}: vLLM refused to load it again: {answer.message()}"
        return failure

    # ---------------------------------------------------------------------------- service

    async def _register_adapter(self, key: str, known_as: tuple[str, ...], src: str) -> tuple[str, int, Any]:
        """Gate ``src``, copy and hash it, gate the copy, then commit (under the one lock).

        The copy is gated again because ``src`` may change between the first look and the copy;
        what is committed is what the gate passed and vLLM loads.
        """
        context = self._context
        owner = context.store.resolve(key)
        if owner is not None and owner != key:
            return (
                "conflict",
                409,
                Refusal(
                    409,
                    error_kinds.ADAPTER_CONFLICT,
                    f"adapter {key!r} already names the registered adapter {owner!r}; unregister it first",
                    adapter=key,
                ),
            )
        existing = context.store.get(key)
        problems = await self._admission_problems(key, src)
        if problems:
            return "rejected", 422, _rejected(key, problems)
        retried = existing is not None and existing.src == src and existing.fingerprint is not None
        # A retry of the same registration (files untouched since) reads no bytes again.
        if retried and existing is not None and await asyncio.to_thread(stat_fingerprint, Path(src)) == existing.fingerprint:
            return "unchanged", 200, None
        copied = await self._copies.copy(key, src)
        if copied is None:  # links or unreadable files appeared after the gate looked
            return (
                "rejected",
                422,
                Refusal(
                    422,
                    error_kinds.ADAPTER_REJECTED,
                    f"adapter {key!r} cannot be served by this endpoint: {src} changed while it was checked "
                    "(it now holds symbolic links or files that cannot be read); extract the archive again and retry",
                    adapter=key,
                ),
            )
        digest, fingerprint, served = copied
        if existing is not None:
            if str(served) != existing.served_from:  # never the copy vLLM serves from
                await asyncio.to_thread(remove_copy, served)
            if digest == existing.sha256:
                return "unchanged", 200, None
            return (
                "conflict",
                409,
                Refusal(
                    409,
                    error_kinds.ADAPTER_CONFLICT,
                    f"adapter {key!r} is already registered with different files (sha256 {existing.sha256[:12]}…, "
                    f"these are {digest[:12]}…); unregister it first, or register the new files under a new "
                    "versioned name",
                    adapter=key,
                ),
            )
        problems = await self._admission_problems(key, str(served))
        if problems:
            await asyncio.to_thread(remove_copy, served)
            return "rejected", 422, _rejected(key, problems)
        async with self._lock:
            return await self._commit(key, known_as, src, digest, fingerprint, served)

    async def _commit(
        self, key: str, known_as: tuple[str, ...], src: str, digest: str, fingerprint: str | None, served: Path
    ) -> tuple[str, int, Any]:
        context = self._context
        assert context.engine is not None
        answer = await context.engine.load(key, str(served))
        if not answer.ok:
            await asyncio.to_thread(remove_copy, served)
            if await context.engine.healthy():  # the engine is fine: these files are what it cannot load
                return (
                    "engine_error",
                    422,
                    Refusal(
                        422,
                        error_kinds.ADAPTER_LOAD_FAILED,
                        f"vLLM could not load adapter {key!r} from {src}: {answer.message()}; the files passed the "
                        "checks but are damaged or incomplete: re-create the archive from the PEFT output",
                        adapter=key,
                    ),
                )
            return (
                "engine_error",
                503,
                Refusal(
                    503,
                    error_kinds.ENGINE_ERROR,
                    f"vLLM did not load adapter {key!r} and is unhealthy: {answer.message()}",
                    adapter=key,
                ),
            )
        try:
            await asyncio.to_thread(context.store.add, key, src, digest, fingerprint, known_as=known_as, served_from=str(served))
        except OSError as error:
            await context.engine.unload(key)
            await asyncio.to_thread(remove_copy, served)
            return (
                "engine_error",
                500,
                Refusal(
                    500, error_kinds.STATE_ERROR, f"adapter {key!r} was not registered: cannot persist it ({error})", adapter=key
                ),
            )
        context.residency.forget(key)
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
            await asyncio.to_thread(
                context.store.add,
                name,
                existing.src,
                existing.sha256,
                existing.fingerprint,
                known_as=existing.known_as,
                served_from=existing.served_from,
            )
            return "engine_error", Refusal(
                502, error_kinds.ENGINE_ERROR, f"vLLM did not unload adapter {name!r}: {answer.message()}", adapter=name
            )
        context.residency.forget(name)
        observability.REGISTERED_ADAPTERS.set(len(context.store))
        if existing.served_from:  # requests in flight hold vLLM's loaded copy, not these files
            await asyncio.to_thread(remove_copy, Path(existing.served_from))
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


def _rejected(key: str, problems: list[Problem]) -> Refusal:
    return Refusal(
        422,
        error_kinds.ADAPTER_REJECTED,
        f"adapter {key!r} cannot be served by this endpoint: " + "; ".join(p.message for p in problems),
        adapter=key,
        problems=[{"subject": p.subject, "field": p.field, "message": p.message, "rule": p.rule} for p in problems],
    )


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
                400,
                error_kinds.BAD_REQUEST,
                "POST /adapters is missing " + " and ".join(missing) + " (send them as a JSON body or as query parameters)",
            )
        not_text = [key for key in ("name", "src") if not isinstance(fields[key], str)]
        if not_text:
            raise Refusal(
                400,
                error_kinds.BAD_REQUEST,
                "POST /adapters: "
                + " and ".join(f"{key} must be a string, not {type(fields[key]).__name__}" for key in not_text),
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
                    400,
                    error_kinds.BAD_REQUEST,
                    f"POST /adapters gives {key} in the query string ({query[key][:80]!r}) and in the body "
                    f"({str(document[key])[:80]!r}); send it once",
                )
        fields.update(document)
    return fields


def refuse_untyped_local_body(scope: Scope, body: bytes, *, local: bool) -> None:
    """Local runs (``cdk-adapters local``) take a registration body as ``application/json`` only, so
    no web page's form or ``text/plain`` POST registers an adapter there (pages also send
    ``Origin``, refused for every server: `origin_guard`). SageMaker's own requests are not
    known to be typed, so an endpoint's container takes either."""
    if not local or not body.strip():
        return
    content_type = (sagemaker_contract.header(scope["headers"], "content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise Refusal(
            403,
            error_kinds.CROSS_ORIGIN_REFUSED,
            f"POST /adapters takes a JSON body (Content-Type: application/json) in a local run, not "
            f"{content_type or 'an untyped body'}; or send name and src as query parameters with no body",
        )


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
        400,
        error_kinds.INVALID_NAME,
        f"{problems[0].subject}: name "
        + "; ".join(p.message for p in problems)
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
        return Problem(
            subject, "src", f"{src[:200]!r} must be an absolute path (SageMaker passes where it extracted the archive)"
        )
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
            subject,
            "src",
            f"{src} is a file, not a directory: pass the directory the adapter archive was extracted into, "
            "with adapter_config.json at its top",
        )
    return None
