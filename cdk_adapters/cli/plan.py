"""``cdk-adapters plan``: cost, capacity and LoRA memory for the manifest's fleet (docs/planner.md).

The arguments are checked and resolved here (manifest, instance pools and prices, tenants, base
shapes); `cdk_adapters.planner.endpoint_plan` builds each pool's plan; this module prints it.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from cdk_adapters.cli.common import PROG, Failure, manifest_path
from cdk_adapters.hosting.instance_types import DEFAULT_INSTANCE_TYPE
from cdk_adapters.problems import ConfigurationError, Problem

if TYPE_CHECKING:
    from cdk_adapters.hosting.instance_types import GpuInstanceType
    from cdk_adapters.manifest.gating import ManifestPlan
    from cdk_adapters.planner.endpoint_plan import PlanSettings
    from cdk_adapters.planner.gpu_lora import TenantLora
    from cdk_adapters.planner.lora_memory import BaseModelShapes
    from cdk_adapters.planner.prices import InstancePrice
    from cdk_adapters.planner.report import PlanReport
    from cdk_adapters.planner.traffic import TenantTraffic

T = TypeVar("T")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = commands.add_parser(
        "plan",
        help="dedicated vs shared cost, instances needed, and whether the adapters fit in memory",
        description=(
            "Plan the shared endpoint for a manifest (default: manifests/example.yaml): monthly cost of "
            "dedicated endpoints vs one shared endpoint, instances needed, utilisation, break-even, and "
            "whether max_loras GPU slots and max_cpu_loras cached adapters fit on the instance type. "
            "Traffic comes from the rows' traffic: fields, or from --tenants and friends for a what-if. "
            "Prices are never fetched: the shipped table, --price-file or --price-per-hour."
        ),
    )
    _add_fleet_options(plan)
    _add_what_if_options(plan)
    _add_capacity_options(plan)
    _add_memory_options(plan)
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--chart", type=Path, metavar="PNG", help="also write a chart of monthly cost against tenant count")
    plan.set_defaults(handler=run)


def _add_fleet_options(plan: argparse.ArgumentParser) -> None:
    """The manifest, the instance types (pools) and their prices, the hours of a month."""
    plan.add_argument("--manifest", type=Path, help="manifest to plan (default: manifests/example.yaml)")
    plan.add_argument(
        "--instance-type",
        action="append",
        metavar="TYPE",
        help=f"SageMaker instance type (default: {DEFAULT_INSTANCE_TYPE}); give it 2 to 5 times for instance pools, "
        "first tried first: each pool is planned and the worst case reported",
    )
    prices = plan.add_mutually_exclusive_group()
    prices.add_argument("--price-per-hour", type=float, metavar="USD", help="price of one instance-hour")
    prices.add_argument("--price-file", type=Path, metavar="CSV", help="CSV with columns instance_type,usd_per_hour[,source]")
    plan.add_argument("--hours", type=float, default=730, help="hours per month (default: 730)")


def _add_what_if_options(plan: argparse.ArgumentParser) -> None:
    """Identical what-if tenants instead of the manifest's rows' traffic: fields."""
    what_if = plan.add_argument_group("what-if traffic (instead of the manifest's traffic: fields)")
    what_if.add_argument("--tenants", type=int, help="number of identical tenants")
    what_if.add_argument("--requests-per-minute", type=float, default=8.0, help="per tenant (default: 8)")
    what_if.add_argument("--prompt-tokens", type=int, default=500, help="per request (default: 500)")
    what_if.add_argument("--output-tokens", type=int, default=600, help="per request (default: 600)")
    what_if.add_argument("--peak-factor", type=float, default=2.0, help="peak over average request rate (default: 2)")
    what_if.add_argument(
        "--ranks",
        metavar="RANKS",
        help="the what-if tenants' LoRA ranks, e.g. 16x10,64 (default: all at the manifest's max_lora_rank)",
    )
    what_if.add_argument(
        "--zipf",
        type=float,
        metavar="S",
        help="skew the what-if tenants' requests: the k-th busiest gets 1/k^S of the weight (default: even)",
    )


def _add_capacity_options(plan: argparse.ArgumentParser) -> None:
    """Throughput of one instance, headroom and the shared fleet's size."""
    capacity = plan.add_argument_group("capacity")
    capacity.add_argument(
        "--throughput",
        type=float,
        metavar="TOKENS_PER_S",
        help="measured output tokens/s of one instance (default: the shipped table)",
    )
    capacity.add_argument(
        "--swap-headroom",
        type=float,
        default=0.2,
        help="share of each shared instance kept free for adapter swaps and bursts (default: 0.2)",
    )
    capacity.add_argument(
        "--min-instances", type=int, default=2, help="smallest shared fleet (default: 2, so one failure is not an outage)"
    )
    capacity.add_argument(
        "--shared-instances", type=int, help="price this fixed shared fleet instead of the one capacity asks for"
    )
    capacity.add_argument(
        "--cell-cap",
        type=int,
        metavar="ADAPTERS",
        help="also plan cells: independent endpoints of at most ADAPTERS adapters each, priced against one endpoint",
    )


