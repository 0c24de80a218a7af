"""``cdk-adapters plan``: cost, capacity and LoRA memory for the manifest's fleet (docs/planner.md)."""

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
    from cdk_adapters.gate import AdapterFacts
    from cdk_adapters.hosting.instance_types import GpuInstanceType
    from cdk_adapters.manifest.plan import ManifestPlan
    from cdk_adapters.planner.gpu_lora import TenantLora
    from cdk_adapters.planner.prices import InstancePrice
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
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--chart", type=Path, metavar="PNG", help="also write a chart of monthly cost against tenant count")
    plan.set_defaults(handler=run)


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
    from cdk_adapters.planner.gpu_lora import TenantLora
    from cdk_adapters.planner.swaps import zipf_rates

    if args.tenants is None:
        facts = {adapter.name: adapter.facts for adapter in manifest_plan.adapters}
        return [
            TenantLora(
                t.name,
                _gated_max_rank(facts[t.name]) if t.name in facts else manifest_plan.max_lora_rank,
                t.requests_per_minute,
                tuple(facts[t.name].target_modules) if t.name in facts else None,
            )
            for t in tenants
        ]
    ranks = _parse_ranks(args.ranks) if args.ranks else [manifest_plan.max_lora_rank] * len(tenants)
    total = sum(t.requests_per_minute for t in tenants)
    rates = (
        list(zipf_rates(len(tenants), args.zipf, total).values())
        if args.zipf is not None
        else [t.requests_per_minute for t in tenants]
    )
    return [TenantLora(t.name, rank, rate) for t, rank, rate in zip(tenants, ranks, rates)]


