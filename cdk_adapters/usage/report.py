"""One endpoint's usage over a period: each adapter's figures, and the cost when asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

COUNT_COLUMNS = ("requests", "input_tokens", "output_tokens", "errors_4xx", "errors_5xx", "throttled")
"""`AdapterUsage`'s counts, in the order they are reported (CSV columns, table columns)."""


@dataclass
class AdapterUsage:
    """One adapter's figures over the period."""

    adapter: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    errors_4xx: int = 0
    errors_5xx: int = 0
    throttled: int = 0
    cost_share: float | None = None
    """0-1 of the endpoint's cost (None: no cost asked for)."""
    cost_usd: float | None = None


@dataclass
class UsageReport:
    source: str
    start: datetime | None
    end: datetime | None
    adapters: list[AdapterUsage]
    cost: dict[str, Any] | None = field(default=None)
    """instance type, price per hour and its source, instance-hours, total USD, the split rule."""
