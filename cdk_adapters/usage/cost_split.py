"""The endpoint's cost for a period, and each adapter's share of it.

The endpoint costs instance-hours x price per hour. Each adapter's share is its output tokens over
all adapters' output tokens (generated tokens are what occupies the GPUs); when no adapter generated
a token, the share is by requests; with no requests at all nothing is attributed. The shares add up
to the whole cost: idle capacity is charged to the tenants who used the endpoint, in proportion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdk_adapters.usage.report import UsageReport

if TYPE_CHECKING:
    from cdk_adapters.planner.prices import InstancePrice


def period_instance_hours(report: UsageReport, instances: float | None) -> float:
    """Instance-hours of `instances` (default 1) running the report's whole period."""
    assert report.start is not None and report.end is not None
    return (instances or 1) * (report.end - report.start).total_seconds() / 3600


def split_endpoint_cost(report: UsageReport, instance_type: str, price: InstancePrice, instance_hours: float) -> dict[str, Any]:
    """Set each adapter's ``cost_share`` and ``cost_usd`` (the module's rule); returns the bill:
    instance type, price per hour and its source, instance-hours, total USD, the split rule."""
    total = instance_hours * price.usd_per_hour
    tokens = sum(row.output_tokens for row in report.adapters)
    requests = sum(row.requests for row in report.adapters)
    rule, weights = "output tokens", [row.output_tokens for row in report.adapters]
    if not tokens:
        rule, weights = "requests (no output tokens in the period)", [row.requests for row in report.adapters]
    whole = sum(weights)
    for row, weight in zip(report.adapters, weights):
        row.cost_share = weight / whole if whole else 0.0
        row.cost_usd = round(total * row.cost_share, 4)
    return {
        "instance_type": instance_type,
        "usd_per_hour": price.usd_per_hour,
        "price_source": price.source,
        "instance_hours": round(instance_hours, 4),
        "total_usd": round(total, 4),
        "split_by": rule if whole else "nothing (no requests in the period): not attributed",
        "requests": requests,
    }
