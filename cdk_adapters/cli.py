"""``cdk-adapters``: validate, package, publish and lock LoRA adapters for a manifest.

Exit status 0 on success; 1 when something is wrong (every problem on stderr, one per line);
2 for a usage error (argparse). Results a script may want (the S3 URI, the sha256) go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Sequence, TextIO

from cdk_adapters.compat import (
    AdapterContents,
    AdapterFacts,
    BaseModelFacts,
    CoHostedAdapter,
    check_adapter_contents,
)
from cdk_adapters.compat.checks.co_hosted import identical_target_modules, version_suffix
from cdk_adapters.compat.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.problems import ConfigurationError, Problem

PROG = "cdk-adapters"


class _Failure(Exception):
    """Problems to print, ending the command with status 1."""

    def __init__(self, problems: list[Problem], heading: str) -> None:
        super().__init__(heading)
        self.problems = problems
        self.heading = heading


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the CLI; returns the exit status (the installed entry point exits with it)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        args.handler(args, out, err)
    except _Failure as failure:
        _print_problems(err, failure.heading, failure.problems)
        return 1
    except ConfigurationError as error:
        _print_problems(err, str(error).splitlines()[0], list(error.problems))
        return 1
    except Exception as error:  # botocore/credentials/IO: say what failed, no traceback
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(error, (BotoCoreError, ClientError, OSError)):
            err.write(f"{PROG}: error: {error}\n")
            return 1
        raise
    return 0


def _print_problems(err: TextIO, heading: str, problems: list[Problem]) -> None:
    err.write(f"{PROG}: {heading}\n")
    for problem in problems:
        err.write(f"  - {problem}\n")


# --------------------------------------------------------------------------- arguments


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Validate, package, publish and lock LoRA adapters for a cdk-adapters manifest.",
        epilog="Run '%(prog)s COMMAND --help' for each command's options.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="run the compatibility gate on a manifest, adapter directories or archives",
        description=(
            "Run the compatibility gate. With a manifest (default: manifests/example.yaml), check every "
            "row, the lock file and the serving limits. With adapter directories or .tar.gz archives, "
            "check each against the manifest's base model (--manifest) or a local model (--base-model-dir)."
        ),
    )
    validate.add_argument("targets", nargs="*", metavar="MANIFEST | DIR", help="a manifest file, adapter directories or .tar.gz archives")
    _base_options(validate)
    validate.set_defaults(handler=_validate)

    package = commands.add_parser(
        "package",
        help="validate an adapter directory and write a deterministic .tar.gz",
        description="Validate DIR, then write its adapter files at the archive root, byte-for-byte reproducibly.",
    )
    package.add_argument("directory", metavar="DIR", type=Path, help="PEFT output directory")
    package.add_argument("-o", "--output", required=True, type=Path, metavar="FILE", help="archive to write (.tar.gz)")
    package.add_argument("--include-tokenizer", action="store_true", help="also package tokenizer files found in DIR")
    _base_options(package)
    package.set_defaults(handler=_package)

    publish = commands.add_parser(
        "publish",
        help="validate, package and upload an adapter under a new versioned name; never overwrites",
        description=(
            "Validate DIR, package it, upload it to s3://BUCKET/PREFIX/NAME/adapter.tar.gz with a conditional "
            "write (never overwriting), write its lock entry, and print the S3 URI."
        ),
    )
    publish.add_argument("directory", metavar="DIR", type=Path, help="PEFT output directory")
    publish.add_argument("--name", required=True, help="versioned adapter name, e.g. support-triage-v4")
    publish.add_argument("--bucket", required=True, help="S3 bucket for adapter archives")
    publish.add_argument("--prefix", default="adapters", help="key prefix (default: adapters)")
    publish.add_argument("--kms-key-id", help="encrypt with this KMS key (default: the bucket's default encryption)")
    publish.add_argument("--include-tokenizer", action="store_true", help="also package tokenizer files found in DIR")
    publish.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    publish.add_argument("--no-progress", action="store_true", help="do not draw the upload progress bar")
    _base_options(publish, lock=True)
    publish.set_defaults(handler=_publish)

    lock = commands.add_parser(
        "lock",
        help="refresh the lock file from the manifest's published S3 adapters",
        description=(
            "Download every s3:// adapter in the manifest, run the gate on it, and rewrite the lock file. "
            "Refuses an object whose content changed since it was locked."
        ),
    )
    lock.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    lock.add_argument("--lock-file", type=Path, help="lock file (default: beside the manifest, <name>.lock.json)")
    lock.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    lock.set_defaults(handler=_lock)

    facts = commands.add_parser(
        "base-facts",
        help="print the base_model facts of a local Hugging Face model directory, for the manifest",
        description="Read config.json and the safetensors headers of DIR and print the base_model fields "
        "hidden_size, module_names, vision_language and module_shapes (YAML to paste into the manifest).",
    )
    facts.add_argument("directory", metavar="DIR", type=Path, help="Hugging Face model directory")
    facts.set_defaults(handler=_base_facts)
    return parser


def _base_options(parser: argparse.ArgumentParser, *, lock: bool = False) -> None:
    parser.add_argument("--manifest", type=Path, help="manifest whose base model and limits apply (default: manifests/example.yaml)")
    parser.add_argument("--base-model-dir", type=Path, help="check against this local model directory instead of a manifest")
    parser.add_argument(
        "--max-lora-rank",
        type=int,
        choices=ALLOWED_MAX_LORA_RANKS,
        help="rank limit (default: the manifest's, else derived)",
    )
    parser.add_argument("--allow-vision-modules", action="store_true", help="admit vision tower/connector targets")
    if lock:
        parser.add_argument("--lock-file", type=Path, help="lock file to update (default: beside the manifest)")


# --------------------------------------------------------------------------- base model and limits


class _Reference:
    """The base model and limits adapters are checked against, from a manifest or a model directory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.loaded = None
        if args.base_model_dir is not None:
            if args.manifest is not None:
                raise _Failure([Problem(PROG, "--base-model-dir", "give either --manifest or --base-model-dir, not both")], "usage")
            try:
                self.base = BaseModelFacts.from_model_dir(args.base_model_dir)
            except ValueError as error:
                raise _Failure([Problem(f"base model '{args.base_model_dir}'", "(directory)", str(error))], "cannot read the base model") from None
            self.max_lora_rank = args.max_lora_rank
            self.allow_vision_modules = args.allow_vision_modules
        else:
            from cdk_adapters.manifest import base_facts, load_manifest

            self.loaded = load_manifest(args.manifest)
            manifest = self.loaded.manifest
            self.base = base_facts(manifest.base_model)
            self.max_lora_rank = args.max_lora_rank or manifest.serving.max_lora_rank
            self.allow_vision_modules = args.allow_vision_modules or manifest.base_model.allow_vision_modules

    def check(self, name: str, contents: AdapterContents) -> list[Problem]:
        return check_adapter_contents(
            name, contents, base=self.base, max_lora_rank=self.max_lora_rank, allow_vision_modules=self.allow_vision_modules
        )


