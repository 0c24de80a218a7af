"""``cdk-adapters validate``: run the compatibility gate on a manifest, adapter directories or archives."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    PROG,
    Failure,
    Reference,
    base_options,
    describe,
)
from cdk_adapters.compat import AdapterContents, AdapterFacts, CoHostedAdapter
from cdk_adapters.compat.checks.co_hosted import identical_target_modules
from cdk_adapters.problems import ConfigurationError, Problem


def register(commands: argparse._SubParsersAction) -> None:
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
    base_options(validate)
    validate.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    targets = [Path(target) for target in args.targets]
    manifests = [t for t in targets if t.is_file() and t.suffix in (".yaml", ".yml")]
    adapters = [t for t in targets if t not in manifests]
    if manifests and adapters:
        raise Failure([Problem(PROG, "targets", "give either one manifest or adapter directories/archives, not both")], "usage")
    if len(manifests) > 1:
        raise Failure([Problem(PROG, "targets", "validate one manifest at a time")], "usage")
    if not adapters:
        validate_manifest(args, manifests[0] if manifests else args.manifest, out)
        return
    reference = Reference(args)
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
        raise Failure(problems, f"{len(problems)} problem(s) found")
    for name, facts in summaries:
        out.write(f"ok: adapter '{name}' ({describe(facts)})\n")


def validate_manifest(args: argparse.Namespace, path: Path | None, out: TextIO) -> None:
    from cdk_adapters.manifest import plan_manifest_file

    try:
        plan = plan_manifest_file(path)
    except ConfigurationError as error:
        raise Failure(list(error.problems), f"{error.heading}: {len(error.problems)} problem(s) found") from None
    loaded = plan.loaded
    for adapter in plan.adapters:
        origin = adapter.row.source if adapter.lock_entry is not None else f"{adapter.local_dir} (packaged at synth)"
        out.write(f"ok: adapter '{adapter.name}' ({describe(adapter.facts)}) from {origin}\n")
    serving = plan.manifest.serving
    derived = "" if serving.max_lora_rank is not None else " (derived)"
    out.write(
        f"ok: manifest {loaded.path}: {len(plan.adapters)} adapter(s); max_loras {plan.max_loras}, "
        f"max_cpu_loras {plan.max_cpu_loras if plan.max_cpu_loras is not None else 'default'}, "
        f"max_lora_rank {plan.max_lora_rank}{derived}\n"
    )
