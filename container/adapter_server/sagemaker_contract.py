"""The names SageMaker uses when it talks to the container, and how to read them.

Sources: AWS's `model-hosting-container-standards` library (which vLLM uses for /adapters and
/invocations) and SageMaker's InvokeEndpoint reference. Header names are lower case because ASGI
delivers them that way.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

from cdk_adapters.contract import runtime_api

ADAPTER_IDENTIFIER_HEADER = runtime_api.ADAPTER_IDENTIFIER_HEADER
"""Set on /invocations when the caller named an adapter inference component."""

ADAPTER_ALIAS_HEADER = "x-amzn-sagemaker-adapter-alias"
"""Optional on ``POST /adapters``: a display name for the adapter."""

CUSTOM_ATTRIBUTES_HEADER = runtime_api.CUSTOM_ATTRIBUTES_HEADER
"""InvokeEndpoint's ``CustomAttributes``, passed through verbatim."""

ROUTE_ATTRIBUTE = runtime_api.ROUTE_ATTRIBUTE
"""``CustomAttributes: route=/v1/chat/completions`` sends the invocation to that OpenAI route."""

ROUTABLE_PATHS: frozenset[str] = frozenset({runtime_api.COMPLETIONS_ROUTE, runtime_api.CHAT_ROUTE})
"""Routes an invocation may be sent to with ``route=``: generation only, never admin routes."""

GUARDED_GENERATION_PATHS: frozenset[str] = ROUTABLE_PATHS
"""vLLM's OpenAI routes the middleware serves besides /invocations, under the same adapter rule:
the ``route=`` targets, and what an OpenAI client calls in local mode. Every other route that
generates (responses, messages, batch, scoring, pooling, embeddings, audio, ...) is closed."""

PASSTHROUGH_ROUTES: frozenset[tuple[str, str]] = frozenset({("GET", runtime_api.METRICS_PATH), ("GET", "/version")})
"""Read-only vLLM routes that reach vLLM unchanged: Prometheus metrics and the version."""

LOCAL_ONLY_ROUTES: frozenset[tuple[str, str]] = frozenset({("GET", "/v1/models")})
"""Open only with `LOCAL_BODY_NAMES_ADAPTER` (it lists every registered adapter by name)."""

INVOCATIONS_PATH = "/invocations"
ADAPTERS_PATH = "/adapters"
HEALTH_PATHS: frozenset[str] = frozenset({"/ping", "/health"})
VLLM_ADAPTER_ADMIN_PATHS: frozenset[str] = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter"})
"""vLLM's own adapter routes: closed from outside, because they would skip the gate and the record."""


def header(headers: Iterable[tuple[bytes, bytes]], name: str) -> str | None:
    """The first value of header `name` (lower case), decoded as latin-1 like HTTP/1.1 does."""
    key = name.encode("latin-1")
    for header_name, value in headers:
        if header_name.lower() == key:
            return value.decode("latin-1")
    return None


def custom_attributes(value: str | None) -> dict[str, str]:
    """Parse ``key=value`` pairs separated by ``;`` or ``,`` (both conventions are in use).

    Entries without ``=`` are ignored: CustomAttributes is free text that other tools also use.
    """
    attributes: dict[str, str] = {}
    if not value:
        return attributes
    for entry in value.replace(",", ";").split(";"):
        key, sep, raw = entry.partition("=")
        if sep and key.strip():
            attributes[key.strip().lower()] = unquote(raw.strip())
    return attributes