def _gated_max_rank(facts: AdapterFacts) -> int:
    """A gated adapter's highest rank: the gate refuses an adapter without a positive ``r``, so it is known."""
    assert facts.max_rank is not None
    return facts.max_rank


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
    from cdk_adapters.gate.ranks import smallest_allowed_max_lora_rank
    from cdk_adapters.hosting.instance_types import UnknownInstanceType, require_instance_type
    from cdk_adapters.manifest import plan_manifest_file
    from cdk_adapters.planner import cost as cost_model
    from cdk_adapters.planner.fit import GIB, MemoryInputs, plan_memory
    from cdk_adapters.planner.gpu_lora import plan_gpu_lora
    from cdk_adapters.planner.lora_memory import gpu_bytes_per_slot
    from cdk_adapters.planner.manifest_inputs import adapter_sizes, base_shapes
    from cdk_adapters.planner.pools import PoolsPlan
    from cdk_adapters.planner.prices import resolve_price
    from cdk_adapters.planner.recommendation import recommend
    from cdk_adapters.planner.report import PlanReport, to_json, to_table
    from cdk_adapters.planner.throughput import given_throughput, instance_throughput
    from cdk_adapters.planner.traffic import identical_tenants, manifest_tenants

    problems = _check_ranges(args) + _what_if_lora_problems(args)
    try:
        manifest_plan = plan_manifest_file(manifest_path(args.manifest))
    except ConfigurationError as error:
        raise Failure(list(error.problems) + problems, f"{error.heading}: nothing was planned") from None
    names = args.instance_type or [DEFAULT_INSTANCE_TYPE]
    problems += _pool_flag_problems(args, names)
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
    if args.tenants is not None:
        tenants = _collect(
            problems,
            lambda: identical_tenants(
                args.tenants,
                requests_per_minute=args.requests_per_minute,
                prompt_tokens=args.prompt_tokens,
                output_tokens=args.output_tokens,
                peak_factor=args.peak_factor,
            ),
        )
    else:
        tenants = _collect(problems, lambda: manifest_tenants(manifest_plan.manifest.adapters))
    base = _collect(problems, lambda: base_shapes(manifest_plan, num_layers=args.num_layers, base_model_dir=args.base_model_dir))
    if problems or len(instances) != len(set(names)) or None in prices or tenants is None or base is None:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was planned")

    lora_tenants = _lora_tenants(args, tenants, manifest_plan)
    # The slots are sized for the largest rank served: the manifest's, or the what-if's --ranks.
    lora_rank = max(manifest_plan.max_lora_rank, smallest_allowed_max_lora_rank(t.rank for t in lora_tenants))
    max_loras = args.max_loras or manifest_plan.max_loras
    max_cpu_loras = args.max_cpu_loras or manifest_plan.max_cpu_loras or max_loras
    if max_cpu_loras < max_loras:
        raise Failure(
            [_cache_smaller_than_slots(args, max_loras, max_cpu_loras, manifest_plan.loaded.path)],
            "1 problem(s) found; nothing was planned",
        )

    def plan_one(instance: GpuInstanceType, price: InstancePrice | None) -> PlanReport:
        assert price is not None  # None in prices raised above
        throughput = (
            given_throughput(instance.name, args.throughput)
            if args.throughput is not None
            else instance_throughput(instance, base.parameters)
        )
        inputs = cost_model.CostInputs(
            price_per_hour=price.usd_per_hour,
            throughput=throughput.tokens_per_second,
            hours=args.hours,
            swap_headroom=args.swap_headroom,
            min_instances=args.min_instances,
            shared_instances=args.shared_instances,
        )
        comparison = cost_model.compare(tenants, inputs)
        memory = plan_memory(
            MemoryInputs(
                instance=instance,
                dtype=args.dtype,
                base_weight_bytes=base.weight_bytes(args.dtype),
                slot_bytes=gpu_bytes_per_slot(base, lora_rank, args.dtype),
                kv_bytes_per_token=base.kv_bytes_per_token(args.dtype, manifest_plan.manifest.base_model.hidden_size),
                max_loras=max_loras,
                max_cpu_loras=max_cpu_loras,
                max_lora_rank=lora_rank,
                adapters=adapter_sizes(manifest_plan, base, args.dtype),
                active_adapters=args.active_adapters or sum(1 for t in tenants if t.requests_per_minute > 0),
                gpu_memory_utilization=args.gpu_memory_utilization,
                max_model_len=args.max_model_len,
                host_reserve_gib=args.host_reserve_gib,
            )
        )
        return PlanReport(
            instance=instance,
            price=price,
            throughput=throughput,
            inputs=inputs,
            tenants=tuple(tenants),
            cost=comparison,
            memory=memory,
            recommendation=recommend(comparison, memory, instance.name, min_instances=args.min_instances),
            base_source=base.source,
            gpu_lora=plan_gpu_lora(
                lora_tenants,
                gpu_model=instance.gpu_model,
                max_loras=max_loras,
                max_cpu_loras=max_cpu_loras,
                base_weight_gib=base.weight_bytes(args.dtype) / GIB,
            ),
        )

    reports = [plan_one(instance, price) for instance, price in zip(instances, prices)]
    if len(reports) == 1:
        [report] = reports
        out.write(json.dumps(to_json(report), indent=2) + "\n" if args.json else to_table(report))
    else:
        pools = PoolsPlan(tuple(reports))
        out.write(json.dumps(pools.to_json(), indent=2) + "\n" if args.json else pools.to_table())
    report = reports[0]
    if args.chart is not None:
        from cdk_adapters.planner.chart import render_cost_chart

        try:
            path = render_cost_chart(
                args.chart,
                cost_model.average_tenant(tenants),
                report.inputs,
                tenants=len(tenants),
                instance_type=report.instance.name,
            )
        except OSError as error:
            raise Failure(
                [Problem(PROG, "--chart", f"cannot write {args.chart}: {error.strerror or error}")], "no chart was written"
            ) from None
        except ImportError as error:
            from cdk_adapters.local.stack import extra_install_command

            raise Failure(
                [Problem(PROG, "--chart", f"needs matplotlib ({error.name} is not installed): {extra_install_command('chart')}")],
                "no chart was written",
            ) from None
        err.write(f"{PROG}: wrote {path}\n")
    unfit = [r for r in reports if r.memory is not None and r.memory.problems]
    if unfit:
        where = ", ".join(r.instance.name for r in unfit)
        raise Failure(
            [problem for r in unfit if r.memory is not None for problem in r.memory.problems],
            f"the adapters do not fit on {where}",
        )
