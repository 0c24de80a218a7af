"""What can go wrong when calling an adapter, as exceptions a caller can catch by meaning.

SageMaker wraps every container answer that is not 2xx in a ``ModelError`` whose
``OriginalStatusCode`` and ``OriginalMessage`` carry the container's own status and body; our
container says which refusal it is in ``error.type`` (the kinds in `cdk_adapters.contract.error_kinds`,
which the container reads too). `from_client_error` reads both layers so a caller never parses
botocore error dictionaries.
"""

from __future__ import annotations

import json
from typing import Any

from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES

NO_CAPACITY_TEXT = "has no capacity to process this request"
"""SageMaker's ValidationError while a component scaled to zero is waking up, as AWS's sample
aws-samples/sagemaker-genai-hosting-examples 03-features/autoscaling/scale_down_to_zero.ipynb shows it."""


class AdapterClientError(Exception):
    """Base of every error `AdapterClient` raises."""


class DiscoveryError(AdapterClientError):
    """The discovery record could not be read (missing parameter, not a record, wrong version)."""


class UnexpectedEndpoint(DiscoveryError):
    """The discovery record names an endpoint the client was not told to accept (`accept_endpoints`):
    whoever can write the record could otherwise send every call, prompts included, elsewhere."""

    def __init__(self, endpoint_name: str, accepted: tuple[str, ...], origin: str) -> None:
        super().__init__(
            f"{origin} names endpoint {endpoint_name!r}, which this client does not accept "
            f"(accept_endpoints={list(accepted)!r}); nothing was sent"
        )
        self.endpoint_name, self.accepted = endpoint_name, accepted


class AdapterRequired(AdapterClientError, ValueError):
    """No adapter was named, or the name's component is the base component (``base``): the base
    model is never used without ``base_model=True``."""


class BaseModelNotAllowed(AdapterClientError):
    """``base_model=True`` on an endpoint whose record says base-model access is off."""


class AdapterNotFound(AdapterClientError):
    """The endpoint serves no adapter (inference component) of this name."""

    def __init__(self, adapter: str | None, message: str) -> None:
        super().__init__(message)
        self.adapter = adapter


class PayloadTooLarge(AdapterClientError, ValueError):
    """The request body is above InvokeEndpoint's limit; raised before anything is sent."""

    def __init__(self, size: int | None, limit: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"the request body is {size} bytes; InvokeEndpoint accepts at most {limit} bytes (6 MiB): "
            "send smaller or fewer images, or a shorter prompt"
        )
        self.size, self.limit = size, limit


class InvalidImage(AdapterClientError, ValueError):
    """An image that cannot be sent: unreadable, or not a format a data URL can name."""


class AdapterLoadFailed(AdapterClientError):
    """The container could not load the adapter (422): retrying will not help."""


