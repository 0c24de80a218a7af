"""Immutable publishing of adapter archives to S3: a published name's content never changes.

Two guards, because either alone has a gap: a ``HeadObject`` beforehand gives a clear message
(and makes re-publishing identical bytes a no-op), and the upload itself is conditional
(``If-None-Match: *``) so that two publishers racing for the same key cannot both win. The upload
asks S3 for its own SHA-256 (``ChecksumAlgorithm=SHA256`` with the digest we computed): S3 refuses
bytes that do not match and keeps the checksum with the object, and "identical bytes" means S3's
stored ``ChecksumSHA256`` and size equal ours, never what user metadata claims.

Every call names the account that must own the bucket (``ExpectedBucketOwner``), so a bucket of the
same name in another account is never written to or trusted. `cdk_adapters.artifacts.bucket` makes
the bucket itself refuse unconditional writes and deletes under the adapter prefix.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from botocore.exceptions import ClientError

from cdk_adapters.artifacts.s3_checksum import StoredObject, denied_reason, sha256_b64, stored_object
from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_PREFIX = "adapters"
ARCHIVE_NAME = "adapter.tar.gz"
NAME_METADATA = "adapter-name"
"""Informational only: which adapter name the object was published as."""
SINGLE_PUT_LIMIT = 5 * 1024**3
"""PutObject takes at most 5 GiB; LoRA adapters are 20-200 MB. One part keeps a full-object SHA-256."""
_REFUSED_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}


@dataclass(frozen=True)
class PublishedAdapter:
    """Where an adapter archive now lives, and whether this call uploaded it."""

    name: str
    bucket: str
    key: str
    sha256: str
    size: int
    uploaded: bool

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def adapter_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>/<name>/adapter.tar.gz``: one key per versioned name."""
    prefix = prefix.strip("/")
    return f"{prefix}/{name}/{ARCHIVE_NAME}" if prefix else f"{name}/{ARCHIVE_NAME}"


def publish_archive(
    s3_client: Any,
    archive: Path,
    *,
    name: str,
    bucket: str,
    sha256: str,
    expected_bucket_owner: str | None = None,
    prefix: str = DEFAULT_PREFIX,
    kms_key_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PublishedAdapter:
    """Upload `archive` to ``s3://bucket/<prefix>/<name>/adapter.tar.gz`` unless that key exists.

    Bytes already there whose S3-stored SHA-256 and size equal ours are accepted (``uploaded=False``)
    so a retried publish succeeds; anything else there (other bytes, or an object S3 holds no
    SHA-256 for) raises `ConfigurationError`: publish a new version (``-v<N+1>``) instead.

    :param sha256: hex SHA-256 of `archive` (from `package_adapter`).
    :param expected_bucket_owner: 12-digit account that must own `bucket`, sent on every call
        (the CLI defaults it to the caller's account). None sends no owner check.
    :param kms_key_id: encrypt with this KMS key (SSE-KMS). Default: the bucket's default encryption.
    :param progress: called with (bytes sent, total) while uploading.
    """
    archive = Path(archive)
    size = archive.stat().st_size
    key = adapter_key(name, prefix)
    subject = f"adapter '{name}'"
    if size > SINGLE_PUT_LIMIT:
        raise ConfigurationError(
            [Problem(subject, "source", f"archive is {size} bytes; over the 5 GiB a LoRA adapter never needs")]
        )
    owner = {"ExpectedBucketOwner": expected_bucket_owner} if expected_bucket_owner else {}
    try:
        existing = stored_object(s3_client, bucket, key, expected_bucket_owner=expected_bucket_owner)
    except ClientError as error:
        reason = denied_reason(error, bucket, expected_bucket_owner)
        if reason is None:
            raise
        raise ConfigurationError(
            [Problem(subject, "bucket", f"s3://{bucket}/{key}: {reason}")], heading="nothing was uploaded"
        ) from None
    if existing is not None:
        return _already_there(existing, subject, name, bucket, key, sha256, size)
    extra: dict[str, Any] = {}
    if kms_key_id:
        extra.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=kms_key_id)
    with open(archive, "rb") as stream:
        body = _ProgressReader(stream, size, progress) if progress else stream
        try:
            s3_client.put_object(
                Bucket=bucket,
                Key=key,
                Body=body,
                ContentLength=size,
                ContentType="application/gzip",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=sha256_b64(sha256),
                IfNoneMatch="*",
                Metadata={NAME_METADATA: name},
                **owner,
                **extra,
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if code not in _REFUSED_CODES and status not in _REFUSED_CODES:
                raise
            # Another publisher won the race: fine if it wrote these same bytes.
            winner = stored_object(s3_client, bucket, key, expected_bucket_owner=expected_bucket_owner)
            if winner is None:
                raise
            return _already_there(winner, subject, name, bucket, key, sha256, size)
    return PublishedAdapter(name, bucket, key, sha256, size, uploaded=True)


def _already_there(
    existing: StoredObject, subject: str, name: str, bucket: str, key: str, sha256: str, size: int
) -> PublishedAdapter:
    if existing.sha256 == sha256 and existing.size == size:
        return PublishedAdapter(name, bucket, key, sha256, size, uploaded=False)
    if existing.sha256 is None:
        detail = f"already exists and {existing.note}, so it cannot be shown to hold these bytes"
    else:
        detail = (
            f"already exists with different content (S3's SHA-256 {existing.sha256[:12]}..., {existing.size} bytes; "
            f"this archive {sha256[:12]}..., {size} bytes)"
        )
    raise _refused(subject, bucket, key, detail)


def _refused(subject: str, bucket: str, key: str, detail: str) -> ConfigurationError:
    return ConfigurationError(
        [
            Problem(
                subject,
                "name",
                f"s3://{bucket}/{key} {detail}; a published name never changes: "
                "publish the new content under the next version (e.g. -v4), add that row, deploy, move callers, "
                "then remove the old row",
            )
        ],
        heading="refused to overwrite a published adapter",
    )


class _ProgressReader:
    """A read-only file wrapper that reports how far botocore has read (it may rewind and re-read)."""

    def __init__(self, stream: BinaryIO, total: int, progress: Callable[[int, int], None]) -> None:
        self._stream = stream
        self._total = total
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._progress(self._stream.tell(), self._total)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True


def _size(done: int, total: int) -> str:
    """``12.3/27.0 MB``, or ``512/2,048 bytes`` where MB would read 0.0/0.0."""
    if total < 100_000:
        return f"{done:,}/{total:,} bytes"
    return f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"


class ProgressBar:
    """``[#########...........]  45%  12.3/27.0 MB`` on one line of `stream` (stderr by default);
    a file under 0.1 MB is counted in bytes."""

    WIDTH = 30

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self._last_shown = -1

    def __call__(self, done: int, total: int) -> None:
        percent = 100 if total == 0 else min(100, done * 100 // total)
        if percent == self._last_shown:
            return
        self._last_shown = percent
        filled = self.WIDTH * percent // 100
        bar = "#" * filled + "." * (self.WIDTH - filled)
        end = "\n" if percent == 100 else ""
        self.stream.write(f"\r{self.label} [{bar}] {percent:3d}%  {_size(done, total)}{end}")
        self.stream.flush()
