"""Start-up: configure the server from vLLM's own arguments, then replay persisted registrations.

It runs once, as a task, right after vLLM's own ASGI start-up (or on the first request, if that
comes first). SageMaker is not known to register adapters again after the process restarts in
place, so every registration persisted before is loaded again, and only if its files are unchanged.
`Readiness` holds requests until this is over; every failure is reported through it (``/ping``
503), never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from adapter_server import observability
from adapter_server.admission import FairAdmission
from adapter_server.asgi_types import ASGIApp, Scope
from adapter_server.capture_log import capture_log_for
from adapter_server.engine_routes import EngineRoutes
from adapter_server.readiness import Readiness
from adapter_server.registration_service import RegistrationService
from adapter_server.registrations import RegistrationStore, StateFileError
from adapter_server.serving_context import ServingContext
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import serving_env
from cdk_adapters.gate import BaseModelFacts

logger = logging.getLogger("adapter_server")


class ServerStartup:
    """Fills in `context` and restores the registrations through `registrations`, once."""

    def __init__(
        self, app: ASGIApp, *, context: ServingContext, readiness: Readiness, registrations: RegistrationService
    ) -> None:
        self._app = app
        self._context = context
        self._readiness = readiness
        self._registrations = registrations
        self._task: asyncio.Task[None] | None = None

    def begin(self, scope: Scope) -> None:
        """Start the start-up task, unless it has started already; `scope` names vLLM's application."""
        if self._task is not None:
            return
        self._readiness.open()
        self._task = asyncio.get_running_loop().create_task(self._run(scope["app"], scope.get("state")))

    async def _run(self, starlette_app: Any, lifespan_state: dict[str, Any] | None) -> None:
        readiness = self._readiness
        try:
            await self._configure(starlette_app, lifespan_state)
            await self._replay()
        except Exception as error:  # the failure is reported by /ping, never swallowed
            readiness.failure = readiness.failure or f"start-up failed: {error!r}"
            logger.exception("cdk-adapters start-up failed")
        finally:
            if readiness.failure:
                observability.emit(observability.REPLAY_EVENT, status="failed", error=readiness.failure)
            readiness.settle()

    async def _configure(self, starlette_app: Any, lifespan_state: dict[str, Any] | None) -> None:
        context = self._context
        settings, problems = ServingSettings.from_environ()
        if problems:
            self._readiness.failure = "; ".join(str(p) for p in problems)
            return
        context.settings = settings
        if settings.capture.enabled:
            context.capture_log = capture_log_for(settings.capture_log_group_arn)
        args = starlette_app.state.args
        context.engine = EngineRoutes(self._app, starlette_app, lifespan_state)
        context.max_lora_rank = int(args.max_lora_rank)
        context.tower_connector_lora = bool(getattr(args, "enable_tower_connector_lora", False))
        names = list(args.served_model_name or [args.model])
        context.served_model_names = frozenset(names)
        context.base_model_name = names[0]
        context.residency = observability.ResidencyTracker(int(args.max_loras))
        limits = settings.tenant_limits
        if limits.fair_share:
            capacity = limits.engine_in_flight or _engine_batch_size(starlette_app)
            context.admission = FairAdmission(
                capacity, limits.for_adapter, headroom=limits.headroom_for(capacity), presence_s=limits.headroom_presence_s
            )
        context.base = await asyncio.to_thread(
            BaseModelFacts.from_model_dir,
            args.model,
            model_id=settings.base_model_id,
            revision=settings.base_model_revision,
        )
        try:
            context.store = await asyncio.to_thread(RegistrationStore.load, settings.state_dir)
        except StateFileError as error:
            self._readiness.failure = str(error)
            return
        if settings.state_dir is None:
            logger.warning(
                "%s is not set: adapter registrations live in memory only and are lost if the server restarts",
                serving_env.STATE_DIR,
            )

    async def _replay(self) -> None:
        """Load every persisted registration again, in the order they were made."""
        readiness = self._readiness
        if readiness.failure:
            return
        registrations = self._context.store.all()
        readiness.pending_replay = len(registrations)
        failures: list[str] = []
        for registration in registrations:
            started = time.monotonic()
            failure = await self._registrations.restore(registration)
            if failure is not None:
                failures.append(failure)
            readiness.pending_replay -= 1
            observability.emit(
                observability.REPLAY_EVENT,
                adapter=registration.name,
                status="failed" if failure else "loaded",
                error=failure,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )
        observability.REGISTERED_ADAPTERS.set(len(registrations) - len(failures))
        if failures:
            readiness.failure = "persisted adapters could not be restored: " + "; ".join(failures)


def _engine_batch_size(starlette_app: Any) -> int:
    """vLLM's running-batch size (``--max-num-seqs`` as the engine resolved it): more requests than
    this would only wait in vLLM's own first-come, first-served queue."""
    config = getattr(starlette_app.state, "vllm_config", None)
    resolved = getattr(getattr(config, "scheduler_config", None), "max_num_seqs", None)
    return int(resolved or starlette_app.state.args.max_num_seqs or 256)
