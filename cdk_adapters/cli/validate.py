"""``cdk-adapters validate``: run the compatibility gate on a manifest, adapter directories or archives."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    Failure,
    UsageError,
    base_options,
    describe,
    manifest_path,
    resolve_reference,
)
from cdk_adapters.contract.adapter_names import duplicate_adapter_names
from cdk_adapters.gate import AdapterContents, AdapterFacts, CoHostedAdapter, check_adapter_contents
from cdk_adapters.gate.checks.co_hosted import IDENTICAL_TARGET_MODULES
from cdk_adapters.problems import ConfigurationError, Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    validate = commands.add_parser(
        "validate",
        help="run the compatibility gate on a manifest, adapter directories or archives",
        description=(
            "Run the compatibility gate. With a manifest (default: manifests/example.yaml), check every "
            "row, the lock file and the serving limits. With adapter directories or .tar.gz archives, "
            "check each against the manifest's base model (--manifest) or a local model (--base-model-dir)."
        ),
    )
    validate.add_argument(
        "targets", nargs="*", metavar="MANIFEST | DIR", help="a manifest file, adapter directories or .tar.gz archives"
    )
    base_options(validate)
    validate.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    targets = [Path(target) for target in args.targets]
    manifests = [t for t in targets if t.is_file() and t.suffix in (".yaml", ".yml")]
    adapters = [t for t in targets if t not in manifests]
    if manifests and adapters:
        raise UsageError("targets", "give either one manifest or adapter directories/archives, not both")
    if len(manifests) > 1:
        raise UsageError("targets", "validate one manifest at a time")
    if not adapters and args.base_model_dir is not None and not manifests:
        raise UsageError("targets", "name the adapter directories or archives to check against --base-model-dir")
    if not adapters:
        if manifests and (args.manifest is not None or args.base_model_dir is not None):
            raise UsageError("targets", "a manifest argument is checked on its own; drop --manifest/--base-model-dir")
        validate_manifest(args, manifests[0] if manifests else manifest_path(args.manifest), out, err)
        return
    reference, _ = resolve_reference(args)
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
        problems += check_adapter_contents(name, contents, reference)
        summaries.append((name, AdapterFacts.from_contents(contents)))
    problems += duplicate_adapter_names(name for name, _ in summaries)
    problems += IDENTICAL_TARGET_MODULES(
        [CoHostedAdapter(name, facts.target_modules) for name, facts in summaries if facts is not None]
    )
    if problems:
        raise Failure(problems, f"{len(problems)} problem(s) found")
    for name, facts in summaries:
        out.write(f"ok: adapter '{name}' ({describe(facts)})\n")


def validate_manifest(args: argparse.Namespace, path: Path, out: TextIO, err: TextIO) -> None:
    import warnings

    from cdk_adapters.manifest import plan_manifest_file
    from cdk_adapters.manifest.loader import ManifestDeprecationWarning

    with warnings.catch_warnings(record=True) as deprecations:
        warnings.simplefilter("always", ManifestDeprecationWarning)
        try:
            plan = plan_manifest_file(path)
        except ConfigurationError as error:
            raise Failure(list(error.problems), f"{error.heading}: {len(error.problems)} problem(s) found") from None
        finally:
            for warning in deprecations:
                err.write(f"deprecated: {warning.message}\n")
    loaded = plan.loaded
    for adapter in plan.adapters:
        origin = adapter.row.source if adapter.lock_entry is not None else f"{adapter.local_dir} (packaged at synth)"
        out.write(f"ok: adapter '{adapter.name}' ({describe(adapter.facts)}) from {origin}\n")
    if plan.acknowledged:
        out.write(f"acknowledged: {len(plan.acknowledged)} finding(s), not failed:\n")
        for finding in plan.acknowledged:
            out.write(f"  - {finding}\n")
    serving = plan.manifest.serving
    derived = "" if serving.max_lora_rank is not None else " (derived)"
    out.write(
        f"ok: manifest {loaded.path}: {len(plan.adapters)} adapter(s); max_loras {plan.max_loras}, "
        f"max_cpu_loras {plan.max_cpu_loras if plan.max_cpu_loras is not None else 'default'}, "
        f"max_lora_rank {plan.max_lora_rank}{derived}\n"
    )
    if plan.tier_ranks:
        counts = {rank: sum(1 for tier in plan.tiers.values() if tier == rank) for rank in plan.tier_ranks}
        out.write("ok: rank tiers: " + ", ".join(f"rank {rank} ({count} adapter(s))" for rank, count in counts.items()) + "\n")
