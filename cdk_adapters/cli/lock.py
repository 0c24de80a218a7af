"""``cdk-adapters lock``: refresh the lock file from the manifest's published S3 adapters."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    Failure,
    manifest_path,
)


def register(commands: argparse._SubParsersAction) -> None:
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
    lock.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import boto3

    from cdk_adapters.manifest import load_manifest, write_lock
    from cdk_adapters.manifest.refresh import refresh_lock

    loaded = load_manifest(manifest_path(args.manifest), lock_path=args.lock_file)
    if not any(row.is_s3 for row in loaded.manifest.adapters):
        out.write(
            f"{loaded.path} has no s3:// adapters: local rows are packaged at synth and need no lock entry; "
            f"{loaded.lock_path} was not written\n"
        )
        return
    refreshed = refresh_lock(loaded, boto3.client("s3", region_name=args.region))
    if refreshed.problems:
        raise Failure(refreshed.problems, f"{len(refreshed.problems)} problem(s) found; {loaded.lock_path} was not changed")
    write_lock(loaded.lock_path, refreshed.lock)
    changed = ", ".join(refreshed.changed) or "none"
    out.write(f"{loaded.lock_path}: {len(refreshed.lock.adapters)} entr(y/ies); changed: {changed}\n")
