"""``cdk-adapters promote ALIAS --to NEW --from OLD --weights N,O``: move an alias's traffic, gated.

It rewrites one line of the manifest, the alias's row, and nothing else: not the lock file, not
another row, not a comment (the edited file is parsed again and must differ from the original in
that alias's value alone, or nothing is written). Giving NEW more traffic than it has needs the
last ``cdk-adapters eval`` of NEW against OLD on the golden set given (``--golden``) to have
passed, as recorded beside the manifest; a missing or failed evaluation refuses the move.
Rollback is the same command with the weights turned back toward OLD (NEW's share going down),
and needs no evaluation: getting back to the version that served before must never wait.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from pathlib import Path
from typing import Any, TextIO

from cdk_adapters.cli.common import Failure, UsageError, manifest_path
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "promote",
        help="move an alias's weights to a new adapter version, only after it passed eval (rollback needs none)",
        description=(
            "Set ALIAS's weights to NEW and OLD (--weights NEW,OLD, percent, summing to 100; 0 drops that "
            "version) in the manifest, editing that row only. Raising NEW's share needs a passed "
            "'cdk-adapters eval GOLDEN NEW OLD --reference OLD' recorded beside the manifest for that "
            "golden set; lowering it (a rollback) needs none."
        ),
    )
    command.add_argument("alias", metavar="ALIAS")
    command.add_argument("--to", required=True, metavar="NEW", dest="new", help="the adapter version taking traffic")
    command.add_argument("--from", required=True, metavar="OLD", dest="old", help="the version it takes traffic from")
    command.add_argument("--weights", required=True, metavar="NEW,OLD", help="percent for NEW and OLD, e.g. 90,10")
    command.add_argument(
        "--golden", type=Path, metavar="FILE", help="the golden set NEW was evaluated on (required unless rolling back)"
    )
    command.add_argument("--manifest", type=Path, help="manifest to edit (default: manifests/example.yaml)")
    command.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import yaml

    from cdk_adapters.contract.adapter_names import adapter_name_key

    new_weight, old_weight = _weights(args.weights)
    if adapter_name_key(args.new) == adapter_name_key(args.old):
        raise UsageError("--to", "NEW and OLD must be different adapters")
    path = manifest_path(args.manifest)
    text = path.read_text()
    document = yaml.safe_load(text)
    current = _current_targets(args, document, path)
    had = sum(weight for name, weight in current.items() if adapter_name_key(name) == adapter_name_key(args.new))
    rollback = new_weight <= had
    if not rollback:
        _require_passed_evaluation(args, path, had, new_weight)
    targets = {args.new: new_weight, args.old: old_weight}
    edited, old_line, new_line = edit_alias_row(text, args.alias, {k: v for k, v in targets.items() if v})
    _check_only_alias_changed(document, yaml.safe_load(edited), args.alias, path)
    temporary = path.with_name(path.name + ".promote.tmp")
    temporary.write_text(edited)
    os.replace(temporary, path)
    out.write(f"- {old_line.strip()}\n+ {new_line.strip()}\n")
    how = "rollback, no evaluation needed" if rollback else f"evaluation of {args.new} against {args.old} passed"
    err.write(f"cdk-adapters: {path}: alias {args.alias} now {_flow(targets)} ({how}); deploy to apply\n")


def _current_targets(args: argparse.Namespace, document: Any, path: Path) -> dict[str, int]:
    """The alias's weights now; every way the alias, NEW or OLD is not the manifest's raised together."""
    from cdk_adapters.contract.adapter_names import adapter_name_key

    subject = f"alias '{args.alias}'"
    field = f"aliases.{args.alias}"
    aliases = document.get("aliases") if isinstance(document, dict) else None
    current = _targets(aliases.get(args.alias)) if isinstance(aliases, dict) and args.alias in aliases else None
    problems: list[Problem] = []
    if current is None:
        problems.append(Problem(subject, field, f"is not an alias of {path} (promote moves an existing alias)"))
    names = {
        adapter_name_key(row["name"]): row["name"]
        for row in (document.get("adapters") or [] if isinstance(document, dict) else [])
        if isinstance(row, dict) and isinstance(row.get("name"), str)
    }
    for option, name in (("--to", args.new), ("--from", args.old)):
        if adapter_name_key(name) not in names:
            problems.append(Problem(subject, option, f"{name!r} is not an adapter row of {path}"))
    if current is not None:
        others = [
            name for name in current if adapter_name_key(name) not in {adapter_name_key(args.new), adapter_name_key(args.old)}
        ]
        if others:
            problems.append(
                Problem(
                    subject,
                    field,
                    f"also sends traffic to {', '.join(others)}; promote moves traffic "
                    "between two versions, so edit this alias by hand",
                )
            )
    if problems:
        raise Failure(problems, "nothing was changed")
    assert current is not None
    return current


def _require_passed_evaluation(args: argparse.Namespace, path: Path, had: int, new_weight: int) -> None:
    """Raising NEW's share from `had` to `new_weight` needs its last evaluation against OLD on the
    golden set (recorded beside the manifest) to have passed; otherwise the promotion is refused."""
    from cdk_adapters.evaluation.record import last_evaluation, record_path_for

    subject = f"alias '{args.alias}'"
    if args.golden is None:
        raise Failure(
            [
                Problem(
                    subject,
                    "--golden",
                    f"raising {args.new}'s share from {had}% to {new_weight}% needs the golden set it was evaluated on",
                )
            ],
            "nothing was changed",
        )
    digest = _golden_digest(args.golden)
    record = record_path_for(path)
    try:
        evaluation = last_evaluation(record, digest=digest, candidate=args.new, reference=args.old)
    except ValueError as error:
        raise Failure([Problem(f"evaluation record '{record}'", "(file)", str(error))], "nothing was changed") from None
    again = f"run: cdk-adapters eval {args.golden} {args.new} {args.old} --reference {args.old} --manifest {path}"
    if evaluation is None:
        raise Failure(
            [
                Problem(
                    subject,
                    "--to",
                    f"{args.new} has no evaluation against {args.old} on {args.golden} ({digest[:19]}...) in {record}; {again}",
                )
            ],
            "promotion refused; nothing was changed",
        )
    if not evaluation.passed:
        lost = ", ".join(
            f"{name} {v.get('candidate', 0):.2f} < {v.get('reference', 0):.2f}" for name, v in evaluation.worse.items()
        )
        raise Failure(
            [
                Problem(
                    subject,
                    "--to",
                    f"the last evaluation of {args.new} against {args.old} on {args.golden} "
                    f"({evaluation.evaluated_at}) failed: {lost}; fix the adapter, then {again}",
                )
            ],
            "promotion refused; nothing was changed",
        )


def _golden_digest(golden: Path) -> str:
    """The golden set's ``sha256:`` digest, as the evaluation record names it."""
    try:
        return "sha256:" + hashlib.sha256(golden.read_bytes()).hexdigest()
    except OSError as error:
        raise Failure(
            [Problem(f"golden set '{golden}'", "--golden", f"cannot be read: {error.strerror or error}")],
            "nothing was changed",
        ) from None


