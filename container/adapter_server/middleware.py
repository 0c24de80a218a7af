"""The ASGI middleware that makes stock vLLM speak SageMaker's adapter contract safely.

Installed with ``--middleware adapter_server.middleware.SageMakerAdapterMiddleware``; vLLM calls
``app.add_middleware(SageMakerAdapterMiddleware)``, so every request passes through it before
vLLM's own routes. It only dispatches; each job lives in its own module:

* `startup`: configure from vLLM's arguments, replay persisted registrations; `readiness` holds
  requests, and answers ``/ping`` 503, until they are all back, so SageMaker never routes to a
  server that silently lost adapters.
* `registration`: ``POST /adapters`` (gate, idempotency by content digest, persistence),
  ``DELETE /adapters/{name}`` and ``GET /adapters``. vLLM's own adapter routes are closed.
* every other route is closed (404), WebSockets too: the route table is an allow list.
* `invocation`: ``/invocations`` and the OpenAI generation routes: no adapter means no answer
  unless base-model access is enabled, an unknown adapter is a 404 naming it,
  ``CustomAttributes: route=/v1/...`` is honoured (`invocation_request`), streams work, and each
  request gets one JSON log line and per-adapter Prometheus metrics.
* `refusal_pacing`: a tenant's refusals past a burst leave at a bounded rate, so a client looping
  on a refused request cannot keep the event loop busy for the others.
"""

from __future__ import annotations

from urllib.parse import unquote

from adapter_server import sagemaker_contract
from adapter_server.asgi_io import Receive, Refusal, Send, detached, refuse_oversized_headers, send_error
from adapter_server.asgi_types import ASGIApp, Message, Scope
from adapter_server.invocation import InvocationHandler
from adapter_server.origin_guard import refuse_browser_requests
from adapter_server.readiness import Readiness
from adapter_server.registration_service import RegistrationService
from adapter_server.serving_context import ServingContext
from adapter_server.startup import ServerStartup
from cdk_adapters.contract import error_kinds

GENERATION_PATHS = sagemaker_contract.GUARDED_GENERATION_PATHS


class SageMakerAdapterMiddleware:
    """Pure ASGI middleware; one instance per vLLM API server process."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.context = ServingContext()
        self.readiness = Readiness()
        self.registrations = RegistrationService(context=self.context, readiness=self.readiness)
        self.invocations = InvocationHandler(app, context=self.context, readiness=self.readiness)
        self.startup = ServerStartup(app, context=self.context, readiness=self.readiness, registrations=self.registrations)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._watch_lifespan(scope, send))
            return
        if scope["type"] == "websocket":
            await refuse_websocket(receive, send)
            return
        if scope["type"] != "http":
            return
        self.startup.begin(scope)
        path, method = scope["path"], scope["method"]
        refused: Refusal | None = None
        try:
            refuse_oversized_headers(scope)
            refuse_browser_requests(scope)
            if path == sagemaker_contract.ADAPTERS_PATH and method == "POST":
                await self.registrations.register(scope, receive, send)
            elif path == sagemaker_contract.ADAPTERS_PATH and method == "GET":
                await self.registrations.list_adapters(send)
            elif path.startswith(sagemaker_contract.ADAPTERS_PATH + "/") and method == "DELETE":
                await self.registrations.unregister(unquote(path[len(sagemaker_contract.ADAPTERS_PATH) + 1 :]), send)
            elif path in sagemaker_contract.VLLM_ADAPTER_ADMIN_PATHS:
                raise Refusal(
                    403,
                    error_kinds.FORBIDDEN,
                    f"{path} is closed: register adapters with POST /adapters, "
                    "which validates them first, and remove them with DELETE /adapters/{name}",
                )
            elif path in sagemaker_contract.HEALTH_PATHS:
                self.readiness.refuse_unless_healthy()
                await self.app(scope, receive, send)
            elif method == "POST" and (path == sagemaker_contract.INVOCATIONS_PATH or path in GENERATION_PATHS):
                await self.invocations(scope, receive, send)
            elif (method, path) in sagemaker_contract.PASSTHROUGH_ROUTES or (
                (method, path) in sagemaker_contract.LOCAL_ONLY_ROUTES and self.context.settings.body_names_adapter
            ):
                await self.app(scope, receive, send)
            else:
                raise Refusal(
                    404,
                    error_kinds.ROUTE_NOT_FOUND,
                    f"{method} {path} is not served by this container: it answers "
                    "/invocations, /ping and /adapters (and /v1/completions, /v1/chat/completions, /metrics)",
                )
        except Refusal as refusal:
            refused = detached(refusal)
        if refused is not None:
            await self.context.refusal_pacing.pace(_pacing_key(path), refused.status)
            await send_error(send, refused)

    def _watch_lifespan(self, scope: Scope, send: Send) -> Send:
        """Start the replay as soon as vLLM's own start-up is complete."""

        async def watching_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.startup.begin(scope)
            await send(message)

        return watching_send


def _pacing_key(path: str) -> str:
    """Refusals outside an invocation share one pace per door: registrations, and everything else
    (keys no adapter name can take: names have no underscore)."""
    return "__registrations__" if path.startswith(sagemaker_contract.ADAPTERS_PATH) else "__routes__"


async def refuse_websocket(receive: Receive, send: Send) -> None:
    """Close a WebSocket before accepting it (the server answers 403): SageMaker never opens one,
    and vLLM's realtime route would generate past the adapter rule."""
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": 1008})