def _describe(facts: AdapterFacts | None) -> str:
    if facts is None:
        return ""
    alpha = "unset" if facts.alpha is None else f"{facts.alpha:g}"  # PEFT's default applies
    return f"rank {facts.max_rank}, alpha {alpha}, targets {', '.join(facts.target_modules)}"


# --------------------------------------------------------------------------- commands


def _validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    targets = [Path(target) for target in args.targets]
    manifests = [t for t in targets if t.is_file() and t.suffix in (".yaml", ".yml")]
    adapters = [t for t in targets if t not in manifests]
    if manifests and adapters:
        raise _Failure([Problem(PROG, "targets", "give either one manifest or adapter directories/archives, not both")], "usage")
    if len(manifests) > 1:
        raise _Failure([Problem(PROG, "targets", "validate one manifest at a time")], "usage")
    if not adapters:
        _validate_manifest(args, manifests[0] if manifests else args.manifest, out)
        return
    reference = _Reference(args)
    problems: list[Problem] = []
    summaries: list[tuple[str, AdapterFacts | None]] = []
    for target in adapters:
        name = target.name.removesuffix(".tar.gz")
        if target.is_dir():
            contents = AdapterContents.from_dir(target)
        elif target.is_file():
            contents = AdapterContents.from_archive(target)
        else:
            problems.append(Problem(f"adapter '{name}'", "source", f"{target} does not exist"))
            continue
        problems += reference.check(name, contents)
        summaries.append((name, AdapterFacts.from_contents(contents)))
    problems += identical_target_modules(
        [CoHostedAdapter(name, facts.target_modules) for name, facts in summaries if facts is not None]
    )
    if problems:
        raise _Failure(problems, f"{len(problems)} problem(s) found")
    for name, facts in summaries:
        out.write(f"ok: adapter '{name}' ({_describe(facts)})\n")


def _validate_manifest(args: argparse.Namespace, path: Path | None, out: TextIO) -> None:
    from cdk_adapters.manifest import plan_manifest_file

    try:
        plan = plan_manifest_file(path)
    except ConfigurationError as error:
        raise _Failure(list(error.problems), f"{error.heading}: {len(error.problems)} problem(s) found") from None
    loaded = plan.loaded
    for adapter in plan.adapters:
        origin = adapter.row.source if adapter.lock_entry is not None else f"{adapter.local_dir} (packaged at synth)"
        out.write(f"ok: adapter '{adapter.name}' ({_describe(adapter.facts)}) from {origin}\n")
    serving = plan.manifest.serving
    derived = "" if serving.max_lora_rank is not None else " (derived)"
    out.write(
        f"ok: manifest {loaded.path}: {len(plan.adapters)} adapter(s); max_loras {plan.max_loras}, "
        f"max_cpu_loras {plan.max_cpu_loras if plan.max_cpu_loras is not None else 'default'}, "
        f"max_lora_rank {plan.max_lora_rank}{derived}\n"
    )


