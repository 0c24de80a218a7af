"""What the commands share: the failure they raise, problem printing, base-model options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.compat import (
    AdapterContents,
    AdapterFacts,
    BaseModelFacts,
    check_adapter_contents,
)
from cdk_adapters.compat.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.problems import Problem

PROG = "cdk-adapters"


class Failure(Exception):
    """Problems to print, ending the command with status 1."""

    def __init__(self, problems: list[Problem], heading: str) -> None:
        super().__init__(heading)
        self.problems = problems
        self.heading = heading


def print_problems(err: TextIO, heading: str, problems: list[Problem]) -> None:
    err.write(f"{PROG}: {heading}\n")
    for problem in problems:
        err.write(f"  - {problem}\n")


def base_options(parser: argparse.ArgumentParser, *, lock: bool = False) -> None:
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


class Reference:
    """The base model and limits adapters are checked against, from a manifest or a model directory."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.loaded = None
        if args.base_model_dir is not None:
            if args.manifest is not None:
                raise Failure([Problem(PROG, "--base-model-dir", "give either --manifest or --base-model-dir, not both")], "usage")
            try:
                self.base = BaseModelFacts.from_model_dir(args.base_model_dir)
            except ValueError as error:
                raise Failure([Problem(f"base model '{args.base_model_dir}'", "(directory)", str(error))], "cannot read the base model") from None
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
    problems = reference.check(name, contents)
    facts = AdapterFacts.from_contents(contents)
    if problems or facts is None:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was packaged or uploaded")
    return facts
