"""What S3 itself says an object holds: its size and the SHA-256 S3 computed and verified at upload.

User metadata (``x-amz-meta-*``) is whatever the writer chose to send, so it proves nothing about
the bytes. S3's own ``ChecksumSHA256`` is different: S3 checks the uploaded bytes against it and
refuses the upload on a mismatch, and nobody can change it afterwards without writing a new object.
`publish` and `lock --check` compare with this value only.

Only a single-part upload has a full-object SHA-256; a multipart upload's SHA-256 is a checksum of
part checksums (``<base64>-<parts>``), which cannot be compared with a file's digest.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

ACCOUNT_ID = re.compile(r"^\d{12}$")
_MISSING = {"404", "NoSuchKey", "NotFound"}
_DENIED = {"403", "AccessDenied", "Forbidden"}
CHECKSUM_ALGORITHMS = ("SHA256", "CRC64NVME", "CRC32C", "CRC32", "SHA1")
"""The checksums S3 can store with an object, strongest first for pinning."""


@dataclass(frozen=True)
class StoredObject:
    """An object's size and S3's own hex SHA-256 (None when S3 stores no full-object SHA-256)."""

    size: int
    sha256: str | None
    note: str = ""
    """Why `sha256` is None: no SHA-256 stored, or only a multipart (composite) one."""


def sha256_b64(hex_digest: str) -> str:
    """The base64 form S3's ``ChecksumSHA256`` uses, from a hex digest."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def stored_object(s3_client: Any, bucket: str, key: str, *, expected_bucket_owner: str | None) -> StoredObject | None:
    """``HeadObject`` with ``ChecksumMode=ENABLED``; None when the object does not exist.

    Other errors (403 for a bucket another account owns, or no permission) propagate.
    With SSE-KMS, S3 returns the checksum only to callers allowed ``kms:Decrypt`` on the key.
    """
    request: dict[str, Any] = {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}
    if expected_bucket_owner:
        request["ExpectedBucketOwner"] = expected_bucket_owner
    try:
        head = s3_client.head_object(**request)
    except ClientError as error:
        if str(error.response.get("Error", {}).get("Code")) in _MISSING:
            return None
        raise
    return from_response(head)


def from_response(response: dict[str, Any]) -> StoredObject:
    """The size and checksum in a ``HeadObject`` or ``GetObject`` response made with ``ChecksumMode=ENABLED``."""
    size = int(response["ContentLength"])
    checksum = response.get("ChecksumSHA256")
    if not checksum:
        stored = sorted(algorithm for algorithm in CHECKSUM_ALGORITHMS if response.get(f"Checksum{algorithm}"))
        note = f"S3 stores only {', '.join(stored)} for it" if stored else "S3 stores no checksum for it"
        return StoredObject(size, None, note + ", not SHA-256 (it was not uploaded with ChecksumAlgorithm=SHA256)")
    if "-" in checksum or response.get("ChecksumType") == "COMPOSITE":
        return StoredObject(size, None, "S3 stores a multipart (composite) SHA-256 for it, not one of the whole object")
    try:
        return StoredObject(size, base64.b64decode(checksum, validate=True).hex())
    except binascii.Error:
        return StoredObject(size, None, f"S3 returned an unreadable ChecksumSHA256 {checksum!r}")


def denied_reason(error: ClientError, bucket: str, expected_bucket_owner: str | None) -> str | None:
    """A readable reason for a 403 (S3 answers 403 when the bucket's owner is not the expected one);
    None for any other error."""
    if str(error.response.get("Error", {}).get("Code")) not in _DENIED:
        return None
    owner = f"bucket '{bucket}' is not owned by account {expected_bucket_owner}, or " if expected_bucket_owner else ""
    return f"access denied (403): {owner}these credentials may not use it (pass --expected-bucket-owner for a bucket another account owns)"


def stored_checksum(response: dict[str, Any]) -> str | None:
    """``<ALGORITHM>:<value>`` of the checksum S3 stores for the object (``ChecksumMode=ENABLED``
    response), as S3 stores it (full-object or multipart); None when S3 stores none.

    A base model's multi-gigabyte weights are usually multipart uploads, so their checksum cannot
    be compared with a file's digest; it still changes whenever the object is replaced, which is
    what a pin needs."""
    for algorithm in CHECKSUM_ALGORITHMS:
        value = response.get(f"Checksum{algorithm}")
        if value:
            return f"{algorithm}:{value}"
    return None
