"""The request body of one call: completions or chat, images as data URLs, the size checked first.

Images travel inside the JSON body (OpenAI's ``image_url`` content part with a ``data:`` URL),
because InvokeEndpoint carries one body and nothing else. Base64 makes them a third larger, so the
whole encoded body, not the image, is what is held against InvokeEndpoint's limit, before sending.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk_adapters.client.errors import InvalidImage, PayloadTooLarge
from cdk_adapters.contract.runtime_api import CHAT_ROUTE, COMPLETIONS_ROUTE, INVOKE_ENDPOINT_MAX_BYTES

Image = bytes | str | Path
"""Raw image bytes, or the path of an image file."""

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True)
class Request:
    """An encoded body and the OpenAI route the container should answer it on."""

    body: bytes
    route: str


def image_data_url(image: Image) -> str:
    """``data:<type>;base64,...`` for image bytes or an image file (type from its content, else its name)."""
    name = None
    if isinstance(image, (str, Path)):
        path = Path(image)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise InvalidImage(f"image {str(path)!r} cannot be read: {error.strerror or error}") from None
        name = path.name
    elif isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
    else:
        raise InvalidImage(f"an image must be bytes or a file path, got {type(image).__name__}")
    media_type = _media_type(data, name)
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def build_request(
    *,
    prompt: str | None = None,
    messages: Sequence[Mapping[str, Any]] | None = None,
    images: Sequence[Image] = (),
    stream: bool = False,
    parameters: Mapping[str, Any] | None = None,
    limit: int = INVOKE_ENDPOINT_MAX_BYTES,
    stable_prefix: bool = False,
) -> Request:
    """The body for a completion (`prompt`) or a chat (`messages`; a `prompt` with `images` becomes one
    user message); raises `PayloadTooLarge` when the encoded body is over `limit`. The body names no
    ``model``: the component header names the adapter, and the container writes it in.

    With `stable_prefix` the body starts with the conversation (`prompt`, or `messages` with each
    message's ``role`` and ``content`` first), and the parameters follow in sorted order: equal
    conversations then give equal leading bytes whatever the per-request parameters, or the order a
    caller wrote them in, which is what ``PREFIX_AWARE`` routing compares (`stable_prefix_body`)."""
    if (prompt is None) == (messages is None):
        raise ValueError("give either prompt (a completion) or messages (a chat), not both")
    document: dict[str, Any] = dict(parameters or {})
    if images and messages is None:
        messages = [{"role": "user", "content": prompt}]
        prompt = None
    if messages is not None:
        document["messages"] = _with_images([dict(message) for message in messages], images)
        route = CHAT_ROUTE
    else:
        document["prompt"] = prompt
        route = COMPLETIONS_ROUTE
    if stream:
        document["stream"] = True
    if stable_prefix:
        document = stable_prefix_body(document)
    body = json.dumps(document, separators=(",", ":")).encode()
    if len(body) > limit:
        raise PayloadTooLarge(len(body), limit)
    return Request(body=body, route=route)


CONVERSATION_KEYS = ("prompt", "messages")
MESSAGE_LEADING_KEYS = ("role", "content")


def stable_prefix_body(document: Mapping[str, Any]) -> dict[str, Any]:
    """`document` reordered so its serialized bytes start with the conversation.

    SageMaker's ``PREFIX_AWARE`` routing compares the first ``prefix_length`` bytes of an
    InvokeEndpoint body (1,024 at least). Python keeps insertion order, so a body built as
    parameters-then-conversation starts with ``{"max_tokens":...,"temperature":...``, and two
    requests with one long system prompt route apart whenever their parameters differ. Only the
    order of keys changes: the JSON means the same to the container.

    Why it should help is *inferred, not documented*: requests routed together land on the same
    copy, whose vLLM prefix cache may already hold the KV blocks of that start; vLLM keys that cache
    by adapter too, so the gain is between requests to the same adapter, and whether SageMaker's
    router also keys on the invoked component is undocumented.
    """
    ordered: dict[str, Any] = {}
    for key in CONVERSATION_KEYS:
        if key in document:
            value = document[key]
            ordered[key] = [_message_first(message) for message in value] if key == "messages" else value
    for key in sorted(k for k in document if k not in CONVERSATION_KEYS):
        ordered[key] = document[key]
    return ordered


def _message_first(message: Any) -> Any:
    if not isinstance(message, Mapping):
        return message
    leading = {key: message[key] for key in MESSAGE_LEADING_KEYS if key in message}
    return {**leading, **{key: message[key] for key in sorted(message) if key not in MESSAGE_LEADING_KEYS}}


def _with_images(messages: list[dict[str, Any]], images: Sequence[Image]) -> list[dict[str, Any]]:
    """The images appended, as ``image_url`` parts, to the last user message."""
    if not images:
        return messages
    users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
    if not users:
        raise ValueError("images go with a user message, and these messages have none")
    last = messages[users[-1]]
    content = last.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    parts += [{"type": "image_url", "image_url": {"url": image_data_url(image)}} for image in images]
    last["content"] = parts
    return messages


def _media_type(data: bytes, name: str | None) -> str:
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    guessed = mimetypes.guess_type(name)[0] if name else None
    if guessed and guessed.startswith("image/"):
        return guessed
    shown = repr(name) if name else f"of {len(data)} bytes"
    raise InvalidImage(f"image {shown} is not PNG, JPEG, GIF or WebP (nor named like an image file)")
