"""How an inference request is rewritten before vLLM sees it, kept apart from the HTTP flow.

``CustomAttributes: route=/v1/...`` picks the OpenAI route behind ``/invocations``; the adapter is
written into the body's ``model``; a stream asks for the usage chunk (for the request log) even when
the caller did not, and `ForwardedBody.strip_usage` says to drop it again on the way back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adapter_server import sagemaker_contract
from adapter_server.asgi_io import Receive, Refusal
from adapter_server.engine_routes import Message, Scope
from cdk_adapters.contract import error_kinds


def target_route(path: str, headers: list[tuple[bytes, bytes]]) -> str:
    """The route vLLM should answer: `path` itself, or for ``/invocations`` the allowed ``route=``."""
    if path != sagemaker_contract.INVOCATIONS_PATH:
        return path
    attributes = sagemaker_contract.custom_attributes(
        sagemaker_contract.header(headers, sagemaker_contract.CUSTOM_ATTRIBUTES_HEADER)
    )
    route = attributes.get(sagemaker_contract.ROUTE_ATTRIBUTE)
    if route is None:
        return path
    if route not in sagemaker_contract.ROUTABLE_PATHS:
        raise Refusal(
            400, error_kinds.BAD_ROUTE,
            f"CustomAttributes route={route!r} is not allowed; use one of "
            + ", ".join(sorted(sagemaker_contract.ROUTABLE_PATHS)),
        )
    return route


def adapter_named_in_body(document: dict | None, target: str, served_model_names: frozenset[str]) -> str | None:
    """On the OpenAI routes the body's ``model`` names the adapter, unless it names the base model."""
    if target == sagemaker_contract.INVOCATIONS_PATH or document is None:
        return None
    model = document.get("model")
    if isinstance(model, str) and model and model not in served_model_names:
        return model
    return None


@dataclass(frozen=True)
class ForwardedBody:
    """The body vLLM gets, and what it says about the answer to expect."""

    body: bytes
    stream: bool = False
    strip_usage: bool = False
    """The usage chunk was asked for on the caller's behalf: the caller must not see it."""


def forwarded_body(body: bytes, document: dict | None, adapter: str | None, target: str) -> ForwardedBody:
    """`body` unchanged when it is not a JSON object; else `document` with the adapter and usage asked for."""
    if document is None:
        return ForwardedBody(body)
    if adapter is not None:
        document["model"] = adapter
    stream = bool(document.get("stream"))
    strip_usage = False
    usage_on_request = target == sagemaker_contract.INVOCATIONS_PATH or target in sagemaker_contract.ROUTABLE_PATHS
    if stream and usage_on_request:  # OpenAI completions/chat know stream_options
        options = document.get("stream_options") if isinstance(document.get("stream_options"), dict) else {}
        strip_usage = not options.get("include_usage")
        document["stream_options"] = {**options, "include_usage": True}
    return ForwardedBody(json.dumps(document).encode(), stream, strip_usage)


def forwarded_scope(scope: Scope, body: bytes, target: str) -> Scope:
    """`scope` with the new body's length and, when ``route=`` moved it, the target path."""
    forward_scope = dict(scope)
    forward_scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"] + [
        (b"content-length", str(len(body)).encode())
    ]
    if target != scope["path"]:
        forward_scope["path"] = target
        forward_scope["raw_path"] = target.encode()
    return forward_scope


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the (possibly rewritten) body over once, then the real stream (disconnects)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
