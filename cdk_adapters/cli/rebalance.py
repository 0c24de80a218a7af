"""``cdk-adapters rebalance``: move recorded adapter families to the cells the hash gives them now,
deliberately, and say which (the placement file pins every other family where it is)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import Failure, UsageError, read_placement
from cdk_adapters.contract.cell_placement import cell_names, rebalance
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "rebalance",
        help="move adapter families between a service's cells on purpose, and say which",
        description=(
            "Read the placement file (family -> cell), and move each family whose cell the placement hash now "
            "gives elsewhere, e.g. into a cell just added, or out of one removed. Families in a removed cell move "
            "first. Prints one 'family: from -> to' line per move and rewrites the file (--dry-run: writes nothing). "
            "Every move re-creates that family's components in its new cell: review the diff, then deploy."
        ),
    )
    parser.add_argument("--placement", type=Path, required=True, help="the committed placement file (JSON)")
    parser.add_argument("--cells", type=int, required=True, help="the service's cell count after the change")
    parser.add_argument("--limit", type=int, help="move at most this many families (default: every one)")
    parser.add_argument("--dry-run", action="store_true", help="print the moves; change nothing")
    parser.add_argument("--manifest", type=Path, help="a manifest whose rows' cell: pins keep (or move) their families there")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    if args.cells < 1:
        raise UsageError("--cells", f"must be at least 1, got {args.cells}")
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit", f"must be 0 or more, got {args.limit}")
    path: Path = args.placement
    record = read_placement(path)
    cells = cell_names(args.cells)
    pins = {}
    if args.manifest is not None:
        from cdk_adapters.manifest import load_manifest

        pins = load_manifest(args.manifest).manifest.cell_pins
        unknown = sorted({cell for cell in pins.values() if cell not in cells})
        if unknown:
            raise Failure(
                [
                    Problem(str(args.manifest), "cell", f"pins to {cell!r}, which is not one of the {args.cells} cells")
                    for cell in unknown
                ],
                "cannot rebalance",
            )
    moved, moves = rebalance(record, cells, limit=args.limit, pins=pins)
    for move in moves:
        out.write(f"{move}\n")
    left = [family for family, cell in moved.families.items() if cell not in cells]
    if left:
        err.write(f"{len(left)} families stay in removed cells (raise --limit): {', '.join(sorted(left)[:5])}\n")
    if not args.dry_run and moves:
        path.write_text(moved.to_json(), encoding="utf-8")
    verb = "would move" if args.dry_run else "moved"
    err.write(f"{verb} {len(moves)} of {len(record.families)} families onto {args.cells} cells\n")
