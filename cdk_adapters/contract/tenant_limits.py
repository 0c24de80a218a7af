"""Per-adapter limits and fair share: what the construct renders and the container enforces.

One manifest row (or ``add_adapter(limits=...)``) may bound what its tenant takes from the shared
engine; the endpoint may set defaults for every adapter. The container reads them from the
environment (`environment` and `decode` side by side, as every codec in `contract`).

SageMaker caps one container environment value at 1,024 characters, so per-adapter overrides are
for the few tenants that need them; the defaults cover everyone else (synth refuses an
environment value that would not fit, naming it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.contract.env_values import parse_bool, parse_whole_number
from cdk_adapters.problems import Problem

FAIR_SHARE_ENV = "CDK_ADAPTERS_FAIR_SHARE"
"""``false`` turns fair share off: requests go to vLLM as they come (its first-come, first-served)."""
ENGINE_IN_FLIGHT_ENV = "CDK_ADAPTERS_ENGINE_IN_FLIGHT"
"""Requests let into vLLM at once. Default: vLLM's ``--max-num-seqs`` (its running-batch size)."""
ENGINE_HEADROOM_ENV = "CDK_ADAPTERS_ENGINE_HEADROOM"
"""Places in the engine kept free for adapters that have none there while such an adapter is
present, so its next request joins the running batch at once. Default: `default_headroom`."""
HEADROOM_PRESENCE_ENV = "CDK_ADAPTERS_HEADROOM_PRESENCE_S"
"""Whole seconds an adapter counts as present after its last request, and so keeps its claim on
the headroom. Default `DEFAULT_HEADROOM_PRESENCE_S`. A container setting (the construct does not
render it): longer keeps the batch's last places for quiet tenants longer."""
DEFAULT_HEADROOM_PRESENCE_S = 10
LIMITS_ENV = "CDK_ADAPTERS_TENANT_LIMITS"
"""JSON ``{"default": {<limits>}, "adapters": {"<adapter>": {<limits>}}}``; each part optional."""

MAX_WEIGHT = 100.0
DEFAULT_MAX_N = 4
"""Sequences one request may ask the engine for by default (``n`` times its prompts): a request
with ``"n": 12`` occupies twelve places of the running batch, so it is bounded like a burst."""


@dataclass(frozen=True)
class AdapterLimits:
    """What one adapter may take from the shared engine. Every limit left ``None`` is unbounded."""

    weight: float = 1.0
    """Share of the engine while adapters compete for it: an adapter of weight 2 is let in twice as
    often as one of weight 1. This is also the priority knob. From 0.01 to 100; default 1."""
    max_in_flight: int | None = None
    """Places in the engine this adapter may hold at once; its further requests wait. Default: any."""
    max_queue: int | None = None
    """Requests of this adapter that may wait for a place; one more gets 429. Default: any."""
    max_queue_wait_s: float | None = None
    """Seconds a request may wait for a place before it gets 429. Default: as long as it takes."""
    max_n: int = DEFAULT_MAX_N
    """Sequences one request may ask for (``n``, or ``best_of``, times its prompts); more gets 400.
    Each sequence is a place in the engine, counted by fair share and `max_in_flight`. Default 4."""

    @property
    def retry_after_s(self) -> int:
        """The ``Retry-After`` a throttled caller is given (whole seconds, at least 1)."""
        return max(1, math.ceil(self.max_queue_wait_s or 1))

    def problems(self, subject: str, prefix: str = "limits") -> list[Problem]:
        found: list[Problem] = []
        weight = self.weight
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or not 0.01 <= weight <= MAX_WEIGHT
        ):
            found.append(Problem(subject, f"{prefix}.weight", f"must be a number from 0.01 to {MAX_WEIGHT:g}, got {weight!r}"))
        for name in ("max_in_flight", "max_queue", "max_n"):
            value = getattr(self, name)
            low = 0 if name == "max_queue" else 1
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                found.append(Problem(subject, f"{prefix}.{name}", f"must be an integer >= {low}, got {value!r}"))
        wait = self.max_queue_wait_s
        if wait is not None and (
            isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait) or not 0 < wait <= 60
        ):
            found.append(
                Problem(
                    subject,
                    f"{prefix}.max_queue_wait_s",
                    f"must be a number of seconds in (0, 60] (SageMaker's invocation timeout), got {wait!r}",
                )
            )
        return found

    def to_document(self) -> dict[str, Any]:
        """Only what differs from the defaults, so the environment stays small."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    @classmethod
    def from_document(cls, document: object, subject: str, prefix: str) -> tuple[AdapterLimits, list[Problem]]:
        if not isinstance(document, dict):
            return cls(), [Problem(subject, prefix, f"must be an object of limits, got {document!r}")]
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(document) - known)
        problems = [Problem(subject, f"{prefix}.{key}", f"is not a limit; known: {', '.join(sorted(known))}") for key in unknown]
        limits = cls(**{key: value for key, value in document.items() if key in known})
        return limits, problems + limits.problems(subject, prefix)


@dataclass(frozen=True)
class TenantLimits:
    """Fair share on or off, the engine's budget, and the limits of each adapter."""

    fair_share: bool = True
    engine_in_flight: int | None = None
    engine_headroom: int | None = None
    """None: `default_headroom` of the engine's budget."""
    default: AdapterLimits = AdapterLimits()
    adapters: Mapping[str, AdapterLimits] = field(default_factory=dict)
    """Keyed by `adapter_name_key`."""

    headroom_presence_s: int = DEFAULT_HEADROOM_PRESENCE_S
    """How long an adapter counts as present after its last request (`HEADROOM_PRESENCE_ENV`)."""

    def headroom_for(self, engine_in_flight: int) -> int:
        """Places kept free for adapters with none in the engine: the setting, else `default_headroom`."""
        return self.engine_headroom if self.engine_headroom is not None else default_headroom(engine_in_flight)

    def for_adapter(self, adapter: str) -> AdapterLimits:
        return self.adapters.get(adapter_name_key(adapter), self.default)


