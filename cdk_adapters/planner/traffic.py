"""Each tenant's expected load, from the manifest's ``traffic:`` fields or from command-line what-ifs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_PEAK_FACTOR = 2.0
"""Peak over average request rate when a row does not say (the manifest's default too)."""


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
    for field, value, minimum in (
        ("--tenants", count, 1),
        ("--requests-per-minute", requests_per_minute, 0),
        ("--prompt-tokens", prompt_tokens, 0),
        ("--output-tokens", output_tokens, 1),
        ("--peak-factor", peak_factor, 1),
    ):
        if value < minimum:
            problems.append(Problem("plan", field, f"must be >= {minimum}, got {value:g}"))
    if problems:
        raise ConfigurationError(problems, heading="invalid traffic")
    return [
        TenantTraffic(f"tenant-{index + 1}", requests_per_minute, prompt_tokens, output_tokens, peak_factor)
        for index in range(count)
    ]


def manifest_tenants(rows: Sequence) -> list[TenantTraffic]:
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
        problems.append(Problem("manifest", "adapters", "has no rows; plan a what-if with --tenants N --requests-per-minute R --output-tokens T"))
    if problems:
        raise ConfigurationError(problems, heading="the manifest does not say how much traffic to plan for")
    return [
        TenantTraffic(
            row.name,
            row.traffic.requests_per_minute,
            row.traffic.prompt_tokens,
            row.traffic.output_tokens,
            row.traffic.peak_factor,
        )
        for row in rows
    ]


__all__ = ["DEFAULT_PEAK_FACTOR", "TenantTraffic", "identical_tenants", "manifest_tenants"]
