"""``cdk-adapters base-facts``: print the ``base_model`` facts of a local Hugging Face model directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    Failure,
)
from cdk_adapters.gate import BaseModelFacts
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    facts = commands.add_parser(
        "base-facts",
        help="print the base_model facts of a local Hugging Face model directory, for the manifest",
        description="Read config.json and the safetensors headers of DIR and print the base_model fields "
        "hidden_size, module_names, vision_language (with a vision-language model's architecture, "
        "vision_tower_type and vision_feature_select_strategy) and module_shapes (YAML to paste into the manifest).",
    )
    facts.add_argument("directory", metavar="DIR", type=Path, help="Hugging Face model directory")
    facts.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    try:
        facts = BaseModelFacts.from_model_dir(args.directory)
    except ValueError as error:
        raise Failure(
            [Problem(f"base model '{args.directory}'", "(directory)", str(error))], "cannot read the base model"
        ) from None
    out.write(f"hidden_size: {facts.hidden_size}\n")
    out.write(f"module_names: [{', '.join(sorted(facts.module_names))}]\n")
    out.write(f"vision_language: {'true' if facts.vision_language else 'false'}\n")
    if facts.vision_language:
        for name in ("architecture", "vision_tower_type", "vision_feature_select_strategy"):
            value = getattr(facts, name)
            if value is not None:
                out.write(f"{name}: {value}\n")
    out.write("module_shapes:\n")
    for leaf in sorted(facts.module_names):
        shapes = ", ".join(f"[{out_}, {in_}]" for out_, in_ in sorted(facts.shapes_of(leaf) or ()))
        out.write(f"  {leaf}: [{shapes}]\n")
