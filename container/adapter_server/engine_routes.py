"""Calling vLLM's own adapter routes from inside the process, through the ASGI app.

The middleware loads and unloads adapters with vLLM's documented HTTP API
(``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter``) rather than its Python internals, but
without a network hop: it sends an ASGI request straight to the application below it. Those
routes are closed to outside callers (see `sagemaker_contract.VLLM_ADAPTER_ADMIN_PATHS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapter_server.asgi_types import ASGIApp, Message, Scope

LOAD_PATH = "/v1/load_lora_adapter"
UNLOAD_PATH = "/v1/unload_lora_adapter"
HEALTH_PATH = "/health"


@dataclass(frozen=True)
class EngineAnswer:
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        """vLLM's error message when the body is its ErrorResponse JSON, else the body text."""
        text = self.body.decode("utf-8", "replace")
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            return text.strip()
        if isinstance(document, dict):
            error = document.get("error")
            if isinstance(error, dict) and error.get("message"):
                return str(error["message"])
            if document.get("detail"):
                return str(document["detail"])
        return text.strip()


class EngineRoutes:
    """Loads and unloads adapters through the ASGI application `app` (vLLM below our middleware)."""

    def __init__(self, app: ASGIApp, starlette_app: Any, lifespan_state: dict[str, Any] | None = None) -> None:
        self._app = app
        self._starlette_app = starlette_app
        self._state = lifespan_state

    async def load(self, name: str, path: str) -> EngineAnswer:
        return await self._post(LOAD_PATH, {"lora_name": name, "lora_path": path})

    async def unload(self, name: str) -> EngineAnswer:
        return await self._post(UNLOAD_PATH, {"lora_name": name})

    async def healthy(self) -> bool:
        """vLLM's own ``/health``: 200 while its engine is alive."""
        return (await self._call("GET", HEALTH_PATH, b"")).ok

    async def _post(self, path: str, document: dict[str, Any]) -> EngineAnswer:
        return await self._call("POST", path, json.dumps(document).encode())

    async def _call(self, method: str, path: str, body: bytes) -> EngineAnswer:
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
            "app": self._starlette_app,
        }
        if self._state is not None:
            scope["state"] = dict(self._state)
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        status = 500
        chunks: list[bytes] = []

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self._app(scope, receive, send)
        return EngineAnswer(status=status, body=b"".join(chunks))
