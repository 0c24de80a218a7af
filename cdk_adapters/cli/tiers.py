"""``cdk-adapters tiers``: write the tier record a manifest with rank tiers commits, like the lock file.

It places every row as synth does (a row's ``tier:``, else the smallest tier holding its rank)
and records each row's base component (``base``, ``base-r64``) in ``<manifest>.tiers.json``. Once
committed, synth refuses a row that a change of the tiers would put on another base component unless the row names its tier
(`cdk_adapters.manifest.tier_record`). ``--check`` changes nothing and fails when the record is not
up to date (for CI).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import manifest_path, write_or_check_committed


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "tiers",
        help="record which base component (rank tier) each manifest row is attached to (the tier record a manifest commits)",
        description=(
            "Gate the manifest, place every row on its rank tier (its tier: pin, else the smallest tier holding its "
            "rank), print each row whose tier is new or changed, and write <manifest>.tiers.json. Every problem is "
            "listed and nothing is written, a row the tiers would move without a tier: pin among them."
        ),
        epilog="Exit status: 0 written (or up to date); 1 a problem, or --check found the record out of date; 2 usage error.",
    )
    parser.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    parser.add_argument("--check", action="store_true", help="write nothing; fail when the record is not up to date")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.endpoint.names import tier_suffix
    from cdk_adapters.manifest import plan_manifest_file
    from cdk_adapters.manifest.tier_record import load_tier_record, tier_record_path_for, tier_record_text

    manifest = manifest_path(args.manifest)
    plan = plan_manifest_file(manifest)
    path = tier_record_path_for(manifest)
    recorded = load_tier_record(path)
    if not plan.tiers:
        err.write(f"{manifest} serves one tier and {path} records none: nothing to record\n")
        return
    first = (plan.tier_ranks or (plan.max_lora_rank,))[0]
    bases = {name: tier_suffix(tier, first_rank=first) for name, tier in plan.tiers.items()}
    changed = {name: base for name, base in bases.items() if recorded.get(name) != base}
    dropped = sorted(set(recorded) - set(plan.tiers))
    for name, base in changed.items():
        was = recorded.get(name)
        out.write(f"{name}: {base}, the rank-{plan.tiers[name]} tier{'' if was is None else f' (was {was})'}\n")
    for name in dropped:
        out.write(f"{name}: no longer in the manifest\n")
    if write_or_check_committed(
        path,
        lambda: tier_record_text(plan.tiers, first),
        stale=f"{len(changed)} row(s) new or moved, {len(dropped)} gone" if changed or dropped else "",
        check=args.check,
        what="tier record",
        field="tiers",
        command="tiers",
        up_to_date=f"{len(recorded)} rows",
        err=err,
    ):
        err.write(f"recorded {len(changed)} new or moved row(s), dropped {len(dropped)}, in {path} ({len(plan.tiers)} in all)\n")