def _checked_directory(args: argparse.Namespace, name: str, reference: _Reference) -> AdapterFacts:
    directory: Path = args.directory
    if not directory.is_dir():
        raise _Failure([Problem(f"adapter '{name}'", "source", f"{directory} is not a directory")], "nothing was packaged")
    contents = AdapterContents.from_dir(directory)
    problems = reference.check(name, contents)
    facts = AdapterFacts.from_contents(contents)
    if problems or facts is None:
        raise _Failure(problems, f"{len(problems)} problem(s) found; nothing was packaged or uploaded")
    return facts


def _package(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.packaging import package_adapter

    name = args.directory.name
    reference = _Reference(args)
    _checked_directory(args, name, reference)
    if not args.output.name.endswith(".tar.gz"):
        raise _Failure([Problem(PROG, "--output", f"{args.output} must end with .tar.gz")], "nothing was packaged")
    packaged = package_adapter(args.directory, args.output, include_tokenizer=args.include_tokenizer)
    out.write(f"{packaged.path}\nsha256 {packaged.sha256}\nsize {packaged.size}\nfiles {' '.join(packaged.members)}\n")


def _publish(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import boto3

    from cdk_adapters.manifest import LockFile, load_lock, lock_path_for, write_lock
    from cdk_adapters.manifest.refresh import lock_entry_for_archive
    from cdk_adapters.names import validate_adapter_name
    from cdk_adapters.packaging import package_adapter
    from cdk_adapters.publish import ProgressBar, publish_archive

    name = args.name
    subject = f"adapter '{name}'"
    reference = _Reference(args)
    name_problems = validate_adapter_name(name, subject) + list(version_suffix([CoHostedAdapter(name, ())]))
    try:
        _checked_directory(args, name, reference)
        directory_problems: list[Problem] = []
    except _Failure as failure:
        directory_problems = failure.problems
    if name_problems or directory_problems:
        problems = name_problems + directory_problems
        raise _Failure(problems, f"{len(problems)} problem(s) found; nothing was packaged or uploaded")
    lock_path = args.lock_file or (lock_path_for(reference.loaded.path) if reference.loaded else None)
    with tempfile.TemporaryDirectory(prefix="cdk-adapters-publish-") as scratch:
        packaged = package_adapter(args.directory, Path(scratch) / "adapter.tar.gz", include_tokenizer=args.include_tokenizer)
        client = boto3.client("s3", region_name=args.region)
        published = publish_archive(
            client,
            packaged.path,
            name=name,
            bucket=args.bucket,
            prefix=args.prefix,
            sha256=packaged.sha256,
            kms_key_id=args.kms_key_id,
            progress=None if args.no_progress else ProgressBar(f"uploading {name}", err),
        )
        entry = lock_entry_for_archive(published.uri, packaged.path, packaged.sha256, packaged.size)
    if not published.uploaded:
        err.write(f"{PROG}: {published.uri} already holds these exact bytes; nothing uploaded\n")
    if lock_path is not None and entry is not None:
        lock = load_lock(lock_path) if lock_path.exists() else LockFile()
        lock.adapters[name] = entry
        write_lock(lock_path, lock)
        err.write(f"{PROG}: wrote the lock entry for '{name}' to {lock_path}; add the row to the manifest and commit both\n")
    out.write(f"{published.uri}\n")


def _lock(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import boto3

    from cdk_adapters.manifest import load_manifest, write_lock
    from cdk_adapters.manifest.refresh import refresh_lock

    loaded = load_manifest(args.manifest, lock_path=args.lock_file)
    refreshed = refresh_lock(loaded, boto3.client("s3", region_name=args.region))
    if refreshed.problems:
        raise _Failure(refreshed.problems, f"{len(refreshed.problems)} problem(s) found; {loaded.lock_path} was not changed")
    write_lock(loaded.lock_path, refreshed.lock)
    changed = ", ".join(refreshed.changed) or "none"
    out.write(f"{loaded.lock_path}: {len(refreshed.lock.adapters)} entr(y/ies); changed: {changed}\n")


def _base_facts(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    try:
        facts = BaseModelFacts.from_model_dir(args.directory)
    except ValueError as error:
        raise _Failure([Problem(f"base model '{args.directory}'", "(directory)", str(error))], "cannot read the base model") from None
    out.write(f"hidden_size: {facts.hidden_size}\n")
    out.write(f"module_names: [{', '.join(sorted(facts.module_names))}]\n")
    out.write(f"vision_language: {'true' if facts.vision_language else 'false'}\n")
    out.write("module_shapes:\n")
    for leaf in sorted(facts.module_names):
        shapes = ", ".join(f"[{out_}, {in_}]" for out_, in_ in sorted(facts.shapes_of(leaf) or ()))
        out.write(f"  {leaf}: [{shapes}]\n")


__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