def _add_memory_options(plan: argparse.ArgumentParser) -> None:
    """The base model's shapes, the dtype, the LoRA slots and cache, vLLM's memory settings."""
    memory = plan.add_argument_group("memory")
    memory.add_argument(
        "--num-layers",
        type=int,
        help="decoder layers of the base (num_hidden_layers); needed unless local adapters or --base-model-dir show it",
    )
    memory.add_argument("--base-model-dir", type=Path, help="read exact module shapes and counts from this local model directory")
    memory.add_argument(
        "--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16", help="model and LoRA dtype (default: bfloat16)"
    )
    memory.add_argument("--max-loras", type=int, help="GPU slots to check (default: the manifest's)")
    memory.add_argument("--max-cpu-loras", type=int, help="host cache size to check (default: the manifest's)")
    memory.add_argument(
        "--max-model-len", type=int, default=8192, help="context length vLLM must hold one sequence of (default: 8192)"
    )
    memory.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's share of GPU memory (default: 0.9)")
    memory.add_argument(
        "--host-reserve-gib",
        type=float,
        default=8.0,
        help="host memory kept for the OS, agents and server processes (default: 8)",
    )
    memory.add_argument("--active-adapters", type=int, help="adapters in use at once (default: tenants with traffic)")


def _collect(problems: list[Problem], step: Callable[[], T]) -> T | None:
    try:
        return step()
    except ConfigurationError as error:
        problems.extend(error.problems)
        return None


FLOAT_FLAGS = (
    "--price-per-hour",
    "--hours",
    "--requests-per-minute",
    "--peak-factor",
    "--throughput",
    "--swap-headroom",
    "--gpu-memory-utilization",
    "--host-reserve-gib",
    "--zipf",
)
"""argparse's float() reads "nan" and "inf": each is refused by name before any arithmetic."""


def _check_ranges(args: argparse.Namespace) -> list[Problem]:
    unusable = [
        Problem("plan", flag, f"must be a finite number, got {value}")
        for flag in FLOAT_FLAGS
        if (value := getattr(args, flag[2:].replace("-", "_"))) is not None and not math.isfinite(value)
    ]
    checks = [
        ("--hours", args.hours, args.hours > 0, "> 0"),
        ("--swap-headroom", args.swap_headroom, 0 <= args.swap_headroom < 1, "in [0, 1)"),
        ("--min-instances", args.min_instances, args.min_instances >= 1, ">= 1"),
        ("--gpu-memory-utilization", args.gpu_memory_utilization, 0 < args.gpu_memory_utilization <= 1, "in (0, 1]"),
        ("--max-model-len", args.max_model_len, args.max_model_len >= 1, ">= 1"),
        ("--host-reserve-gib", args.host_reserve_gib, args.host_reserve_gib >= 0, ">= 0"),
    ]
    for name, value in (
        ("--throughput", args.throughput),
        ("--shared-instances", args.shared_instances),
        ("--num-layers", args.num_layers),
        ("--max-loras", args.max_loras),
        ("--max-cpu-loras", args.max_cpu_loras),
        ("--active-adapters", args.active_adapters),
        ("--cell-cap", args.cell_cap),
    ):
        if value is not None:
            checks.append((name, value, value > 0, "> 0"))
    return (
        unusable
        + _chart_problems(args.chart)
        + [
            Problem("plan", name, f"must be {rule}, got {value:g}")
            for name, value, ok, rule in checks
            if not ok and math.isfinite(value)  # a NaN fails every comparison: it is named once, above
        ]
    )


