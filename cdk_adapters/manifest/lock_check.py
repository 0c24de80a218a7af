"""`cdk-adapters lock --check`: does every locked adapter's S3 object still hold the locked bytes?

Synth trusts the lock; SageMaker downloads the object again for every new copy. If anyone with
``s3:PutObject`` replaced an archive, the two now disagree, and a CI step running this check fails
before the next deploy. It reads S3's own ``ChecksumSHA256`` and size (one ``HeadObject`` per
adapter, nothing downloaded), never user metadata, and writes nothing.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from cdk_adapters.artifacts.s3_checksum import denied_reason, stored_object
from cdk_adapters.contract.s3_url import parse_s3_url
from cdk_adapters.manifest.base_pin import pin_differences, read_base_pin
from cdk_adapters.manifest.loader import LoadedManifest
from cdk_adapters.problems import Problem

REPUBLISH = "publish the content under a new version name with `cdk-adapters publish`, or restore the locked object"


def check_lock_against_s3(loaded: LoadedManifest, s3_client: Any, *, expected_bucket_owner: str | None) -> list[Problem]:
    """Every disagreement between the lock (each entry, each ``s3://`` row of the manifest, and the base
    model when it is pinned) and S3."""
    problems = _base_model_problems(loaded, s3_client, expected_bucket_owner)
    for row in loaded.manifest.adapters:
        if row.is_s3 and row.name not in loaded.lock.adapters:
            problems.append(
                Problem(f"adapter '{row.name}'", "source", f"{row.source} has no lock entry; run `cdk-adapters lock`")
            )
        elif row.is_s3 and loaded.lock.adapters[row.name].uri != row.source:
            problems.append(
                Problem(
                    f"adapter '{row.name}'",
                    "source",
                    f"the manifest says {row.source} but the lock entry is for {loaded.lock.adapters[row.name].uri}; "
                    "run `cdk-adapters lock`",
                )
            )
    for name, entry in sorted(loaded.lock.adapters.items()):
        subject = f"adapter '{name}'"
        url = parse_s3_url(entry.uri)  # LockEntry accepted it
        locked = f"the lock records sha256 {entry.sha256[:12]}..., {entry.size} bytes"
        try:
            stored = stored_object(s3_client, url.bucket, url.key, expected_bucket_owner=expected_bucket_owner)
        except ClientError as error:
            reason = denied_reason(error, url.bucket, expected_bucket_owner) or str(error)
            problems.append(Problem(subject, "source", f"cannot read {entry.uri}: {reason}"))
            continue
        if stored is None:
            problems.append(Problem(subject, "source", f"{entry.uri} does not exist ({locked}); {REPUBLISH}"))
        elif stored.sha256 is None:
            problems.append(
                Problem(
                    subject,
                    "source",
                    f"{entry.uri}: {stored.note}, so it cannot be checked against the lock ({locked}); {REPUBLISH}",
                )
            )
        elif (stored.sha256, stored.size) != (entry.sha256, entry.size):
            differs = [
                what
                for what, same in (("sha256", stored.sha256 == entry.sha256), ("size", stored.size == entry.size))
                if not same
            ]
            problems.append(
                Problem(
                    subject,
                    "source",
                    f"{entry.uri} differs from the lock in {' and '.join(differs)}: S3 holds sha256 {stored.sha256[:12]}..., "
                    f"{stored.size} bytes; {locked}. A published adapter was replaced: {REPUBLISH}",
                )
            )
    return problems


def _base_model_problems(loaded: LoadedManifest, s3_client: Any, owner: str | None) -> list[Problem]:
    pinned = loaded.lock.base_model
    if pinned is None:
        return []
    artifact = loaded.manifest.base_model.artifact
    if pinned.uri != artifact:
        return [
            Problem(
                "base model", "artifact", f"the manifest says {artifact} but the lock pins {pinned.uri}; run `cdk-adapters lock`"
            )
        ]
    now, problems = read_base_pin(s3_client, artifact, expected_bucket_owner=owner)
    if now is None:
        return problems
    differences = pin_differences(pinned, now)
    if not differences:
        return []
    return [Problem("base model", "artifact", f"{artifact} differs from its pin in the lock: {'; '.join(differences)}")]
