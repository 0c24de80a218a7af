"""``cdk-adapters package``: validate an adapter directory and write a deterministic ``.tar.gz``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    PROG,
    Failure,
    Reference,
    base_options,
    checked_directory,
)
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction) -> None:
    package = commands.add_parser(
        "package",
        help="validate an adapter directory and write a deterministic .tar.gz",
        description="Validate DIR, then write its adapter files at the archive root, byte-for-byte reproducibly.",
    )
    package.add_argument("directory", metavar="DIR", type=Path, help="PEFT output directory")
    package.add_argument("-o", "--output", required=True, type=Path, metavar="FILE", help="archive to write (.tar.gz)")
    package.add_argument("--include-tokenizer", action="store_true", help="also package tokenizer files found in DIR")
    base_options(package)
    package.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.packaging import package_adapter

    name = args.directory.name
    reference = Reference(args)
    checked_directory(args, name, reference)
    if not args.output.name.endswith(".tar.gz"):
        raise Failure([Problem(PROG, "--output", f"{args.output} must end with .tar.gz")], "nothing was packaged")
    packaged = package_adapter(args.directory, args.output, include_tokenizer=args.include_tokenizer)
    out.write(f"{packaged.path}\nsha256 {packaged.sha256}\nsize {packaged.size}\nfiles {' '.join(packaged.members)}\n")