def _chart_problems(chart: Path | None) -> list[Problem]:
    """Where the chart goes is checked before anything is planned, not after the table is printed."""
    if chart is None:
        return []
    if chart.is_dir():
        return [Problem("plan", "--chart", f"{chart} is a folder; name the PNG file to write, e.g. {chart / 'plan.png'}")]
    if not chart.parent.is_dir():
        return [Problem("plan", "--chart", f"the folder {chart.parent} does not exist; create it or write the chart elsewhere")]
    return []


MAX_ZIPF_EXPONENT = 10.0


def _parse_ranks(spec: str) -> list[int]:
    """``16x10,64`` -> ten 16s and one 64."""
    ranks: list[int] = []
    for part in spec.split(","):
        rank, _, count = part.strip().partition("x")
        ranks += [int(rank)] * (int(count) if count else 1)
    return ranks


def _what_if_lora_problems(args: argparse.Namespace) -> list[Problem]:
    found = []
    if args.ranks is not None:
        if args.tenants is None:
            found.append(
                Problem(
                    "plan", "--ranks", "sets the what-if tenants' ranks: use it with --tenants (a manifest's rows have their own)"
                )
            )
        try:
            ranks = _parse_ranks(args.ranks)
        except ValueError:
            found.append(Problem("plan", "--ranks", f"must be RANK[xCOUNT],... (e.g. 16x10,64), got {args.ranks!r}"))
        else:
            from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS

            if args.tenants is not None and len(ranks) != args.tenants:
                found.append(
                    Problem("plan", "--ranks", f"gives {len(ranks)} rank(s) for --tenants {args.tenants}: give one per tenant")
                )
            bad = sorted({r for r in ranks if not 1 <= r <= ALLOWED_MAX_LORA_RANKS[-1]})
            if bad:
                found.append(Problem("plan", "--ranks", f"ranks must be from 1 to {ALLOWED_MAX_LORA_RANKS[-1]}, got {bad}"))
    if args.zipf is not None:
        if args.tenants is None:
            found.append(
                Problem(
                    "plan",
                    "--zipf",
                    "skews the what-if tenants: use it with --tenants (a manifest's rows have their own traffic)",
                )
            )
        if math.isfinite(args.zipf) and not 0 <= args.zipf <= MAX_ZIPF_EXPONENT:  # NaN, inf: named with the float flags
            found.append(Problem("plan", "--zipf", f"must be from 0 to {MAX_ZIPF_EXPONENT:g}, got {args.zipf}"))
    return found


def _lora_tenants(args: argparse.Namespace, tenants: Sequence[TenantTraffic], manifest_plan: ManifestPlan) -> list[TenantLora]:
    """Each tenant's rank, targets and request rate, for the GPU LoRA plan: the manifest's rows (their
    adapters' own ranks and targets), or the what-if's (--ranks, --zipf)."""
    from cdk_adapters.planner.endpoint_plan import manifest_lora_tenants, what_if_lora_tenants

    if args.tenants is None:
        return manifest_lora_tenants(tenants, manifest_plan)
    ranks = _parse_ranks(args.ranks) if args.ranks else None
    return what_if_lora_tenants(tenants, default_rank=manifest_plan.max_lora_rank, ranks=ranks, zipf=args.zipf)


