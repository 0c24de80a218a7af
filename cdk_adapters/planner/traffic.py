"""Each tenant's expected load, from the manifest's ``traffic:`` fields or from command-line what-ifs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cdk_adapters.private.traffic_bounds import TRAFFIC_BOUNDS
from cdk_adapters.problems import ConfigurationError, Problem


class RowTraffic(Protocol):
    """What the planner reads of a manifest row's ``traffic:`` (the schema's `TrafficSpec`)."""

    @property
    def requests_per_minute(self) -> float: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def peak_factor(self) -> float: ...


class TrafficRow(Protocol):
    """What the planner reads of a manifest row (the schema's `AdapterRow`): the planner imports no schema."""

    @property
    def name(self) -> str: ...
    @property
    def traffic(self) -> RowTraffic | None: ...


DEFAULT_PEAK_FACTOR = 2.0
"""Peak over average request rate when a row does not say (the manifest's default too)."""

MAX_TENANTS = 10_000
"""Most tenants one plan prices (the what-if's ``--tenants``): ten endpoints' worth at the fleet's
1,000 adapters each. The work grows with the count, so it is bounded rather than left to run."""


@dataclass(frozen=True)
class TenantTraffic:
    """One adapter's load: average request rate, request shape, and how far peaks rise above the average."""

    name: str
    requests_per_minute: float
    prompt_tokens: int
    output_tokens: int
    peak_factor: float = DEFAULT_PEAK_FACTOR

    @property
    def output_tokens_per_second(self) -> float:
        """Average decode demand: output tokens are what a GPU spends its time on."""
        return self.requests_per_minute * self.output_tokens / 60.0

    @property
    def peak_output_tokens_per_second(self) -> float:
        return self.output_tokens_per_second * self.peak_factor


def identical_tenants(
    count: int, *, requests_per_minute: float, prompt_tokens: int, output_tokens: int, peak_factor: float = DEFAULT_PEAK_FACTOR
) -> list[TenantTraffic]:
    """``count`` tenants with the same load: the command line's quick what-if."""
    problems = []
    if not 1 <= count <= MAX_TENANTS:
        problems.append(Problem("plan", "--tenants", f"must be from 1 to {MAX_TENANTS:,}, got {count:g}"))
    for field, value in (
        ("requests_per_minute", requests_per_minute),
        ("prompt_tokens", prompt_tokens),
        ("output_tokens", output_tokens),
        ("peak_factor", peak_factor),
    ):
        smallest, largest = TRAFFIC_BOUNDS[field]
        flag = "--" + field.replace("_", "-")
        if not math.isfinite(value):
            problems.append(Problem("plan", flag, f"must be a finite number, got {value}"))
        elif not smallest <= value <= largest:
            problems.append(Problem("plan", flag, f"must be from {smallest:g} to {largest:g}, got {value:g}"))
    if problems:
        raise ConfigurationError(problems, heading="invalid traffic")
    return [
        TenantTraffic(f"tenant-{index + 1}", requests_per_minute, prompt_tokens, output_tokens, peak_factor)
        for index in range(count)
    ]


def manifest_tenants(rows: Sequence[TrafficRow]) -> list[TenantTraffic]:
    """One `TenantTraffic` per manifest row; every row without ``traffic:`` is one problem naming it."""
    problems = [
        Problem(
            f"adapter '{row.name}'",
            "traffic",
            "is not set; add traffic: {requests_per_minute, prompt_tokens, output_tokens} to the row, "
            "or plan a what-if with --tenants N --requests-per-minute R --output-tokens T",
        )
        for row in rows
        if row.traffic is None
    ]
    if not rows:
        problems.append(
            Problem(
                "manifest", "adapters", "has no rows; plan a what-if with --tenants N --requests-per-minute R --output-tokens T"
            )
        )
    if problems:
        raise ConfigurationError(problems, heading="the manifest does not say how much traffic to plan for")
    tenants = []
    for row in rows:
        assert row.traffic is not None  # every row without traffic raised above
        tenants.append(
            TenantTraffic(
                row.name,
                row.traffic.requests_per_minute,
                row.traffic.prompt_tokens,
                row.traffic.output_tokens,
                row.traffic.peak_factor,
            )
        )
    return tenants


__all__ = ["DEFAULT_PEAK_FACTOR", "MAX_TENANTS", "TRAFFIC_BOUNDS", "TenantTraffic", "identical_tenants", "manifest_tenants"]
