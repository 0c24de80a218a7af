"""How an inference request is rewritten before vLLM sees it, kept apart from the HTTP flow.

``CustomAttributes: route=/v1/...`` picks the OpenAI route behind ``/invocations``; the adapter (the
header alone chooses it: `chosen_adapter`) is written into the body's ``model``; a stream asks for
the usage chunk (for the request log) even when the caller did not, and `ForwardedBody.strip_usage`
says to drop it again on the way back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapter_server import sagemaker_contract
from adapter_server.asgi_io import Receive, Refusal
from adapter_server.asgi_types import Message, Scope
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
            400,
            error_kinds.BAD_ROUTE,
            f"CustomAttributes route={route!r} is not allowed; use one of "
            + ", ".join(sorted(sagemaker_contract.ROUTABLE_PATHS)),
        )
    return route


ADAPTER_CHOICE_REFUSED = (
    'the body\'s "model" cannot choose an adapter here: the adapter is the inference component you '
    "invoke (SageMaker names it in the X-Amzn-SageMaker-Adapter-Identifier header when InvokeEndpoint "
    'has InferenceComponentName set to the adapter\'s component); leave "model" out or name the base model'
)
"""One text for every refused choice, so the answer never tells whether the named adapter exists."""


def chosen_adapter(
    header_adapter: str | None, document: dict[str, Any], served_model_names: frozenset[str], *, body_names_adapter: bool
) -> str | None:
    """The adapter that serves the request; ``None`` for the base model.

    The tenant boundary: SageMaker's adapter header decides (and overrides the body), because IAM
    allowed the caller to invoke exactly that component. With no header the caller invoked the base
    component, so the body's ``model`` may name only the base model: a 403 otherwise, whether or not
    the name is registered. `body_names_adapter` (local runs only) restores the OpenAI convention.
    """
    if header_adapter:
        return header_adapter
    model = document.get("model")
    if model is None or (isinstance(model, str) and (model == "" or model in served_model_names)):
        return None
    if body_names_adapter and isinstance(model, str):
        return model
    raise Refusal(403, error_kinds.ADAPTER_CHOICE_REFUSED, ADAPTER_CHOICE_REFUSED)


def refuse_remote_media(document: dict[str, Any]) -> None:
    """400 for a chat part whose media is a URL to fetch (``image_url``, ``video_url``, ...).

    Media must travel inside the request as ``data:`` URLs: a URL would make the container fetch
    from wherever the caller points it, from inside the endpoint's network.
    """
    messages = document.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            for key, value in part.items() if isinstance(part, dict) else ():
                url = value.get("url") if isinstance(value, dict) else value
                if key.endswith("_url") and isinstance(url, str) and not url[:5].lower() == "data:":
                    raise Refusal(
                        400,
                        error_kinds.MEDIA_URL_REFUSED,
                        f"{key} must be a data: URL (base64 in the request); this endpoint never fetches media from URLs",
                    )


SEQUENCE_FIELDS = ("n", "best_of")
"""Body fields that multiply the sequences one prompt runs as (``best_of`` in older OpenAI APIs)."""


def sequence_count(document: dict[str, Any]) -> int:
    """How many sequences the request puts into the engine: the largest of ``n`` and ``best_of``
    (beam search runs ``n`` beams), times the prompts of a batched completion (``prompt`` as a list
    of strings or of token lists). 400 for an ``n`` that is not a positive integer."""
    per_prompt = 1
    for key in SEQUENCE_FIELDS:
        value = document.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Refusal(400, error_kinds.BAD_REQUEST, f'"{key}" must be a positive integer, got {json.dumps(value)[:40]}')
        per_prompt = max(per_prompt, value)
    prompt = document.get("prompt")
    prompts = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)) else 1
    return per_prompt * max(1, prompts)


@dataclass(frozen=True)
class ForwardedBody:
    """The body vLLM gets, and what it says about the answer to expect."""

    body: bytes
    stream: bool = False
    strip_usage: bool = False
    """The usage chunk was asked for on the caller's behalf: the caller must not see it."""


def forwarded_body(document: dict[str, Any], adapter: str | None, base_model_name: str, target: str) -> ForwardedBody:
    """`document` re-encoded for vLLM, naming the adapter (or the base model) and asking for usage.

    Re-encoding means vLLM parses exactly what the boundary check read (no duplicate keys, no
    second parser's reading of the same bytes).
    """
    document["model"] = adapter if adapter is not None else base_model_name
    stream = bool(document.get("stream"))
    strip_usage = False
    usage_on_request = target == sagemaker_contract.INVOCATIONS_PATH or target in sagemaker_contract.ROUTABLE_PATHS
    if stream and usage_on_request:  # OpenAI completions/chat know stream_options
        raw_options = document.get("stream_options")
        options = raw_options if isinstance(raw_options, dict) else {}
        strip_usage = not options.get("include_usage")
        document["stream_options"] = {**options, "include_usage": True}
    return ForwardedBody(json.dumps(document).encode(), stream, strip_usage)


_REWRITTEN_HEADERS = (b"content-length", sagemaker_contract.ADAPTER_IDENTIFIER_HEADER.encode("latin-1"))


def forwarded_scope(scope: Scope, body: bytes, target: str, adapter: str | None = None) -> Scope:
    """`scope` with the new body's length, the adapter header naming the resolved `adapter` (vLLM's
    SageMaker layer writes that header over the body's ``model``, so it must carry the adapter key
    vLLM loaded, not the component name SageMaker sent) and, when ``route=`` moved it, the target path."""
    forward_scope = dict(scope)
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _REWRITTEN_HEADERS]
    headers.append((b"content-length", str(len(body)).encode()))
    if adapter is not None:
        headers.append((_REWRITTEN_HEADERS[1], adapter.encode("latin-1")))
    forward_scope["headers"] = headers
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