def default_headroom(engine_in_flight: int) -> int:
    """One place kept free when the engine takes 4 or more at once; none below (too dear a share)."""
    return 1 if engine_in_flight >= 4 else 0


def environment(
    *,
    fair_share: bool = True,
    engine_in_flight: int | None = None,
    engine_headroom: int | None = None,
    default: AdapterLimits | None = None,
    adapters: Mapping[str, AdapterLimits] | None = None,
) -> dict[str, str]:
    """The container variables for these settings (only what differs from the container's defaults)."""
    env: dict[str, str] = {}
    if not fair_share:
        env[FAIR_SHARE_ENV] = "false"
    if engine_in_flight is not None:
        env[ENGINE_IN_FLIGHT_ENV] = str(engine_in_flight)
    if engine_headroom is not None:
        env[ENGINE_HEADROOM_ENV] = str(engine_headroom)
    document: dict[str, Any] = {}
    if default is not None and default.to_document():
        document["default"] = default.to_document()
    overrides = {adapter_name_key(name): limits.to_document() for name, limits in (adapters or {}).items()}
    if overrides:
        document["adapters"] = dict(sorted(overrides.items()))
    if document:
        env[LIMITS_ENV] = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return env


def decode(environ: Mapping[str, str]) -> tuple[TenantLimits, list[Problem]]:
    """What `environment` wrote, and every problem with it (naming the variable and field)."""
    problems: list[Problem] = []
    fair_share = parse_bool(environ, FAIR_SHARE_ENV, True, problems)
    in_flight = parse_whole_number(environ, ENGINE_IN_FLIGHT_ENV, 1, problems)
    headroom = parse_whole_number(environ, ENGINE_HEADROOM_ENV, 0, problems)
    presence = parse_whole_number(environ, HEADROOM_PRESENCE_ENV, 1, problems)
    default, adapters = AdapterLimits(), {}
    raw_limits = environ.get(LIMITS_ENV, "").strip()
    if raw_limits:
        try:
            document = json.loads(raw_limits)
        except json.JSONDecodeError as error:
            document = None
            problems.append(Problem(LIMITS_ENV, "value", f"is not JSON: {error}"))
        if document is not None and not isinstance(document, dict):
            problems.append(Problem(LIMITS_ENV, "value", "must be a JSON object"))
        elif isinstance(document, dict):
            unknown = sorted(set(document) - {"default", "adapters"})
            problems += [Problem(LIMITS_ENV, key, "is not known; use 'default' and 'adapters'") for key in unknown]
            if "default" in document:
                default, found = AdapterLimits.from_document(document["default"], LIMITS_ENV, "default")
                problems += found
            listed = document.get("adapters", {})
            if not isinstance(listed, dict):
                problems.append(Problem(LIMITS_ENV, "adapters", "must map adapter names to limits"))
                listed = {}
            for name, value in listed.items():
                adapter_limits, found = AdapterLimits.from_document(value, LIMITS_ENV, f"adapters.{name}")
                problems += found
                adapters[adapter_name_key(name)] = adapter_limits
    limits = TenantLimits(fair_share, in_flight, headroom, default, adapters)
    if presence is not None:
        limits = replace(limits, headroom_presence_s=presence)
    return limits, problems
