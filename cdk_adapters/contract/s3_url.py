"""The one parser for ``s3://bucket/key`` URLs, with messages that say what is wrong.

Adapter artifacts, adapter locations, the manifest and its lock file, and the discovery record's
serving reference (which a tenant's import reads) all take S3 URLs and read them with this one
parser. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCHEME = "s3://"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
BUCKET_LENGTH = (3, 63)
"""General purpose bucket names are 3 to 63 characters (S3 bucket naming rules)."""


@dataclass(frozen=True)
class S3Url:
    bucket: str
    key: str
    """Everything after ``<bucket>/``; may be empty (the whole bucket) for a location."""

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"

    def holds(self, bucket: str, key: str) -> bool:
        """Whether object ``bucket/key`` lies under this URL taken as a prefix (`as_prefix`)."""
        return bucket == self.bucket and key.startswith(as_prefix(self.key))


def as_prefix(key: str) -> str:
    """A key prefix that names a folder: ``adapters`` is read as ``adapters/``, so it never also
    covers ``adapters-old/``; the empty prefix is the whole bucket."""
    return key if key == "" or key.endswith("/") else key + "/"


class S3UrlError(ValueError):
    """What is wrong with a URL, in words a person can act on."""


def parse_s3_url(url: object, *, key_required: bool = True) -> S3Url:
    """Split `url` into bucket and key, or raise `S3UrlError` naming the first thing wrong."""
    if not isinstance(url, str):
        raise S3UrlError(f"must be an s3://<bucket>/<key> string, got {url!r}")
    if not url.startswith(SCHEME):
        raise S3UrlError(f"{url!r} must start with {SCHEME!r}")
    bucket, slash, key = url[len(SCHEME) :].partition("/")
    low, high = BUCKET_LENGTH
    if not bucket:
        raise S3UrlError(f"{url!r} names no bucket")
    if not low <= len(bucket) <= high:
        raise S3UrlError(f"{url!r}: bucket {bucket!r} is {len(bucket)} character(s); S3 bucket names are {low} to {high}")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise S3UrlError(
            f"{url!r}: bucket {bucket!r} may hold only lower-case letters, digits, dots and hyphens, "
            "and must begin and end with a letter or digit"
        )
    if key_required and not key:
        raise S3UrlError(f"{url!r} names no object key after the bucket")
    if not slash and not key_required:
        key = ""
    if any(character.isspace() for character in key):
        raise S3UrlError(f"{url!r}: the key contains white space")
    return S3Url(bucket, key)
