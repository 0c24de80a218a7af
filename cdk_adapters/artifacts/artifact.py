"""Where one LoRA adapter's archive lives: a ``.tar.gz`` in S3 with the adapter files at its root.

SageMaker downloads the archive with the endpoint's execution role and extracts it before calling
the container's ``POST /adapters``. Published archives (``from_s3_url``, ``from_bucket``) are read
through the endpoint's declared `AdapterLocation`s, so an artifact only says where it is; local
archives (``from_archive``) become CDK file assets, which the role reads object by object.

A local archive is at hand at synth, so it goes through the compatibility gate there
(`compatibility_problems`), exactly as ``cdk-adapters validate`` and the manifest check it: the
same rules, messages and rule ids, instead of a refusal by the container at deploy. A published
archive's files were checked when it was published or locked (``cdk-adapters lock``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from aws_cdk import AssetStaging, Aws, FileAssetPackaging, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_adapters.contract.s3_url import S3UrlError, parse_s3_url
from cdk_adapters.gate import AdapterFacts, Reference
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.check import check_adapter_contents
from cdk_adapters.private.cdk_tokens import is_unresolved
from cdk_adapters.problems import Problem

ARCHIVE_SUFFIX = ".tar.gz"
TAR_SUFFIX = ".tar"


@dataclass(frozen=True)
class S3Object:
    """A published archive: its bucket (literal name or a bucket token), key and KMS key."""

    bucket_name: str
    key: str
    encryption_key: kms.IKey | None = None
    field: str = "artifact.url"
    """The artifact field problems with this object are reported on."""

    @property
    def url(self) -> str:
        return f"s3://{self.bucket_name}/{self.key}"


@dataclass(frozen=True)
class AdapterArtifactConfig:
    """A bound artifact: the ``ArtifactUrl``, and for a CDK asset what the role must read.

    `asset_object_arn` is None for published archives: their declared location grants the read.
    """

    s3_url: str
    asset_object_arn: str | None = None
    asset_kms_key_arn: str | None = None


class AdapterArtifact(ABC):
    """A LoRA adapter archive for an adapter inference component."""

    @staticmethod
    def from_bucket(bucket: s3.IBucket, key: str) -> AdapterArtifact:
        """An object in a bucket you have as a construct; its KMS key (if any) must be its location's."""
        return _PublishedArchive(bucket.bucket_name, key, bucket.encryption_key, field="artifact.key")

    @staticmethod
    def from_s3_url(url: str, *, encryption_key: kms.IKey | None = None) -> AdapterArtifact:
        """``s3://bucket/key.tar.gz``, e.g. what ``cdk-adapters publish`` printed. `encryption_key`:
        the customer managed KMS key of the object, which its location must declare too."""
        return _UrlArchive(url, encryption_key)

    @staticmethod
    def from_archive(path: str | Path) -> AdapterArtifact:
        """A local ``.tar.gz`` uploaded by ``cdk deploy`` as a content-addressed file asset
        (``<sha256>.tar.gz`` in the bootstrap bucket): the same bytes always get the same key, so a
        redeploy never touches an unchanged adapter."""
        return _LocalArchive(Path(path))

    @property
    def s3_object(self) -> S3Object | None:
        """The published object, or None for a local archive (its key is known only at bind)."""
        return None

    @abstractmethod
    def problems(self, subject: str) -> list[Problem]:
        """Every problem with this artifact; `subject` names the adapter in messages."""

    def lora_rank(self) -> int | None:
        """The adapter's highest LoRA rank, read from a local archive; None for a published one
        (not at hand at synth: its lock entry or the caller states it)."""
        return None

    def compatibility_problems(self, name: str, reference: Reference) -> list[Problem]:
        """The compatibility gate's findings on the archive's files, for adapter `name` checked
        against `reference`; empty for a published archive (its files are not at hand at synth).
        Call after `problems` found none."""
        return []

    @abstractmethod
    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        """Create what the artifact needs under `scope` (an asset, for local archives)."""


