"""Immutable publishing of adapter archives to S3: a published name's content never changes.

Two guards, because either alone has a gap: a ``HeadObject`` beforehand gives a clear message
(and makes re-publishing identical bytes a no-op), and the upload itself is conditional
(``If-None-Match: *``) so that two publishers racing for the same key cannot both win. S3 verifies
the upload against the SHA-256 we send (``ChecksumSHA256``), and the hex digest is stored in the
object's metadata for `cdk-adapters lock` and for people.
"""

from __future__ import annotations

import base64
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, TextIO

from botocore.exceptions import ClientError

from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_PREFIX = "adapters"
ARCHIVE_NAME = "adapter.tar.gz"
SHA256_METADATA = "sha256"
NAME_METADATA = "adapter-name"
SINGLE_PUT_LIMIT = 5 * 1024**3
"""PutObject takes at most 5 GiB; LoRA adapters are 20-200 MB."""
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
    prefix: str = DEFAULT_PREFIX,
    kms_key_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PublishedAdapter:
    """Upload `archive` to ``s3://bucket/<prefix>/<name>/adapter.tar.gz`` unless that key exists.

    Identical bytes already there are accepted (``uploaded=False``) so a retried publish succeeds;
    different bytes raise `ConfigurationError`: publish a new version (``-v<N+1>``) instead.

    :param sha256: hex SHA-256 of `archive` (from `package_adapter`).
    :param kms_key_id: encrypt with this KMS key (SSE-KMS). Default: the bucket's default encryption.
    :param progress: called with (bytes sent, total) while uploading.
    """
    archive = Path(archive)
    size = archive.stat().st_size
    key = adapter_key(name, prefix)
    subject = f"adapter '{name}'"
    if size > SINGLE_PUT_LIMIT:
        raise ConfigurationError([Problem(subject, "source", f"archive is {size} bytes; over the 5 GiB a LoRA adapter never needs")])
    existing = _head(s3_client, bucket, key)
    if existing is not None:
        if existing.get("Metadata", {}).get(SHA256_METADATA) == sha256:
            return PublishedAdapter(name, bucket, key, sha256, size, uploaded=False)
        raise _refused(subject, bucket, key)
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
                ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode("ascii"),
                IfNoneMatch="*",
                Metadata={SHA256_METADATA: sha256, NAME_METADATA: name},
                **extra,
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if code in _REFUSED_CODES or status in _REFUSED_CODES:
                raise _refused(subject, bucket, key) from None
            raise
    return PublishedAdapter(name, bucket, key, sha256, size, uploaded=True)


def _head(s3_client: Any, bucket: str, key: str) -> dict | None:
    try:
        return s3_client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if str(error.response.get("Error", {}).get("Code")) in {"404", "NoSuchKey", "NotFound"}:
            return None
        raise


def _refused(subject: str, bucket: str, key: str) -> ConfigurationError:
    return ConfigurationError(
        [
            Problem(
                subject,
                "name",
                f"s3://{bucket}/{key} already exists with different content; a published name never changes: "
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


class ProgressBar:
    """``[#########...........]  45%  12.3/27.0 MB`` on one line of `stream` (stderr by default)."""

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
        self.stream.write(f"\r{self.label} [{bar}] {percent:3d}%  {done / 1e6:.1f}/{total / 1e6:.1f} MB{end}")
        self.stream.flush()
