"""Per-adapter capture: the settings the construct renders, and the record the container writes.

Capture is off unless an endpoint or a manifest row turns it on. The container then writes, for a
sampled share of one adapter's requests, one JSON record to the endpoint's capture log group, in
the adapter's own stream (`capture_stream`), so a tenant can be granted its records and no other's
(standard output instead where no group is given: local mode). The record carries `MARKER`, the request as a golden-set case (so
``cdk-adapters eval --from-capture`` replays it), the adapter, the time, the token counts and the
answer text. Fields named in ``redact`` are replaced by `REDACTED` before the line is written, and a
record longer than ``max_bytes`` is written without its request and answer (``truncated: true``).

Standard library only: the serving image copies this package, and the CLI reads records back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.problems import Problem

CAPTURE_ENV = "CDK_ADAPTERS_CAPTURE"
"""JSON ``{"default": {<settings>}, "adapters": {"<adapter>": {<settings>}}}``; either part optional.
Unset: nothing is captured."""

CAPTURE_LOG_GROUP_ENV = "CDK_ADAPTERS_CAPTURE_LOG_GROUP"
"""The ARN of the log group the container writes records to, one stream per adapter
(`capture_stream`), so that one tenant's records can be read without another's. Unset (local
mode): records go to standard output."""
CAPTURE_LOG_GROUP_PREFIX = "/cdk-adapters/capture/"
BASE_MODEL_STREAM = "_base-model"
"""The stream of the base model's own requests: no adapter name can start with ``_``."""

MARKER = "cdk_adapters_capture"
"""The key (its value: `RECORD_VERSION`) that tells a capture line from every other log line."""
RECORD_VERSION = 1

REDACTED = "[redacted]"
DEFAULT_MAX_BYTES = 16384
MIN_MAX_BYTES = 1024
"""A record's metadata alone (adapter, time, route, counts) takes a few hundred bytes."""
MAX_MAX_BYTES = 200_000
"""CloudWatch Logs takes events up to 256 KiB; a record stays well under it."""

REDACTABLE = ("prompt", "messages", "response")
"""What ``redact`` may name: the prompt, the chat messages' contents, the answer text."""


@dataclass(frozen=True)
class CaptureSettings:
    """How one adapter's requests are captured."""

    sample_rate: float = 1.0
    """Share of requests captured, 0-1 (each request drawn independently)."""
    max_bytes: int = DEFAULT_MAX_BYTES
    """Longest record written whole; a longer one keeps only its metadata."""
    redact: tuple[str, ...] = ()
    """`REDACTABLE` parts replaced by `REDACTED` (a redacted prompt cannot be replayed)."""

    def to_document(self) -> dict[str, Any]:
        return {"sample_rate": self.sample_rate, "max_bytes": self.max_bytes, "redact": list(self.redact)}

    def problems(self, subject: str, field_name: str) -> list[Problem]:
        """What is out of range (the rules `settings_problems` applies to the rendered document)."""
        return settings_problems(self.to_document(), subject, field_name)[1]


@dataclass(frozen=True)
class CapturePolicy:
    """Endpoint default and per-adapter settings; `for_adapter` is None where capture is off."""

    default: CaptureSettings | None = None
    adapters: Mapping[str, CaptureSettings | None] = field(default_factory=dict)
    """Per adapter (keys compared case-insensitively); None turns capture off for that adapter."""

    def for_adapter(self, adapter: str) -> CaptureSettings | None:
        key = adapter_name_key(adapter)
        for name, settings in self.adapters.items():
            if adapter_name_key(name) == key:
                return settings
        return self.default

    @property
    def enabled(self) -> bool:
        return self.default is not None or any(settings is not None for settings in self.adapters.values())


