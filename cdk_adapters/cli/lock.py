"""``cdk-adapters lock``: refresh the lock file from the manifest's published S3 adapters, or
(``--check``) verify that S3 still holds exactly what the lock records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cdk_adapters.cli.common import (
    Failure,
    expected_bucket_owner,
    manifest_path,
    owner_option,
    owner_problems,
)

if TYPE_CHECKING:
    from cdk_adapters.manifest import LoadedManifest


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lock = commands.add_parser(
        "lock",
        help="refresh the lock file from the manifest's published S3 adapters (--check: verify S3 against it)",
        description=(
            "Download every s3:// adapter in the manifest, run the gate on it, and rewrite the lock file. "
            "Refuses an object whose content changed since it was locked, or that S3 stores no SHA-256 for. "
            "With --check, download nothing and write nothing: compare each locked adapter's S3 object "
            "(S3's own SHA-256 and size) with the lock and exit 1 naming every adapter that differs."
        ),
    )
    lock.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    lock.add_argument("--lock-file", type=Path, help="lock file (default: beside the manifest, <name>.lock.json)")
    lock.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    lock.add_argument("--check", action="store_true", help="verify S3 against the lock (for CI); change nothing")
    lock.add_argument(
        "--base-model",
        action="store_true",
        help="also pin the base model's S3 objects (size and S3's checksum of each); once pinned, every lock and "
        "lock --check verifies them",
    )
    owner_option(lock)
    lock.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import boto3

    from cdk_adapters.manifest import load_manifest, write_lock
    from cdk_adapters.manifest.refresh import refresh_lock

    problems = owner_problems(args)
    if problems:
        raise Failure(problems, "nothing was read")
    loaded = load_manifest(manifest_path(args.manifest), lock_path=args.lock_file)
    if args.check:
        return _check(args, loaded, out)
    if not any(row.is_s3 for row in loaded.manifest.adapters) and not args.base_model and loaded.lock.base_model is None:
        out.write(
            f"{loaded.path} has no s3:// adapters: local rows are packaged at synth and need no lock entry; "
            f"{loaded.lock_path} was not written\n"
        )
        return
    owner = expected_bucket_owner(args)
    refreshed = refresh_lock(
        loaded, boto3.client("s3", region_name=args.region), expected_bucket_owner=owner, pin_base_model=args.base_model
    )
    if refreshed.problems:
        raise Failure(refreshed.problems, f"{len(refreshed.problems)} problem(s) found; {loaded.lock_path} was not changed")
    write_lock(loaded.lock_path, refreshed.lock)
    changed = ", ".join(refreshed.changed) or "none"
    out.write(f"{loaded.lock_path}: {len(refreshed.lock.adapters)} entr(y/ies); changed: {changed}\n")


def _check(args: argparse.Namespace, loaded: LoadedManifest, out: TextIO) -> None:
    import boto3

    from cdk_adapters.manifest.lock_check import check_lock_against_s3

    if not loaded.lock.adapters and loaded.lock.base_model is None and not any(row.is_s3 for row in loaded.manifest.adapters):
        out.write(f"{loaded.lock_path}: nothing locked, nothing to check\n")
        return
    owner = expected_bucket_owner(args)
    problems = check_lock_against_s3(loaded, boto3.client("s3", region_name=args.region), expected_bucket_owner=owner)
    if problems:
        raise Failure(problems, f"S3 disagrees with {loaded.lock_path} ({len(problems)} problem(s))")
    base = f"; the base model's {len(loaded.lock.base_model.objects)} object(s) match their pin" if loaded.lock.base_model else ""
    out.write(f"{loaded.lock_path}: {len(loaded.lock.adapters)} locked adapter(s) match S3 (SHA-256 and size){base}\n")