def _archive_key_problems(subject: str, key: object, field: str, url: str | None = None) -> list[Problem]:
    if not isinstance(key, str) or is_unresolved(key):
        return [Problem(subject, field, "must be a literal string")]
    if not key.endswith(ARCHIVE_SUFFIX):
        named = repr(url) if url is not None else repr(key)
        return [Problem(subject, field, f"{named} must name a {ARCHIVE_SUFFIX} archive with the adapter files at its root")]
    return []


class _PublishedArchive(AdapterArtifact):
    def __init__(self, bucket_name: str, key: str, encryption_key: kms.IKey | None, field: str) -> None:
        self._object = S3Object(bucket_name, key, encryption_key, field)

    @property
    def s3_object(self) -> S3Object:
        return self._object

    def problems(self, subject: str) -> list[Problem]:
        return _archive_key_problems(subject, self._object.key, self._object.field)

    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        return AdapterArtifactConfig(self._object.url)


class _UrlArchive(_PublishedArchive):
    def __init__(self, url: str, encryption_key: kms.IKey | None) -> None:
        self.url = url
        try:
            parsed = parse_s3_url(url)
            self._error = None
            super().__init__(parsed.bucket, parsed.key, encryption_key, field="artifact.url")
        except S3UrlError as error:
            self._error = str(error)
            super().__init__("", "", encryption_key, field="artifact.url")

    def problems(self, subject: str) -> list[Problem]:
        if self._error is not None:
            if is_unresolved(self.url):
                return [Problem(subject, "artifact.url", "must be a literal s3:// URL")]
            return [Problem(subject, "artifact.url", self._error)]
        return _archive_key_problems(subject, self._object.key, "artifact.url", url=self.url)


class _LocalArchive(AdapterArtifact):
    def __init__(self, path: Path) -> None:
        self.path = path

    def problems(self, subject: str) -> list[Problem]:
        if not self.path.name.endswith(ARCHIVE_SUFFIX):
            return [Problem(subject, "artifact.path", f"{str(self.path)!r} must be a {ARCHIVE_SUFFIX} archive")]
        if not self.path.is_file():
            return [Problem(subject, "artifact.path", f"{str(self.path)!r} does not exist")]
        return []

    @cached_property
    def _contents(self) -> AdapterContents:
        """The archive's file list, config and weights header, read once for the rank and the gate."""
        return AdapterContents.from_archive(self.path)

    def compatibility_problems(self, name: str, reference: Reference) -> list[Problem]:
        return check_adapter_contents(name, self._contents, reference)

    def lora_rank(self) -> int | None:
        facts = AdapterFacts.from_contents(self._contents)  # unreadable: None, the gate says why
        return facts.max_rank if facts is not None else None

    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        """Stage the archive into the cloud assembly and register it as a file asset.

        Not `aws_s3_assets.Asset`: the synthesizer names the object ``<source hash><last suffix
        of the file name>``, so an Asset's key ends in ``.gz``, while SageMaker requires
        ``ArtifactUrl`` to end in ``.tar.gz``. Registering the staged file with the hash plus
        ``.tar`` yields ``<sha256>.tar.gz``, still content-addressed.
        """
        stack = Stack.of(scope)
        staging = AssetStaging(scope, "Archive", source_path=str(self.path))
        location = stack.synthesizer.add_file_asset(
            source_hash=staging.asset_hash + TAR_SUFFIX,
            file_name=staging.relative_staged_path(stack),
            packaging=FileAssetPackaging.FILE,
            display_name=f"{scope.node.path}/Archive",
        )
        object_arn = f"arn:{Aws.PARTITION}:s3:::{location.bucket_name}/{location.object_key}"
        return AdapterArtifactConfig(location.s3_object_url, object_arn, location.kms_key_arn)