class AdapterThrottled(AdapterClientError):
    """The container refused the call (429) because the adapter is over one of its limits (fair
    share on a shared endpoint). Raised once retrying within the deadline did not get through."""

    def __init__(self, adapter: str | None, message: str, *, limit: str | None, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.adapter, self.limit, self.retry_after_s = adapter, limit, retry_after_s


class DeadlineExceeded(AdapterClientError):
    """Retries for a model that was not ready ran out of time or attempts."""

    def __init__(self, message: str, *, attempts: int, waited_s: float) -> None:
        super().__init__(message)
        self.attempts, self.waited_s = attempts, waited_s


class EndpointWaking(DeadlineExceeded):
    """The component still had no capacity (scaled to zero, or scaling up) when the deadline passed."""


class StreamInterrupted(AdapterClientError):
    """A response stream ended with an error event after it had started."""


class InvocationFailed(AdapterClientError):
    """Any other failed call; `status` and `message` are the container's when it answered."""

    def __init__(self, message: str, *, code: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code, self.status = code, status


class StructuredOutputError(AdapterClientError, ValueError):
    """An answer asked for as JSON that is not what was asked for (checked on the client side:
    the container never inspects answers). `text` is the answer as received."""

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


class AnswerNotJson(StructuredOutputError):
    """The answer does not parse as JSON (free text, or JSON cut off by ``max_tokens``)."""


class AnswerSchemaMismatch(StructuredOutputError):
    """The answer is JSON but does not match the schema; `mismatches` lists each, with its path."""

    def __init__(self, message: str, *, text: str, mismatches: tuple[str, ...]) -> None:
        super().__init__(message, text=text)
        self.mismatches = mismatches


def error_code(error: Exception) -> str:
    code: str = getattr(error, "response", {}).get("Error", {}).get("Code", "")
    return code


def error_message(error: Exception) -> str:
    return getattr(error, "response", {}).get("Error", {}).get("Message", "") or str(error)


def is_waking(error: Exception) -> bool:
    """A call that may succeed later: no capacity yet, model not ready, or the container starting (503)."""
    code = error_code(error)
    if code == "ModelNotReadyException":
        return True
    if code == "ValidationError":
        return NO_CAPACITY_TEXT in error_message(error)
    if code == "ModelError":
        response = getattr(error, "response", {})
        if response.get("OriginalStatusCode") != 503:
            return False
        # The container's 503 says which: STARTING (replaying adapters) passes, UNHEALTHY
        # (start-up failed, never cleared) does not, so retrying it would only delay the reason.
        kind, _ = _container_error(response.get("OriginalMessage", ""))
        return kind != error_kinds.UNHEALTHY
    return False


def from_client_error(error: Exception, *, adapter: str | None, component: str) -> AdapterClientError:
    """The typed error for a botocore `ClientError` from InvokeEndpoint(WithResponseStream)."""
    code, message = error_code(error), error_message(error)
    response: dict[str, Any] = getattr(error, "response", {})
    if code == "ModelError":
        status = response.get("OriginalStatusCode")
        original = str(response.get("OriginalMessage") or "")
        kind, detail = _container_error(original)
        said = detail or original or message
        if status == 404 or kind == error_kinds.ADAPTER_NOT_FOUND:
            return AdapterNotFound(adapter, f"adapter {adapter!r} is not served by this endpoint: {said}")
        if kind == error_kinds.ADAPTER_REQUIRED:
            return AdapterRequired(said)
        if status == 413 or kind == error_kinds.PAYLOAD_TOO_LARGE:
            return PayloadTooLarge(None, INVOKE_ENDPOINT_MAX_BYTES, said)
        if status == 429 or kind == error_kinds.ADAPTER_THROTTLED:
            limit, retry_after = throttle_details(original)
            return AdapterThrottled(adapter, f"adapter {adapter!r} is throttled: {said}", limit=limit, retry_after_s=retry_after)
        if status == 422 or kind == error_kinds.ADAPTER_LOAD_FAILED:
            return AdapterLoadFailed(f"adapter {adapter!r} could not be loaded: {said}")
        return InvocationFailed(f"the model answered {status}: {said}", code=code, status=status)
    if code == "ValidationError":
        lowered = message.lower()
        if "inference component" in lowered and ("not found" in lowered or "does not exist" in lowered):
            return AdapterNotFound(adapter, f"inference component {component!r} does not exist: {message}")
    if code == "ModelStreamError":
        return StreamInterrupted(f"the stream from {component!r} failed: {message}")
    return InvocationFailed(f"{code or 'error'}: {message}", code=code)


def throttle_details(original: str) -> tuple[str | None, float | None]:
    """The limit a 429 names and its ``retry_after`` seconds, from the container's error body."""
    try:
        inner = json.loads(original).get("error", {})
    except (TypeError, ValueError, AttributeError):
        return None, None
    limit, retry_after = inner.get("limit"), inner.get("retry_after")
    valid = isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool) and retry_after >= 0
    return (limit if isinstance(limit, str) else None), (float(retry_after) if valid else None)


def is_throttled(error: Exception) -> bool:
    """The container's 429: the adapter is over its limits; a retry after ``retry_after`` may pass."""
    response = getattr(error, "response", {})
    return error_code(error) == "ModelError" and response.get("OriginalStatusCode") == 429


def _container_error(original: str) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` of an OpenAI-style error body, if `original` is one."""
    try:
        document = json.loads(original)
    except (TypeError, ValueError):
        return None, None
    inner = document.get("error") if isinstance(document, dict) else None
    if not isinstance(inner, dict):
        return None, None
    kind, text = inner.get("type"), inner.get("message")
    return (kind if isinstance(kind, str) else None), (text if isinstance(text, str) else None)
