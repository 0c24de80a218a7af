"""Rebuilding lock entries from the published S3 objects (`cdk-adapters lock`).

Each ``s3://`` row's archive is downloaded once, hashed, and put through the whole gate (layout,
weights, size, as well as the facts). A row whose locked sha256 no longer matches the object is an
error: a published name's content changed, which must never happen silently. The object must carry
S3's own SHA-256 equal to the downloaded bytes' (as `cdk-adapters publish` uploads it), so that
`cdk-adapters lock --check` can later verify it without downloading.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk_adapters.artifacts.s3_checksum import StoredObject, from_response
from cdk_adapters.contract.s3_url import parse_s3_url
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.adapter_facts import AdapterFacts
from cdk_adapters.gate.check import check_adapter_contents
from cdk_adapters.manifest.base_pin import pin_differences, read_base_pin
from cdk_adapters.manifest.gating import manifest_reference
from cdk_adapters.manifest.loader import LoadedManifest
from cdk_adapters.manifest.lock import BaseModelPin, LockEntry, LockFile
from cdk_adapters.problems import Problem

_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class LockRefresh:
    """The lock the manifest's S3 rows produce, every problem found, and the names whose entry changed
    (added, updated or removed). Write `lock` only when `problems` is empty."""

    lock: LockFile
    problems: list[Problem]
    changed: list[str]


def lock_entry_for_archive(uri: str, archive: Path, sha256: str, size: int) -> LockEntry | None:
    """The lock entry for a local copy of a published archive (None when its config is unreadable)."""
    facts = AdapterFacts.from_contents(AdapterContents.from_archive(archive))
    return None if facts is None else LockEntry(uri=uri, sha256=sha256, size=size, facts=facts)


def refresh_lock(
    loaded: LoadedManifest, s3_client: Any, *, expected_bucket_owner: str | None = None, pin_base_model: bool = False
) -> LockRefresh:
    """Fetch each ``s3://`` adapter, check it, and build the new lock (written by the caller).

    :param expected_bucket_owner: account that must own each bucket, sent on every S3 call.
    :param pin_base_model: also pin the base model's S3 objects (`cdk_adapters.manifest.base_pin`);
        a lock that already has a pin is always re-verified and kept.
    """
    manifest = loaded.manifest
    reference = manifest_reference(manifest)
    entries: dict[str, LockEntry] = {}
    problems: list[Problem] = []
    with tempfile.TemporaryDirectory(prefix="cdk-adapters-lock-") as scratch:
        for row in manifest.adapters:
            if not row.is_s3:
                continue
            subject = f"adapter '{row.name}'"
            url = parse_s3_url(row.source)  # the schema accepted it
            local = Path(scratch) / f"{row.name}.tar.gz"
            try:
                sha256, size, stored = _download(s3_client, url.bucket, url.key, local, expected_bucket_owner)
            except Exception as error:  # botocore errors carry the reason in their message
                problems.append(Problem(subject, "source", f"cannot read {row.source}: {error}"))
                continue
            previous = loaded.lock.adapters.get(row.name)
            if previous is not None and previous.uri == row.source and previous.sha256 != sha256:
                problems.append(
                    Problem(
                        subject,
                        "source",
                        f"{row.source} changed content since it was locked (sha256 {previous.sha256[:12]}... -> "
                        f"{sha256[:12]}...); published adapters are immutable: restore the object, or publish the "
                        "new content under a new version name",
                    )
                )
                continue
            if stored.sha256 != sha256:
                why = stored.note or f"S3's SHA-256 {(stored.sha256 or '')[:12]}... is not the downloaded bytes' {sha256[:12]}..."
                problems.append(
                    Problem(
                        subject,
                        "source",
                        f"{row.source}: {why}, so `cdk-adapters lock --check` could not verify it later; upload it with "
                        "`cdk-adapters publish` (or `aws s3 cp --checksum-algorithm SHA256`) under a new version name",
                    )
                )
                continue
            problems += check_adapter_contents(row.name, AdapterContents.from_archive(local), reference)
            entry = lock_entry_for_archive(row.source, local, sha256, size)
            if entry is None:
                continue
            entries[row.name] = entry
    base_pin = loaded.lock.base_model
    if pin_base_model or base_pin is not None:
        base_pin, base_problems = _refreshed_base_pin(loaded, s3_client, expected_bucket_owner)
        problems += base_problems
    old = loaded.lock.adapters
    changed = sorted(name for name in set(old) | set(entries) if old.get(name) != entries.get(name))
    if base_pin != loaded.lock.base_model:
        changed.append("base model")
    lock = LockFile(adapters=dict(sorted(entries.items())), base_model=base_pin)
    return LockRefresh(lock=lock, problems=problems, changed=changed)


def _refreshed_base_pin(loaded: LoadedManifest, s3_client: Any, owner: str | None) -> tuple[BaseModelPin | None, list[Problem]]:
    """The base model's pin now; an object changed in place under a pinned artifact is refused."""
    uri = loaded.manifest.base_model.artifact
    now, problems = read_base_pin(s3_client, uri, expected_bucket_owner=owner)
    previous = loaded.lock.base_model
    if now is None or previous is None or previous.uri != uri:
        return now, problems  # first pin, or a new artifact (a base upgrade is a manifest change)
    differences = pin_differences(previous, now)
    if differences:
        return previous, [
            Problem(
                "base model",
                "artifact",
                f"{uri} changed since it was pinned: {'; '.join(differences)}. A base model is shared by every adapter: "
                "restore the objects, or copy the new base to a new prefix and change base_model.artifact",
            )
        ]
    return now, []


def _download(
    s3_client: Any, bucket: str, key: str, target: Path, expected_bucket_owner: str | None
) -> tuple[str, int, StoredObject]:
    request: dict[str, Any] = {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}
    if expected_bucket_owner:
        request["ExpectedBucketOwner"] = expected_bucket_owner
    response = s3_client.get_object(**request)
    digest = hashlib.sha256()
    size = 0
    with open(target, "wb") as out:
        for chunk in iter(lambda: response["Body"].read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return digest.hexdigest(), size, from_response(response)
