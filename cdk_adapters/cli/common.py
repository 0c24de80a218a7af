"""What the commands share: the failures they raise, problem printing, base-model options."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cdk_adapters.gate import (
    AdapterContents,
    AdapterFacts,
    BaseModelFacts,
    Reference,
    check_adapter_contents,
)
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.problems import Problem

if TYPE_CHECKING:
    from cdk_adapters.contract.cell_placement import PlacementRecord
    from cdk_adapters.manifest import LoadedManifest

PROG = "cdk-adapters"


class Failure(Exception):
    """Problems to print, ending the command with status 1."""

    def __init__(self, problems: list[Problem], heading: str) -> None:
        super().__init__(heading)
        self.problems = problems
        self.heading = heading


class UsageError(Failure):
    """Arguments that cannot go together: status 2, as argparse's own usage errors."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__([Problem(PROG, option, message)], "usage error")


def print_problems(err: TextIO, heading: str, problems: list[Problem]) -> None:
    err.write(f"{PROG}: {heading}\n")
    for problem in problems:
        err.write(f"  - {problem}\n")


def write_or_check_committed(
    path: Path,
    text: Callable[[], str],
    *,
    stale: str,
    check: bool,
    what: str,
    field: str,
    command: str,
    up_to_date: str,
    err: TextIO,
) -> bool:
    """A file the repository commits beside the manifest, like the lock (the placement file, the
    tier record). With `check`: fail when `stale` says what is out of date (for CI), else say that
    it is up to date (`up_to_date` counts what it holds). Without: write it when stale or missing.
    True when the caller should report what it wrote."""
    if check:
        if stale:
            problem = Problem(str(path), field, f"{stale}: run `{PROG} {command}` and commit it")
            raise Failure([problem], f"the {what} is out of date")
        err.write(f"{path} is up to date ({up_to_date})\n")
        return False
    if stale or not path.exists():
        path.write_text(text(), encoding="utf-8")
    return True


def manifest_path(given: Path | None) -> Path:
    """`given`, else the default manifest when the working directory has one; otherwise a
    `Failure` saying what to pass (outside this repository there is no default to find)."""
    from cdk_adapters.manifest.loader import DEFAULT_MANIFEST_PATH

    if given is not None:
        return given
    if DEFAULT_MANIFEST_PATH.is_file():
        return DEFAULT_MANIFEST_PATH
    raise Failure(
        [
            Problem(
                f"manifest '{DEFAULT_MANIFEST_PATH}'",
                "--manifest",
                f"not found in {Path.cwd()}: the default is relative to the working directory; pass your "
                "manifest with --manifest PATH (or check adapters against a local model with --base-model-dir DIR)",
            )
        ],
        "no manifest",
    )


def base_options(parser: argparse.ArgumentParser, *, lock: bool = False) -> None:
    against = parser.add_mutually_exclusive_group()
    against.add_argument(
        "--manifest", type=Path, help="manifest whose base model and limits apply (default: manifests/example.yaml)"
    )
    against.add_argument("--base-model-dir", type=Path, help="check against this local model directory instead of a manifest")
    parser.add_argument(
        "--max-lora-rank",
        type=int,
        choices=ALLOWED_MAX_LORA_RANKS,
        help="rank limit (default: the manifest's, else derived)",
    )
    parser.add_argument("--allow-vision-modules", action="store_true", help="admit vision tower/connector targets")
    if lock:
        parser.add_argument("--lock-file", type=Path, help="lock file to update (default: beside the manifest)")


def resolve_reference(args: argparse.Namespace) -> tuple[Reference, LoadedManifest | None]:
    """What adapters are checked against (a model directory, or the manifest's base and limits;
    the command-line options win), and the manifest when one was read."""
    if args.base_model_dir is not None:
        try:
            base = BaseModelFacts.from_model_dir(args.base_model_dir)
        except ValueError as error:
            raise Failure(
                [Problem(f"base model '{args.base_model_dir}'", "(directory)", str(error))], "cannot read the base model"
            ) from None
        return Reference(base, args.max_lora_rank, args.allow_vision_modules), None
    from cdk_adapters.manifest import load_manifest, manifest_reference

    loaded = load_manifest(manifest_path(args.manifest))
    from_manifest = manifest_reference(loaded.manifest)
    return (
        Reference(
            from_manifest.base,
            args.max_lora_rank or from_manifest.max_lora_rank,
            args.allow_vision_modules or from_manifest.allow_vision_modules,
        ),
        loaded,
    )


def describe(facts: AdapterFacts | None) -> str:
    if facts is None:
        return ""
    alpha = "unset" if facts.alpha is None else f"{facts.alpha:g}"  # PEFT's default applies
    return f"rank {facts.max_rank}, alpha {alpha}, targets {', '.join(facts.target_modules)}"


def checked_directory(args: argparse.Namespace, name: str, reference: Reference) -> AdapterFacts:
    """Gate `args.directory` as adapter `name`; raise `Failure` naming every problem."""
    directory: Path = args.directory
    if not directory.is_dir():
        raise Failure([Problem(f"adapter '{name}'", "source", f"{directory} is not a directory")], "nothing was packaged")
    contents = AdapterContents.from_dir(directory)
    problems = check_adapter_contents(name, contents, reference)
    facts = AdapterFacts.from_contents(contents)
    if problems or facts is None:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was packaged or uploaded")
    return facts


def owner_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expected-bucket-owner",
        metavar="ACCOUNT",
        help="12-digit account that must own the bucket, checked by S3 on every call "
        "(default: the account of your credentials, from sts get-caller-identity)",
    )


def owner_problems(args: argparse.Namespace) -> list[Problem]:
    """A malformed ``--expected-bucket-owner``, reported with the command's other problems."""
    from cdk_adapters.artifacts.s3_checksum import ACCOUNT_ID

    given = args.expected_bucket_owner
    if given is None or ACCOUNT_ID.match(given):
        return []
    return [Problem(PROG, "--expected-bucket-owner", f"{given!r} is not a 12-digit AWS account id")]


def expected_bucket_owner(args: argparse.Namespace) -> str:
    """``--expected-bucket-owner`` (checked by `owner_problems`), else the credentials' own account:
    a bucket of the same name in another account is then refused by S3 (403), never read or written."""
    given: str | None = args.expected_bucket_owner
    if given is not None:
        return given
    import boto3

    account: str = boto3.client("sts", region_name=args.region).get_caller_identity()["Account"]
    return account


def read_placement(path: Path, *, missing_ok: bool = False) -> PlacementRecord:
    """The placement file at `path` (empty when it is missing and `missing_ok`), or a `Failure` naming it."""
    from cdk_adapters.contract.cell_placement import PlacementRecord

    if missing_ok and not path.exists():
        return PlacementRecord()
    try:
        return PlacementRecord.from_json(path.read_text(encoding="utf-8"), str(path))
    except (OSError, ValueError) as error:
        raise Failure([Problem(str(path), "placement", str(error))], "cannot read the placement file") from None