def _pool_flag_problems(args: argparse.Namespace, names: list[str]) -> list[Problem]:
    """Instance pools: 1 to 5 types, each once; one --price-per-hour cannot price several types."""
    found = []
    if len(names) > 5:
        found.append(
            Problem("plan", "--instance-type", f"is given {len(names)} times; an endpoint takes at most 5 instance pools")
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        found.append(Problem("plan", "--instance-type", f"names {', '.join(repeated)} more than once; each pool once"))
    if len(set(names)) > 1 and args.price_per_hour is not None:
        found.append(
            Problem("plan", "--price-per-hour", "prices one instance type; for pools use the shipped table or --price-file")
        )
    return found


def _cache_smaller_than_slots(args: argparse.Namespace, max_loras: int, max_cpu_loras: int, manifest: Path) -> Problem:
    """vLLM refuses max_cpu_loras < max_loras; say where each value came from and what to pass."""
    loras_from = "--max-loras" if args.max_loras else f"serving.max_loras in {manifest}"
    cache_from = "--max-cpu-loras" if args.max_cpu_loras else f"serving.max_cpu_loras in {manifest}"
    advice = f"pass --max-cpu-loras {max_loras} or more" + (
        f", or --max-loras {max_cpu_loras} or less" if args.max_cpu_loras else ""
    )
    return Problem(
        "plan",
        "--max-loras" if args.max_loras else "--max-cpu-loras",
        f"max_loras {max_loras} ({loras_from}) is more than max_cpu_loras {max_cpu_loras} ({cache_from}): the host "
        f"cache holds every GPU-resident adapter, so vLLM refuses it; {advice}",
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.planner.endpoint_plan import EndpointPlanner

    manifest_plan, pools, tenants, base = _plan_inputs(args)
    planner = EndpointPlanner.create(manifest_plan, base, tenants, _lora_tenants(args, tenants, manifest_plan), _settings(args))
    if planner.cache_smaller_than_slots:
        raise Failure(
            [_cache_smaller_than_slots(args, planner.max_loras, planner.max_cpu_loras, manifest_plan.loaded.path)],
            "1 problem(s) found; nothing was planned",
        )
    reports = [planner.plan(instance, price) for instance, price in pools]
    _write_plan(reports, args.json, out)
    if args.chart is not None:
        _write_chart(args.chart, tenants, reports[0], err)
    _refuse_unfit(reports)


def _settings(args: argparse.Namespace) -> PlanSettings:
    from cdk_adapters.planner.endpoint_plan import PlanSettings

    return PlanSettings(
        hours=args.hours,
        swap_headroom=args.swap_headroom,
        min_instances=args.min_instances,
        shared_instances=args.shared_instances,
        throughput=args.throughput,
        dtype=args.dtype,
        max_loras=args.max_loras,
        max_cpu_loras=args.max_cpu_loras,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        host_reserve_gib=args.host_reserve_gib,
        active_adapters=args.active_adapters,
        cell_cap=args.cell_cap,
    )


def _plan_inputs(
    args: argparse.Namespace,
) -> tuple[ManifestPlan, list[tuple[GpuInstanceType, InstancePrice]], list[TenantTraffic], BaseModelShapes]:
    """The manifest's plan, each pool's instance type and price, the tenants and the base model's shapes;
    every problem with the arguments and these inputs raised together, before anything is planned."""
    from cdk_adapters.manifest import plan_manifest_file
    from cdk_adapters.planner.manifest_inputs import base_shapes

    problems = _check_ranges(args) + _what_if_lora_problems(args)
    try:
        manifest_plan = plan_manifest_file(manifest_path(args.manifest))
    except ConfigurationError as error:
        raise Failure(list(error.problems) + problems, f"{error.heading}: nothing was planned") from None
    names = args.instance_type or [DEFAULT_INSTANCE_TYPE]
    problems += _pool_flag_problems(args, names)
    instances, prices = _pools(args, names, problems)
    tenants = _collect(problems, lambda: _tenants(args, manifest_plan))
    base = _collect(problems, lambda: base_shapes(manifest_plan, num_layers=args.num_layers, base_model_dir=args.base_model_dir))
    if problems or len(instances) != len(set(names)) or None in prices or tenants is None or base is None:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was planned")
    return manifest_plan, [(i, p) for i, p in zip(instances, prices) if p is not None], tenants, base


def _pools(
    args: argparse.Namespace, names: list[str], problems: list[Problem]
) -> tuple[list[GpuInstanceType], list[InstancePrice | None]]:
    """Each instance type named (once) and its price; what is unknown or unpriced added to `problems`."""
    from cdk_adapters.hosting.instance_types import UnknownInstanceType, require_instance_type
    from cdk_adapters.planner.prices import resolve_price

    instances, prices = [], []
    for name in dict.fromkeys(names):
        try:
            instances.append(require_instance_type(name))
        except UnknownInstanceType as error:
            problems.append(Problem(f"instance type '{name}'", "--instance-type", str(error)))
        prices.append(
            _collect(
                problems,
                functools.partial(resolve_price, name, price_per_hour=args.price_per_hour, price_file=args.price_file),
            )
        )
    return instances, prices


def _tenants(args: argparse.Namespace, manifest_plan: ManifestPlan) -> list[TenantTraffic]:
    """The what-if's identical tenants (--tenants and friends), else the manifest rows' traffic: fields."""
    from cdk_adapters.planner.traffic import identical_tenants, manifest_tenants

    if args.tenants is not None:
        return identical_tenants(
            args.tenants,
            requests_per_minute=args.requests_per_minute,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            peak_factor=args.peak_factor,
        )
    return manifest_tenants(manifest_plan.manifest.adapters)


def _write_plan(reports: list[PlanReport], as_json: bool, out: TextIO) -> None:
    """One instance type's plan, or the pools' plan, as a table or JSON."""
    from cdk_adapters.planner.pools import PoolsPlan
    from cdk_adapters.planner.report import to_json, to_table

    if len(reports) == 1:
        [report] = reports
        out.write(json.dumps(to_json(report), indent=2) + "\n" if as_json else to_table(report))
    else:
        pools = PoolsPlan(tuple(reports))
        out.write(json.dumps(pools.to_json(), indent=2) + "\n" if as_json else pools.to_table())


def _write_chart(chart: Path, tenants: Sequence[TenantTraffic], report: PlanReport, err: TextIO) -> None:
    """The monthly cost against tenant count, for the first pool's plan (``--chart``)."""
    from cdk_adapters.planner import cost as cost_model
    from cdk_adapters.planner.chart import render_cost_chart

    try:
        path = render_cost_chart(
            chart,
            cost_model.average_tenant(tenants),
            report.inputs,
            tenants=len(tenants),
            instance_type=report.instance.name,
        )
    except OSError as error:
        raise Failure(
            [Problem(PROG, "--chart", f"cannot write {chart}: {error.strerror or error}")], "no chart was written"
        ) from None
    except ImportError as error:
        from cdk_adapters.local.stack import extra_install_command

        raise Failure(
            [Problem(PROG, "--chart", f"needs matplotlib ({error.name} is not installed): {extra_install_command('chart')}")],
            "no chart was written",
        ) from None
    err.write(f"{PROG}: wrote {path}\n")


def _refuse_unfit(reports: list[PlanReport]) -> None:
    """Every instance type the adapters do not fit in memory on: its problems, and status 1."""
    unfit = [r for r in reports if r.memory is not None and r.memory.problems]
    if unfit:
        where = ", ".join(r.instance.name for r in unfit)
        raise Failure(
            [problem for r in unfit if r.memory is not None for problem in r.memory.problems],
            f"the adapters do not fit on {where}",
        )
