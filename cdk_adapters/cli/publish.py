"""``cdk-adapters publish``: validate, package and upload an adapter under a new versioned name; never overwrites."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import (
    PROG,
    Failure,
    base_options,
    checked_directory,
    expected_bucket_owner,
    owner_option,
    owner_problems,
    resolve_reference,
)
from cdk_adapters.gate import CoHostedAdapter
from cdk_adapters.gate.checks.co_hosted import VERSION_SUFFIX_CHECK
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    publish = commands.add_parser(
        "publish",
        help="validate, package and upload an adapter under a new versioned name; never overwrites",
        description=(
            "Validate DIR, package it, upload it to s3://BUCKET/PREFIX/NAME/adapter.tar.gz with a conditional "
            "write (never overwriting) and S3's own SHA-256 checksum, write its lock entry, and print the S3 URI. "
            "An object already at that key counts as the same only when S3's stored SHA-256 and size match."
        ),
    )
    publish.add_argument("directory", metavar="DIR", type=Path, help="PEFT output directory")
    publish.add_argument("--name", required=True, help="versioned adapter name, e.g. support-triage-v4")
    publish.add_argument("--bucket", required=True, help="S3 bucket for adapter archives")
    publish.add_argument("--prefix", default="adapters", help="key prefix (default: adapters)")
    publish.add_argument("--kms-key-id", help="encrypt with this KMS key (default: the bucket's default encryption)")
    publish.add_argument("--include-tokenizer", action="store_true", help="also package tokenizer files found in DIR")
    publish.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    publish.add_argument("--no-progress", action="store_true", help="do not draw the upload progress bar")
    owner_option(publish)
    base_options(publish, lock=True)
    publish.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import boto3

    from cdk_adapters.artifacts.packaging import package_adapter
    from cdk_adapters.artifacts.publish import ProgressBar, publish_archive
    from cdk_adapters.endpoint.names import validate_adapter_name
    from cdk_adapters.manifest import LockFile, load_lock, lock_path_for, write_lock
    from cdk_adapters.manifest.refresh import lock_entry_for_archive

    name = args.name
    subject = f"adapter '{name}'"
    reference, loaded = resolve_reference(args)
    name_problems = validate_adapter_name(name, subject) + VERSION_SUFFIX_CHECK([CoHostedAdapter(name, ())])
    try:
        checked_directory(args, name, reference)
        directory_problems: list[Problem] = []
    except Failure as failure:
        directory_problems = failure.problems
    problems = name_problems + directory_problems + owner_problems(args)
    if problems:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was packaged or uploaded")
    owner = expected_bucket_owner(args)
    lock_path = args.lock_file or (lock_path_for(loaded.path) if loaded else None)
    with tempfile.TemporaryDirectory(prefix="cdk-adapters-publish-") as scratch:
        packaged = package_adapter(args.directory, Path(scratch) / "adapter.tar.gz", include_tokenizer=args.include_tokenizer)
        client = boto3.client("s3", region_name=args.region)
        published = publish_archive(
            client,
            packaged.path,
            name=name,
            bucket=args.bucket,
            prefix=args.prefix,
            sha256=packaged.sha256,
            expected_bucket_owner=owner,
            kms_key_id=args.kms_key_id,
            progress=None if args.no_progress else ProgressBar(f"uploading {name}", err),
        )
        entry = lock_entry_for_archive(published.uri, packaged.path, packaged.sha256, packaged.size)
    if not published.uploaded:
        err.write(f"{PROG}: {published.uri} already holds these exact bytes; nothing uploaded\n")
    if lock_path is not None and entry is not None:
        lock = load_lock(lock_path) if lock_path.exists() else LockFile()
        lock.adapters[name] = entry
        write_lock(lock_path, lock)
        err.write(f"{PROG}: wrote the lock entry for '{name}' to {lock_path}; add the row to the manifest and commit both\n")
    out.write(f"{published.uri}\n")