def _weights(given: str) -> tuple[int, int]:
    parts = given.split(",")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 2 or any(not 0 <= value <= 100 for value in values) or sum(values) != 100:
        raise UsageError("--weights", f"must be two percentages NEW,OLD from 0 to 100 summing to 100 (e.g. 90,10), got {given!r}")
    return values[0], values[1]


def _targets(value: Any) -> dict[str, int] | None:
    if isinstance(value, str):
        return {value: 100}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return None


def _flow(targets: dict[str, int]) -> str:
    kept = {name: weight for name, weight in targets.items() if weight}
    if len(kept) == 1:
        return next(iter(kept))
    return "{" + ", ".join(f"{name}: {weight}" for name, weight in kept.items()) + "}"


_ALIASES_LINE = re.compile(r"^aliases:\s*(#.*)?$")


def edit_alias_row(text: str, alias: str, targets: dict[str, int]) -> tuple[str, str, str]:
    """`text` with `alias`'s value replaced by `targets` in flow style, the row's indentation and
    trailing comment kept; a block-style value (lines indented under the key) becomes that one line.
    Returns the new text, the row's old first line and its new line."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _ALIASES_LINE.match(line.rstrip("\n"))), None)
    if start is None:
        raise Failure([Problem(f"alias '{alias}'", "aliases", "no top-level 'aliases:' block to edit")], "nothing was changed")
    key = re.compile(
        rf"^(?P<indent>[ ]+)(?P<key>{re.escape(alias)}|'{re.escape(alias)}'|\"{re.escape(alias)}\")\s*:(?P<value>[^#\n]*)(?P<comment>#.*)?$"
    )
    for index in range(start + 1, len(lines)):
        line = lines[index].rstrip("\n")
        if line and not line.startswith((" ", "#")):
            break  # the next top-level key: the block ended
        match = key.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        end = index + 1
        if not match["value"].strip():  # a block-style value: the more indented lines below are part of it
            while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip(" ")) > indent):
                end += 1
            while end > index + 1 and not lines[end - 1].strip():  # blank lines after the block stay
                end -= 1
        comment = f"  {match['comment']}" if match["comment"] else ""
        newline = "\n" if lines[index].endswith("\n") else ""
        replacement = f"{match['indent']}{match['key']}: {_flow(targets)}{comment}{newline}"
        old_line = "".join(lines[index:end]).rstrip("\n")
        return "".join([*lines[:index], replacement, *lines[end:]]), old_line, replacement.rstrip("\n")
    raise Failure(
        [Problem(f"alias '{alias}'", f"aliases.{alias}", "its row was not found in the aliases block")], "nothing was changed"
    )


def _check_only_alias_changed(before: Any, after: Any, alias: str, path: Path) -> None:
    """The edited manifest equals the original but for the alias's value, or nothing is written."""
    expected = dict(before)
    expected_aliases = dict(before["aliases"])
    changed_aliases = dict(after.get("aliases") or {}) if isinstance(after, dict) else {}
    expected_aliases[alias] = changed_aliases.get(alias)
    expected["aliases"] = expected_aliases
    if after != expected:
        raise Failure(
            [
                Problem(
                    f"manifest '{path}'",
                    f"aliases.{alias}",
                    "could not be edited on its own line without "
                    "changing something else (unusual layout); edit the alias by hand",
                )
            ],
            "nothing was changed",
        )
