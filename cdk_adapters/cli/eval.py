"""``cdk-adapters eval GOLDEN TARGET...``: score adapters, aliases and the base model on a golden set.

Through the same `AdapterClient` an application uses, against local mode (``--local URL``) or a
deployed endpoint (``--parameter NAME``, its discovery record). The table goes to stdout (or the
whole result as JSON with ``--json``). With ``--reference T`` every other target is held against T:
exit status 1 when one is worse by more than ``--margin`` on any check, and the verdicts are
written to the evaluation record beside the manifest, which ``cdk-adapters promote`` reads.
``--from-capture FILE`` replays requests the container captured and checks the target answers them
as they were answered then; with ``--min-match RATE`` it exits 1 when a target reproduces a smaller
share of the captured answers (the replay's gate, as ``--reference``/``--margin`` is the golden set's).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError
from cdk_adapters.cli.invoke import DEFAULT_LOCAL_URL
from cdk_adapters.cli.terminal import printable
from cdk_adapters.problems import Problem

if TYPE_CHECKING:
    from cdk_adapters.client import AdapterClient
    from cdk_adapters.evaluation.golden import GoldenSet
    from cdk_adapters.evaluation.replay import Replay
    from cdk_adapters.evaluation.runner import TargetResult, Verdict


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "eval",
        help="score adapters, aliases and the base model on a golden set; gate a candidate on a reference",
        description=(
            "Run every case of GOLDEN (JSONL: prompt or messages, optional image, expected, contains, regex, "
            "json, json_schema, max_tokens, id) on each TARGET (an adapter, an alias, or 'base' for the base "
            "model where the endpoint allows it), and print each target's pass rate per check, latency and "
            "tokens side by side. With --reference, exit 1 when another target is worse than it by more "
            "than --margin, and record the verdicts beside the manifest for 'promote'."
        ),
    )
    command.add_argument("golden", nargs="?", type=Path, metavar="GOLDEN", help="golden set (JSON lines)")
    command.add_argument("targets", nargs="*", metavar="TARGET", help="adapters, aliases, or 'base'")
    command.add_argument(
        "--target",
        action="append",
        default=[],
        dest="more_targets",
        metavar="TARGET",
        help="a target (repeatable; the same as naming it after GOLDEN)",
    )
    command.add_argument(
        "--from-capture",
        type=Path,
        metavar="FILE",
        help="replay captured requests (the container's log, or its capture lines) instead of a golden set: "
        "each answer must equal the captured one",
    )
    where = command.add_mutually_exclusive_group()
    where.add_argument("--local", metavar="URL", help=f"cdk-adapters local at URL (default: {DEFAULT_LOCAL_URL})")
    where.add_argument("--parameter", metavar="NAME", help="SSM parameter holding the endpoint's discovery record")
    command.add_argument("--region", help="AWS region for --parameter (default: your AWS configuration's)")
    command.add_argument(
        "--accept-endpoint",
        action="append",
        metavar="NAME",
        dest="accept_endpoints",
        help="only call this endpoint (repeatable; a trailing '*' makes it a prefix)",
    )
    command.add_argument("--reference", metavar="TARGET", help="the target the others are held against (one of the targets)")
    command.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="how far (0-1) below the reference's pass rate a candidate may fall on any check (default: 0.05)",
    )
    command.add_argument(
        "--min-match",
        type=float,
        metavar="RATE",
        help="with --from-capture: exit 1 when a target reproduces fewer than this share (0-1) of the "
        "captured answers exactly (default: no gate)",
    )
    command.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0, greedy)")
    command.add_argument("--json", action="store_true", help="print the whole result as JSON instead of the table")
    command.add_argument(
        "--manifest",
        type=Path,
        help="manifest whose evaluation record (<name>.eval.json beside it) receives the verdicts "
        "(default: manifests/example.yaml when it exists)",
    )
    command.add_argument("--no-record", action="store_true", help="do not write the evaluation record")
    command.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.evaluation import golden as golden_module
    from cdk_adapters.evaluation import report, runner
    from cdk_adapters.evaluation.replay import match_verdicts

    targets = list(dict.fromkeys([*args.targets, *args.more_targets]))
    if args.from_capture is not None:
        if args.golden is not None:  # argparse gives the first word to GOLDEN
            word = str(args.golden)
            if args.golden.exists() or any(mark in word for mark in "./\\"):  # no adapter name holds these
                raise UsageError(
                    "GOLDEN",
                    f"{word!r} is a file, but --from-capture already gives the cases: replay the capture "
                    "or evaluate the golden set, not both (with --from-capture, the words after eval are targets)",
                )
            targets.insert(0, word)
        replay, problems = _capture_set(args.from_capture)
        golden = replay.golden if replay is not None else None
    else:
        replay = None
        if args.min_match is not None:
            raise UsageError(
                "--min-match", "gates a replay: use it with --from-capture (a golden set is gated with --reference and --margin)"
            )
        if args.golden is None:
            raise UsageError("GOLDEN", "name a golden set file (or --from-capture FILE)")
        golden, problems = golden_module.load_golden(args.golden)
    if not targets:
        raise UsageError("TARGET", "name at least one target (an adapter, an alias, or 'base')")
    if args.reference is not None and args.reference not in targets:
        raise UsageError("--reference", f"{args.reference!r} is not one of the targets ({', '.join(targets)})")
    if args.reference is not None and len(targets) < 2:
        raise UsageError("--reference", "name a candidate besides the reference")
    if not 0 <= args.margin <= 1:
        raise UsageError("--margin", f"must be between 0 and 1, got {args.margin}")
    if args.min_match is not None and not 0 <= args.min_match <= 1:
        raise UsageError("--min-match", f"must be between 0 and 1, got {args.min_match}")
    if problems or golden is None:
        source = args.from_capture or args.golden
        raise Failure(problems, f"{len(problems)} problem(s) in '{source}'; nothing was sent")

    client = _client(args)
    try:
        results = runner.run(client, targets, golden.cases, temperature=args.temperature)
    except runner.TargetUnavailable as unavailable:
        raise Failure(
            [Problem(f"target '{unavailable.target}'", "TARGET", printable(unavailable.reason))],
            "a target is not served by this endpoint; no result was recorded",
        ) from None
    verdicts = runner.compare(results, args.reference, args.margin) if args.reference else []
    matches = match_verdicts(results, args.min_match) if replay is not None and args.min_match is not None else []
    if args.json:
        document = report.document(golden, results, verdicts, temperature=args.temperature)
        if replay is not None:
            document["replay"] = report.replay_document(replay, matches, temperature=args.temperature)
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(printable(report.table(results)) + "\n")
        for line in report.verdict_lines(verdicts):
            out.write(printable(line) + "\n")
        if replay is not None:
            for line in report.replay_lines(replay, matches, temperature=args.temperature):
                out.write(printable(line) + "\n")
    if verdicts and not args.no_record:
        _record(args, err, golden, verdicts, results)
    unmatched = [m for m in matches if not m.passed]
    if unmatched:
        raise Failure(
            [Problem(f"target '{m.target}'", "--min-match", m.line()) for m in unmatched],
            f"{len(unmatched)} target(s) reproduce fewer than {args.min_match:g} of the captured answers",
        )
    failed = [v for v in verdicts if not v.passed]
    if failed:
        raise Failure(
            [Problem(f"target '{v.candidate}'", "--reference", line) for v, line in zip(failed, report.verdict_lines(failed))],
            f"{len(failed)} candidate(s) worse than '{args.reference}' by more than {args.margin:g}",
        )


def _client(args: argparse.Namespace) -> AdapterClient:
    from cdk_adapters.client import AdapterClient, AdapterClientError

    try:
        if args.parameter:
            return AdapterClient.from_parameter(args.parameter, region_name=args.region, accept_endpoints=args.accept_endpoints)
        return AdapterClient.from_local(args.local or DEFAULT_LOCAL_URL, accept_endpoints=args.accept_endpoints)
    except AdapterClientError as error:
        raise Failure(
            [Problem("endpoint", "--parameter" if args.parameter else "--local", printable(str(error)))],
            "cannot reach the endpoint; nothing was sent",
        ) from None
    except ValueError as error:  # a malformed --accept-endpoint
        raise UsageError("--accept-endpoint", str(error)) from None


def _record(
    args: argparse.Namespace, err: TextIO, golden: GoldenSet, verdicts: list[Verdict], results: dict[str, TargetResult]
) -> None:
    from cdk_adapters.cli.common import manifest_path
    from cdk_adapters.evaluation.record import record_path_for, write_verdicts

    try:
        manifest = manifest_path(args.manifest)
    except Failure:
        err.write(f"{PROG}: no manifest here (--manifest PATH), so the verdicts were not recorded\n")
        return
    path = record_path_for(manifest)
    shown = os.path.relpath(golden.path, manifest.parent)
    write_verdicts(path, golden_set=shown, digest=golden.digest, verdicts=verdicts, results=results)
    err.write(f"{PROG}: recorded {len(verdicts)} verdict(s) in {path}\n")


def _capture_set(path: Path) -> tuple[Replay | None, list[Problem]]:
    from cdk_adapters.evaluation.replay import load_replay

    return load_replay(path)
