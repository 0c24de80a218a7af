"""``cdk-adapters``: validate, package, publish and lock LoRA adapters for a manifest.

Exit status 0 on success; 1 when something is wrong (every problem on stderr, one per line);
2 for a usage error (argparse). Results a script may want (the S3 URI, the sha256) go to stdout.

One module per command (cf. ``vllm/entrypoints/cli/``): each has ``register(commands)``, which adds
its sub-parser and sets ``handler``. `COMMANDS` lists them in the order ``--help`` shows.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError, print_problems
from cdk_adapters.problems import ConfigurationError

COMMANDS = (
    "cdk_adapters.cli.validate",
    "cdk_adapters.cli.package",
    "cdk_adapters.cli.publish",
    "cdk_adapters.cli.lock",
    "cdk_adapters.cli.base_facts",
    "cdk_adapters.cli.demo_model",
    "cdk_adapters.cli.local",
    "cdk_adapters.cli.fix_torchvision",
    "cdk_adapters.cli.invoke",
    "cdk_adapters.cli.plan",
    "cdk_adapters.cli.eval",
    "cdk_adapters.cli.promote",
    "cdk_adapters.cli.usage",
    "cdk_adapters.cli.place",
    "cdk_adapters.cli.rebalance",
    "cdk_adapters.cli.bake",
    "cdk_adapters.cli.tiers",
)
"""Modules with a ``register(commands)`` function, one per sub-command."""


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the CLI; returns the exit status (the installed entry point exits with it)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        args.handler(args, out, err)
    except UsageError as failure:
        print_problems(err, f"{failure.heading} (see '{PROG} {args.command} --help')", failure.problems)
        return 2
    except Failure as failure:
        print_problems(err, failure.heading, failure.problems)
        return 1
    except ConfigurationError as error:
        print_problems(err, str(error).splitlines()[0], list(error.problems))
        return 1
    except Exception as error:  # botocore/credentials/IO: say what failed, no traceback
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(error, (BotoCoreError, ClientError, OSError)):
            err.write(f"{PROG}: error: {error}\n")
            return 1
        raise
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Validate, package, publish and lock LoRA adapters for a cdk-adapters manifest; plan the shared "
            "endpoint; serve the adapters locally; call them; report each tenant's usage."
        ),
        epilog="Run '%(prog)s COMMAND --help' for each command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(module).register(commands)
    return parser


def installed_version() -> str:
    """The distribution's version (pyproject.toml states it once; an editable checkout has it too)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cdk-adapters")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "(not installed)"


__all__ = ["COMMANDS", "build_parser", "installed_version", "main"]
