"""``cdk-adapters demo-model DIR``: a tiny base model, two adapter versions and a manifest for local mode.

So a new user tries local mode in two commands without reading the tests or downloading a model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import PROG, Failure
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo-model",
        help="write a tiny demo base model, two adapters and a manifest, to try local mode",
        description=(
            "Write a tiny random Llama (base/), two PEFT LoRA versions of one adapter (adapters/) and "
            "manifest.yaml with a 90/10 alias over them into DIR. Built offline in seconds; its output is "
            "random text, it only shows the plumbing. Needs the serving requirements (torch, transformers, peft)."
        ),
    )
    demo.add_argument("directory", type=Path, metavar="DIR", help="an empty or new directory")
    demo.add_argument(
        "--vision-language",
        action="store_true",
        help="a tiny random LLaVA (CLIP tower) instead, with a language adapter, a tower + connector adapter, "
        "an image to send and a manifest carrying the base's vision-language facts",
    )
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    directory: Path = args.directory
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise Failure([Problem(PROG, "DIR", f"{directory} exists and is not an empty directory")], "nothing was written")
    from cdk_adapters.local.stack import broken_stack_problems, explain_import_error
    from cdk_adapters.local.torchvision_fix import BROKEN_MESSAGE

    broken = broken_stack_problems()  # before importing transformers, which these would break
    if broken:
        raise Failure([Problem(PROG, "demo-model", problem) for problem in broken], "the demo model was not written")
    if args.vision_language:
        _write_vlm_demo(directory, out)
        return
    from cdk_adapters.local.demo_model import DEMO_ADAPTERS, DEMO_ALIAS, write_demo

    # Tiny files write in milliseconds: Hugging Face's progress bars would only be noise on stderr.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        _quiet_transformers()
        manifest = write_demo(directory)
    except (ImportError, RuntimeError) as error:  # torch, transformers and peft are the serving extras
        if not isinstance(error, ImportError) and BROKEN_MESSAGE not in str(error):
            raise
        raise Failure([Problem(PROG, "demo-model", explain_import_error(error))], "the demo model was not written") from None
    out.write(f"wrote {directory / 'base'} (tiny random Llama), adapters {', '.join(DEMO_ADAPTERS)}, {manifest}\n")
    out.write(f"alias '{DEMO_ALIAS}': 90% {DEMO_ADAPTERS[0]}, 10% {DEMO_ADAPTERS[1]}\n")
    out.write(f"next: {PROG} local --manifest {manifest} --base-model-dir {directory / 'base'}\n")


def _write_vlm_demo(directory: Path, out: TextIO) -> None:
    from cdk_adapters.local.demo_vlm import VLM_DEMO_ADAPTERS, VLM_DEMO_IMAGE, write_vlm_demo
    from cdk_adapters.local.stack import explain_import_error
    from cdk_adapters.local.torchvision_fix import BROKEN_MESSAGE

    try:
        _quiet_transformers()
        manifest = write_vlm_demo(directory)
    except (ImportError, RuntimeError) as error:
        if not isinstance(error, ImportError) and BROKEN_MESSAGE not in str(error):
            raise
        raise Failure([Problem(PROG, "demo-model", explain_import_error(error))], "the demo model was not written") from None
    first = next(iter(VLM_DEMO_ADAPTERS))
    out.write(
        f"wrote {directory / 'base'} (tiny random LLaVA), adapters {', '.join(VLM_DEMO_ADAPTERS)}, "
        f"{directory / VLM_DEMO_IMAGE}, {manifest}\n"
    )
    out.write(f"next: {PROG} local --manifest {manifest} --base-model-dir {directory / 'base'}\n")
    out.write(f'then: {PROG} invoke {first} "Describe the image:" --image {directory / VLM_DEMO_IMAGE}\n')


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
