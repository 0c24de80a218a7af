"""Pinning the base model's S3 objects in the lock, and telling what changed since.

The base model is the part every tenant shares; whoever can write its S3 location changes every
adapter's answers at the next instance start. S3 keeps a checksum of its own with each object
(SHA-256 where it was uploaded with one, otherwise the CRC the uploader's SDK chose, multipart or
not): the pin records it per object, and `lock --check` compares. What is pinned: every object
under an uncompressed prefix (the set of keys too: an added file counts), or the one archive.
What is not: SageMaker itself reads whatever is there when an instance starts; the pin only makes a
change visible to a check run before deploying. No bytes are downloaded (one ``ListObjectsV2``
page per 1,000 objects and one ``HeadObject`` per object).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from cdk_adapters.artifacts.s3_checksum import denied_reason, stored_checksum
from cdk_adapters.contract.s3_url import parse_s3_url
from cdk_adapters.manifest.lock import BaseModelPin, PinnedObject
from cdk_adapters.problems import Problem

SUBJECT = "base model"
FIELD = "artifact"


def read_base_pin(s3_client: Any, uri: str, *, expected_bucket_owner: str | None) -> tuple[BaseModelPin | None, list[Problem]]:
    """What S3 holds at the manifest's ``base_model.artifact`` now; problems when it cannot be pinned."""
    url = parse_s3_url(uri)
    owner = {"ExpectedBucketOwner": expected_bucket_owner} if expected_bucket_owner else {}
    try:
        keys = [url.key] if not uri.endswith("/") else _keys_under(s3_client, url.bucket, url.key, owner)
        if not keys:
            return None, [Problem(SUBJECT, FIELD, f"{uri} holds no objects")]
        objects: dict[str, PinnedObject] = {}
        unchecked: list[str] = []
        for key in keys:
            head = s3_client.head_object(Bucket=url.bucket, Key=key, ChecksumMode="ENABLED", **owner)
            checksum = stored_checksum(head)
            name = key[len(url.key) :] if uri.endswith("/") else key
            if checksum is None:
                unchecked.append(name)
            else:
                objects[name] = PinnedObject(size=int(head["ContentLength"]), checksum=checksum)
    except ClientError as error:
        reason = denied_reason(error, url.bucket, expected_bucket_owner) or str(error)
        return None, [Problem(SUBJECT, FIELD, f"cannot read {uri}: {reason}")]
    if unchecked:
        shown = ", ".join(unchecked[:5]) + (f" and {len(unchecked) - 5} more" if len(unchecked) > 5 else "")
        return None, [
            Problem(
                SUBJECT,
                FIELD,
                f"S3 stores no checksum for {shown} under {uri}, so it cannot be pinned; copy it again with a "
                "checksum (e.g. `aws s3 cp --checksum-algorithm SHA256`)",
            )
        ]
    return BaseModelPin(uri=uri, objects=objects), []


def pin_differences(pinned: BaseModelPin, now: BaseModelPin) -> list[str]:
    """Each object added, removed, or whose size or checksum changed (empty when identical)."""
    found: list[str] = []
    for name in sorted(set(pinned.objects) | set(now.objects)):
        before, after = pinned.objects.get(name), now.objects.get(name)
        if before is None:
            found.append(f"{name} was added")
        elif after is None:
            found.append(f"{name} was removed")
        elif before != after:
            found.append(f"{name} changed ({before.checksum}, {before.size} bytes -> {after.checksum}, {after.size} bytes)")
    return found


def _keys_under(s3_client: Any, bucket: str, prefix: str, owner: dict[str, str]) -> list[str]:
    keys: list[str] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, **owner):
        keys += [item["Key"] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
    return keys
