"""Monthly cost against tenant count, dedicated and shared, with the break-even marked.

matplotlib is imported here only, and only for ``--chart``, with the Agg backend (no display), so
`cdk-adapters plan` starts fast and renders on a headless CI machine.
"""

from __future__ import annotations

from pathlib import Path

from cdk_adapters.planner.cost import CostInputs, break_even_tenants, costs_for_count
from cdk_adapters.planner.traffic import TenantTraffic

WIDTH_PX = 900
HEIGHT_PX = 500
_DPI = 100


def cost_series(average: TenantTraffic, inputs: CostInputs, *, tenants: int) -> tuple[list[int], list[float], list[float]]:
    """Tenant counts and the monthly cost of each, dedicated and shared. With a fixed shared fleet
    (``--shared-instances``) the shared cost is that fleet's, whatever the count, as the table says."""
    counts = list(range(1, max(2 * tenants, 24) + 1))
    dedicated, shared = (list(series) for series in zip(*(costs_for_count(count, average, inputs) for count in counts)))
    if inputs.shared_instances is not None:
        shared = [inputs.monthly(inputs.shared_instances)] * len(counts)
    return counts, dedicated, shared


def render_cost_chart(path: Path, average: TenantTraffic, inputs: CostInputs, *, tenants: int, instance_type: str) -> Path:
    """Write a WIDTH_PX x HEIGHT_PX PNG to `path` and return it."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure
    from matplotlib.ticker import StrMethodFormatter

    counts, dedicated, shared = cost_series(average, inputs, tenants=tenants)
    shared_label = "shared: one multi-adapter endpoint"
    if inputs.shared_instances is not None:
        shared_label = f"shared: a fixed fleet of {inputs.shared_instances} x {instance_type}"
    figure = Figure(figsize=(WIDTH_PX / _DPI, HEIGHT_PX / _DPI), dpi=_DPI)
    axes = figure.add_subplot()
    axes.plot(counts, dedicated, label="dedicated: one endpoint per tenant", color="#c0392b", linewidth=2)
    axes.step(counts, shared, where="post", label=shared_label, color="#2471a3", linewidth=2)
    even = break_even_tenants(average, inputs)
    if even is not None:
        axes.axvline(even, color="#555555", linestyle="--", linewidth=1)
        axes.annotate(
            f"break-even: shared is cheaper from {even} tenants",
            xy=(even, max(dedicated) * 0.62),
            xytext=(6, 0),
            textcoords="offset points",
            fontsize=9,
        )
    axes.axvline(tenants, color="#27ae60", linestyle=":", linewidth=1.5, label=f"this plan: {tenants} tenants")
    axes.set_xlabel("tenants (adapters)")
    axes.set_ylabel("USD per month")
    axes.set_title(
        f"{instance_type} at ${inputs.price_per_hour:,.2f}/h x {inputs.hours:g} h; "
        f"{average.requests_per_minute:g} req/min x {average.output_tokens} output tokens per tenant",
        fontsize=10,
    )
    axes.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize=9)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, format="png", dpi=_DPI)
    return path


__all__ = ["HEIGHT_PX", "WIDTH_PX", "cost_series", "render_cost_chart"]
