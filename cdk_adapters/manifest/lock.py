"""The lock file: what each published (``s3://``) adapter archive contains, committed beside the manifest.

Synth must be offline and reproducible, yet the gate must see an S3 adapter's rank and target
modules. `cdk-adapters publish` and `cdk-adapters lock` read the archive once and record its facts
and sha256 here; synth checks the facts, and `lock` refuses an object whose bytes changed under a
name that was already locked (a published name never changes content).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cdk_adapters.contract.s3_url import S3Url, S3UrlError, parse_s3_url
from cdk_adapters.gate.adapter_facts import AdapterFacts
from cdk_adapters.problems import ConfigurationError, Problem

LOCK_VERSION = 2
"""2: the gate's facts sit under ``facts`` exactly as `AdapterFacts` defines them (1 repeated them flat)."""
LOCK_SUFFIX = ".lock.json"


def _s3_url(value: str) -> S3Url:
    """`value` parsed by the one S3 URL rule, its fault as a validation error."""
    try:
        return parse_s3_url(value)
    except S3UrlError as error:
        raise ValueError(str(error)) from None


class LockEntry(BaseModel):
    """One published archive: where, which bytes, and the facts the gate needs.

    `facts` is the gate's own `AdapterFacts` (pydantic validates the dataclass field by field and
    refuses unknown keys), so the lock records exactly what the checks read, with one definition.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str
    """``s3://bucket/key.tar.gz``."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(gt=0)
    facts: AdapterFacts

    @field_validator("uri")
    @classmethod
    def _uri_is_an_archive(cls, value: str) -> str:
        if not _s3_url(value).key.endswith(".tar.gz"):
            raise ValueError(f"{value!r} must name an s3://<bucket>/<key>.tar.gz archive")
        return value


class PinnedObject(BaseModel):
    """One S3 object of the base model as S3 itself describes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(ge=0)
    checksum: str = Field(pattern=r"^(SHA256|CRC64NVME|CRC32C|CRC32|SHA1):\S+$")
    """``<ALGORITHM>:<value>`` exactly as S3 stores it (``HeadObject`` with ``ChecksumMode=ENABLED``)."""


class BaseModelPin(BaseModel):
    """The base model's S3 objects when they were pinned (`cdk-adapters lock --base-model`).

    SageMaker reads whatever is at the artifact when an instance starts; this pin lets
    `cdk-adapters lock --check` fail before a deploy if any object was replaced, added or removed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str
    """The manifest's ``base_model.artifact`` that was pinned."""
    objects: dict[str, PinnedObject] = Field(min_length=1)
    """Key (relative to a prefix artifact; the archive's own key for an archive) -> its size and checksum."""

    @field_validator("uri")
    @classmethod
    def _uri_is_s3(cls, value: str) -> str:
        _s3_url(value)
        return value


class LockFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = LOCK_VERSION
    adapters: dict[str, LockEntry] = Field(default_factory=dict)
    base_model: BaseModelPin | None = None
    """Present once `cdk-adapters lock --base-model` pinned it; every later `lock` re-verifies it."""

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != LOCK_VERSION:
            raise ValueError(
                f"lock file version {value} is not {LOCK_VERSION}; rewrite it with `cdk-adapters lock --manifest MANIFEST`"
            )
        return value


def lock_path_for(manifest_path: Path) -> Path:
    """``manifests/example.yaml`` -> ``manifests/example.lock.json``."""
    manifest_path = Path(manifest_path)
    return manifest_path.with_name(manifest_path.name.rsplit(".", 1)[0] + LOCK_SUFFIX)


def load_lock(path: Path) -> LockFile:
    """The lock file at `path`; an absent file is an empty lock (nothing published yet)."""
    path = Path(path)
    if not path.exists():
        return LockFile()
    subject = f"lock file '{path}'"
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigurationError([Problem(subject, "(file)", f"is not valid JSON: {error}")]) from None
    try:
        return LockFile.model_validate(data)
    except ValidationError as error:
        raise ConfigurationError(
            [
                Problem(
                    subject,
                    ".".join(str(part) for part in detail["loc"]) or "(file)",
                    detail["msg"].removeprefix("Value error, "),
                )
                for detail in error.errors()
            ]
        ) from None


def write_lock(path: Path, lock: LockFile) -> None:
    """Write sorted, indented JSON so that the lock diffs well in review."""
    data = lock.model_dump(mode="json")
    data["adapters"] = dict(sorted(data["adapters"].items()))
    if data["base_model"] is None:
        del data["base_model"]  # lock files without a pin stay as they were
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
