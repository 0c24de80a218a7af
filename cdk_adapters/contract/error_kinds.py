"""The ``error.type`` values the container answers with, which the runtime client reads.

Every refusal the container sends is OpenAI-style JSON, ``{"error": {"message", "type", "code", ...}}``
(docs/container.md). The client tells refusals apart by ``type`` alone, so both sides read these names
from here and a renamed kind cannot drift between them.
"""

from __future__ import annotations

# Invocations
ADAPTER_REQUIRED = "adapter_required"
"""400: the request names no adapter and base-model access is off."""
ADAPTER_NOT_FOUND = "adapter_not_found"
"""404: no adapter of that name is registered (also ``DELETE /adapters/{name}``)."""
PAYLOAD_TOO_LARGE = "payload_too_large"
"""413: the body is over InvokeEndpoint's limit."""
BAD_ROUTE = "bad_route"
"""400: ``CustomAttributes route=`` names a route that is not allowed."""
FORBIDDEN = "forbidden"
"""403: a vLLM route that would skip the gate and the registration record."""
ADAPTER_CHOICE_REFUSED = "adapter_choice_refused"
"""403: the body's ``model`` names an adapter while the header names none (the tenant boundary);
the same answer whether or not that adapter exists."""
ROUTE_NOT_FOUND = "route_not_found"
"""404: a route the container does not serve (its route table is an allow list)."""
MEDIA_URL_REFUSED = "media_url_refused"
"""400: a chat part's media is a URL to fetch instead of an inline ``data:`` URL."""
ADAPTER_THROTTLED = "adapter_throttled"
"""429 (with ``Retry-After``): the adapter is over one of its limits (fair share); retry after that."""

INVALID_JSON = "invalid_json"
"""400: a body that is not a JSON object the middleware can read (bad syntax, too deep, huge numbers)."""
HEADERS_TOO_LARGE = "headers_too_large"
"""431: the request's headers are over the middleware's limit."""
TOO_MANY_SEQUENCES = "too_many_sequences"
"""400: the request asks for more sequences (``n`` times its prompts) than its adapter's ``max_n``
or than the engine runs at once."""
BODY_TIMEOUT = "body_timeout"
"""408: the request body did not arrive in time (a stalled upload would hold its connection)."""
CROSS_ORIGIN_REFUSED = "cross_origin_refused"
"""403: an administrative request carried a browser's ``Origin`` header or was not JSON: SageMaker
sends neither, and a web page must never register or remove adapters on a loopback server."""

# Readiness (every route, and /ping)
STARTING = "starting"
"""503: start-up is still restoring persisted registrations; a retry later may succeed."""
UNHEALTHY = "unhealthy"
"""503: start-up failed (an adapter could not be restored); set once, never cleared, so do not retry."""

# Registrations (POST/DELETE /adapters)
BAD_REQUEST = "bad_request"
"""400: ``POST /adapters`` without ``name`` and ``src``."""
INVALID_NAME = "invalid_name"
"""400: an adapter name no SageMaker inference component could have (``POST``/``DELETE /adapters``)."""
ADAPTER_CONFLICT = "adapter_conflict"
"""409: the name is registered already with other files."""
ADAPTER_REJECTED = "adapter_rejected"
"""422: the compatibility gate refused the files (every problem in ``error.problems``)."""
ADAPTER_LOAD_FAILED = "adapter_load_failed"
"""422: the files passed the gate but vLLM could not load them; retrying will not help."""
ENGINE_ERROR = "engine_error"
"""502/503: vLLM failed to load or unload, or its engine is unhealthy."""
STATE_ERROR = "state_error"
"""500: the registration record could not be persisted; nothing was changed."""
