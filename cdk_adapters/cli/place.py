"""``cdk-adapters place``: write the placement file a service of cells commits, like the lock file.

It places every manifest row with the rule the service uses at synth (`cell_placement.place`): a
row's ``cell:`` pin, else the family's recorded cell, else the hash, and records each new family's
cell. Recorded families keep their cell, so once committed, adding a cell moves no family; move
them on purpose with ``cdk-adapters rebalance``. ``--check`` changes nothing and fails when the
file is not up to date (for CI).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import Failure, UsageError, manifest_path, read_placement, write_or_check_committed
from cdk_adapters.contract.cell_placement import cell_names, place


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "place",
        help="record which cell each manifest row's family lives in (the placement file a service commits)",
        description=(
            "Place every manifest row on the service's cells (a row's cell: pin, else the family's recorded cell, "
            "else the placement hash), print each newly placed family, and write the placement file. Every problem "
            "is listed and nothing is written: a pin to a cell the service lacks, a family pinned to two cells, a "
            "family recorded in a removed cell, a cell over --cell-cap, an alias spanning cells."
        ),
        epilog="Exit status: 0 written (or up to date); 1 a placement problem, or --check found the file out of date; 2 usage error.",
    )
    parser.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    parser.add_argument("--cells", type=int, required=True, help="the service's cell count")
    parser.add_argument("--placement", type=Path, required=True, help="the placement file (created when missing)")
    parser.add_argument("--cell-cap", type=int, help="most adapters one cell may hold (default: no cap)")
    parser.add_argument(
        "--hashed-over", type=int, help="new families hash over the first N cells, as the service's hashed_over (default: all)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; fail when the file is not up to date")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.manifest import load_manifest

    if args.cells < 1:
        raise UsageError("--cells", f"must be at least 1, got {args.cells}")
    if args.cell_cap is not None and args.cell_cap < 1:
        raise UsageError("--cell-cap", f"must be at least 1, got {args.cell_cap}")
    if args.hashed_over is not None and not 1 <= args.hashed_over <= args.cells:
        raise UsageError("--hashed-over", f"must be 1 to --cells ({args.cells}), got {args.hashed_over}")
    manifest = load_manifest(manifest_path(args.manifest)).manifest
    path: Path = args.placement
    recorded = read_placement(path, missing_ok=True)
    placed, problems = place(
        [row.name for row in manifest.adapters],
        cell_names(args.cells),
        record=recorded,
        pins=manifest.cell_pins,
        cell_cap=args.cell_cap,
        aliases=manifest.alias_weights,
        subject=f"the service of {args.cells} cell(s)",
        hashed_over=args.hashed_over,
    )
    if placed is None:
        raise Failure(problems, f"{len(problems)} placement problem(s); {path} is unchanged")
    added = {family: cell for family, cell in placed.record.families.items() if family not in recorded.families}
    moved = {f: cell for f, cell in placed.record.families.items() if f in recorded.families and recorded.families[f] != cell}
    for family, cell in added.items():
        out.write(f"{family}: {cell}\n")
    for family, cell in moved.items():
        out.write(f"{family}: {recorded.families[family]} -> {cell} (pinned)\n")
    stale = f"{len(added)} family(ies) not recorded yet, {len(moved)} moved by a pin" if added or moved else ""
    if write_or_check_committed(
        path,
        placed.record.to_json,
        stale=stale,
        check=args.check,
        what="placement file",
        field="placement",
        command="place",
        up_to_date=f"{len(recorded.families)} families",
        err=err,
    ):
        families = len(placed.record.families)
        err.write(f"recorded {len(added)} new family(ies) and {len(moved)} moved by a pin in {path} ({families} in all)\n")
