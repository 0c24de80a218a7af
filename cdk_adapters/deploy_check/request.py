"""What a deploy-check request may be, standard library only: the construct (`deploy_check`) and
the manifest schema (a row's ``check:``) refuse the same bodies with the same words."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES

DEFAULT_BODY: Mapping[str, Any] = {"prompt": "Hello", "max_tokens": 8, "temperature": 0}
"""A completions request (``/invocations`` takes completions and chat bodies): a few greedy tokens."""
MAX_BODY_CHARACTERS = 2048
"""A check request is small: it travels as a custom-resource property, and each adapter may have its own."""


def body_messages(body: object) -> list[tuple[str, str]]:
    """``(sub-field, message)`` for each thing wrong with `body` ("" for the body itself)."""
    if not isinstance(body, Mapping) or not body:
        return [("", f"must be a non-empty JSON object (a completions or chat request), got {body!r}")]
    try:
        text = json.dumps(dict(body), sort_keys=True)
    except (TypeError, ValueError) as error:
        return [("", f"must be JSON-serializable: {error}")]
    found = []
    if len(text) > min(MAX_BODY_CHARACTERS, INVOKE_ENDPOINT_MAX_BYTES):
        found.append(("", f"is {len(text)} characters as JSON; a check request may have at most {MAX_BODY_CHARACTERS}"))
    if "prompt" not in body and "messages" not in body:
        found.append(("", 'needs "prompt" (completions) or "messages" (chat)'))
    if "model" in body:
        found.append(("model", "must be left out: the adapter is the component the check invokes"))
    if body.get("stream"):
        found.append(("stream", "must be false: the check reads one whole answer"))
    return found
