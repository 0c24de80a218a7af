"""``cdk-adapters package``: validate an adapter directory and write a deterministic ``.tar.gz``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    base_options,
    checked_directory,
    resolve_reference,
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    package = commands.add_parser(
        "package",
        help="validate an adapter directory and write a deterministic .tar.gz",
        description="Validate DIR, then write its adapter files at the archive root, byte-for-byte reproducibly.",
    )
    package.add_argument("directory", metavar="DIR", type=Path, help="PEFT output directory")
    package.add_argument("-o", "--output", required=True, type=_archive_path, metavar="FILE", help="archive to write (.tar.gz)")
    package.add_argument("--include-tokenizer", action="store_true", help="also package tokenizer files found in DIR")
    base_options(package)
    package.set_defaults(handler=run)


def _archive_path(value: str) -> Path:
    """SageMaker's ArtifactUrl must be one .tar.gz: another name is a usage error (status 2)."""
    if not value.endswith(".tar.gz"):
        raise argparse.ArgumentTypeError(f"{value!r} must end with .tar.gz (SageMaker reads adapters from one .tar.gz)")
    return Path(value)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.artifacts.packaging import package_adapter

    name = args.directory.name
    reference, _ = resolve_reference(args)
    checked_directory(args, name, reference)
    packaged = package_adapter(args.directory, args.output, include_tokenizer=args.include_tokenizer)
    out.write(f"{packaged.path}\nsha256 {packaged.sha256}\nsize {packaged.size}\nfiles {' '.join(packaged.members)}\n")