def settings_problems(document: object, subject: str, field_name: str) -> tuple[CaptureSettings | None, list[Problem]]:
    """`CaptureSettings` from ``true`` (the defaults) or an object of its fields; every problem named."""
    if document is True:
        return CaptureSettings(), []
    if document is False or document is None:
        return None, []
    if not isinstance(document, dict):
        return None, [Problem(subject, field_name, f"must be true, false or an object, got {type(document).__name__}")]
    problems: list[Problem] = []
    for unknown in sorted(set(document) - {"sample_rate", "max_bytes", "redact"}):
        problems.append(Problem(subject, f"{field_name}.{unknown}", "is not a capture setting (sample_rate, max_bytes, redact)"))
    rate = document.get("sample_rate", 1.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or not 0 < rate <= 1:
        problems.append(Problem(subject, f"{field_name}.sample_rate", f"must be a number above 0 and at most 1, got {rate!r}"))
        rate = 1.0
    size = document.get("max_bytes", DEFAULT_MAX_BYTES)
    if isinstance(size, bool) or not isinstance(size, int) or not MIN_MAX_BYTES <= size <= MAX_MAX_BYTES:
        problems.append(
            Problem(
                subject, f"{field_name}.max_bytes", f"must be an integer from {MIN_MAX_BYTES} to {MAX_MAX_BYTES}, got {size!r}"
            )
        )
        size = DEFAULT_MAX_BYTES
    redact = document.get("redact", [])
    if not isinstance(redact, list) or any(item not in REDACTABLE for item in redact):
        problems.append(Problem(subject, f"{field_name}.redact", f"must be a list of {', '.join(REDACTABLE)}, got {redact!r}"))
        redact = []
    return CaptureSettings(float(rate), size, tuple(dict.fromkeys(redact))), problems


def environment(policy: CapturePolicy) -> dict[str, str]:
    """The container variable for `policy`; empty (capture off) when nothing is captured."""
    if not policy.enabled:
        return {}
    document: dict[str, Any] = {}
    if policy.default is not None:
        document["default"] = policy.default.to_document()
    if policy.adapters:
        document["adapters"] = {
            name: (settings.to_document() if settings is not None else False)
            for name, settings in sorted(policy.adapters.items())
        }
    return {CAPTURE_ENV: json.dumps(document, separators=(",", ":"), sort_keys=True)}


def decode(environ: Mapping[str, str]) -> tuple[CapturePolicy, list[Problem]]:
    """The policy `environment` rendered; off when the variable is unset."""
    raw = environ.get(CAPTURE_ENV, "").strip()
    if not raw:
        return CapturePolicy(), []
    try:
        document = json.loads(raw)
    except ValueError as error:
        return CapturePolicy(), [Problem(CAPTURE_ENV, "value", f"is not JSON: {error}")]
    if not isinstance(document, dict) or set(document) - {"default", "adapters"}:
        return CapturePolicy(), [Problem(CAPTURE_ENV, "value", 'must be {"default": {...}, "adapters": {"<adapter>": {...}}}')]
    problems: list[Problem] = []
    default, found = settings_problems(document.get("default"), CAPTURE_ENV, "default")
    problems.extend(found)
    adapters: dict[str, CaptureSettings | None] = {}
    rows = document.get("adapters", {})
    if not isinstance(rows, dict):
        problems.append(Problem(CAPTURE_ENV, "adapters", "must be an object of adapter name -> settings"))
        rows = {}
    for name, settings_document in rows.items():
        adapters[name], found = settings_problems(settings_document, CAPTURE_ENV, f"adapters.{name}")
        problems.extend(found)
    return CapturePolicy(default, adapters), problems


def capture_log_group_name(endpoint_name: str) -> str:
    """The capture log group of endpoint `endpoint_name` (the construct creates it)."""
    return CAPTURE_LOG_GROUP_PREFIX + endpoint_name


def capture_stream(adapter_key: str | None) -> str:
    """The log stream one adapter's records go to: its adapter key (`adapter_identity`), which
    is also what a reader's grant names (``log-group:<group>:log-stream:<stream>``)."""
    return BASE_MODEL_STREAM if adapter_key is None else adapter_name_key(adapter_key)


def log_group_from_arn(arn: str) -> tuple[str, str]:
    """(region, log group name) of ``arn:<partition>:logs:<region>:<account>:log-group:<name>``."""
    parts = arn.split(":", 6)
    if len(parts) != 7 or parts[2] != "logs" or parts[5] != "log-group" or not parts[3] or not parts[6]:
        raise ValueError(f"must be a log group ARN (arn:<partition>:logs:<region>:<account>:log-group:<name>), got {arn!r}")
    return parts[3], parts[6].removesuffix(":*")


# --- the record --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaptureRecord:
    """One captured request and its answer."""

    adapter: str | None
    """The adapter that served it; None for the base model."""
    time: str
    """UTC, ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    route: str
    case: dict[str, Any] | None
    """The request as a golden-set line (``prompt`` or ``messages``, ``max_tokens``); None when truncated."""
    response: str | None
    """The answer text; None when truncated, `REDACTED` when redacted."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int = 200
    request_id: str | None = None
    truncated: bool = False
    redacted: tuple[str, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)
    """The sampling parameters the request used (``temperature``, ``top_p``, ``seed``, ...), so a replay uses them too."""

    @property
    def replayable(self) -> bool:
        """Has a whole, unredacted request and answer."""
        return (
            self.case is not None and self.response is not None and not ({"prompt", "messages", "response"} & set(self.redacted))
        )


SAMPLING_PARAMETERS = ("temperature", "top_p", "top_k", "seed", "min_tokens", "stop", "response_format")


def record_from_exchange(
    *,
    adapter: str | None,
    time: str,
    route: str,
    request: Mapping[str, Any],
    answer_text: str | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    status: int,
    request_id: str | None,
    settings: CaptureSettings,
) -> CaptureRecord:
    """The record for one request body and its answer, redacted as `settings` say."""
    case: dict[str, Any] = {}
    if "messages" in request:
        messages = request["messages"]
        case["messages"] = (
            [{**m, "content": REDACTED} if isinstance(m, dict) else REDACTED for m in messages]
            if "messages" in settings.redact and isinstance(messages, list)
            else messages
        )
    elif "prompt" in request:
        case["prompt"] = REDACTED if "prompt" in settings.redact else request["prompt"]
    max_tokens = request.get("max_tokens", request.get("max_completion_tokens"))
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        case["max_tokens"] = max_tokens
    response = REDACTED if "response" in settings.redact and answer_text is not None else answer_text
    redacted = tuple(part for part in settings.redact if part != "messages" or "messages" in request)
    return CaptureRecord(
        adapter=adapter,
        time=time,
        route=route,
        case=case or None,
        response=response,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        status=status,
        request_id=request_id,
        redacted=redacted,
        parameters={k: request[k] for k in SAMPLING_PARAMETERS if k in request},
    )


def encode(record: CaptureRecord, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """One JSON line (no newline); over `max_bytes`, the request and answer are left out."""
    document: dict[str, Any] = {
        MARKER: RECORD_VERSION,
        "adapter": record.adapter,
        "time": record.time,
        "route": record.route,
        "status": record.status,
        "request_id": record.request_id,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "redacted": list(record.redacted),
        "parameters": record.parameters,
        "case": record.case,
        "response": record.response,
        "truncated": record.truncated,
    }
    line = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    if len(line.encode()) > max_bytes:
        document.update(case=None, response=None, parameters={}, truncated=True)
        line = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return line


def decode_line(line: str) -> tuple[CaptureRecord | None, str | None]:
    """``(record, None)`` for a capture line; ``(None, None)`` for any other log line; ``(None,
    reason)`` for a line with the marker that is not a readable record."""
    start = line.find("{")
    if start < 0 or MARKER not in line:
        return None, None
    try:
        document = json.loads(line[start:])
    except ValueError:
        return None, None
    if not isinstance(document, dict) or MARKER not in document:
        return None, None
    if document[MARKER] != RECORD_VERSION:
        return None, f"capture record version {document[MARKER]!r}; this reader knows {RECORD_VERSION}"
    case, response = document.get("case"), document.get("response")
    adapter, time_ = document.get("adapter"), document.get("time")
    if not (adapter is None or isinstance(adapter, str)) or not isinstance(time_, str):
        return None, "adapter must be a string or null and time a string"
    if not (case is None or isinstance(case, dict)) or not (response is None or isinstance(response, str)):
        return None, "case must be an object or null and response a string or null"
    redacted = document.get("redacted") or []
    parameters = document.get("parameters") or {}
    return (
        CaptureRecord(
            adapter=adapter,
            time=time_,
            route=str(document.get("route") or ""),
            case=case,
            response=response,
            prompt_tokens=_int(document.get("prompt_tokens")),
            completion_tokens=_int(document.get("completion_tokens")),
            status=_int(document.get("status")) or 0,
            request_id=document.get("request_id"),
            truncated=document.get("truncated") is True,
            redacted=tuple(str(part) for part in redacted) if isinstance(redacted, list) else (),
            parameters=parameters if isinstance(parameters, dict) else {},
        ),
        None,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
