"""Where one LoRA adapter's archive lives: a ``.tar.gz`` in S3 with the adapter files at its root.

SageMaker downloads the archive with the endpoint's execution role and extracts it before calling
the container's ``POST /adapters``. Each artifact therefore says both its URL and exactly what the
role must be allowed to read, so every adapter gets a policy for its own object and nothing more.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import AssetStaging, Aws, FileAssetPackaging, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_adapters.problems import Problem

_S3_URL = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s]+)$")
ARCHIVE_SUFFIX = ".tar.gz"
TAR_SUFFIX = ".tar"


@dataclass(frozen=True)
class AdapterArtifactConfig:
    """A bound artifact: the ``ArtifactUrl`` and the statements that let the role read it."""

    s3_url: str
    statements: tuple[iam.PolicyStatement, ...]


class AdapterArtifact(ABC):
    """A LoRA adapter archive for an adapter inference component."""

    @staticmethod
    def from_bucket(bucket: s3.IBucket, key: str) -> "AdapterArtifact":
        """An object in a bucket you have as a construct; its KMS key (if any) is granted too."""
        return _BucketArtifact(bucket, key)

    @staticmethod
    def from_s3_url(url: str, *, encryption_key: kms.IKey | None = None) -> "AdapterArtifact":
        """``s3://bucket/key.tar.gz``, e.g. what ``cdk-adapters publish`` printed. Pass
        `encryption_key` when the object is encrypted with a customer managed KMS key."""
        return _UrlArtifact(url, encryption_key)

    @staticmethod
    def from_archive(path: str | Path) -> "AdapterArtifact":
        """A local ``.tar.gz`` uploaded by ``cdk deploy`` as a content-addressed file asset
        (``<sha256>.tar.gz`` in the bootstrap bucket): the same bytes always get the same key, so a
        redeploy never touches an unchanged adapter."""
        return _LocalArchive(Path(path))

    @abstractmethod
    def problems(self, subject: str) -> list[Problem]:
        """Every problem with this artifact; `subject` names the adapter in messages."""

    @abstractmethod
    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        """Create what the artifact needs under `scope` (an asset, for local archives)."""


def _archive_key_problems(subject: str, key: object, field: str) -> list[Problem]:
    if not isinstance(key, str) or Token.is_unresolved(key):
        return [Problem(subject, field, "must be a literal string")]
    if not key.endswith(ARCHIVE_SUFFIX):
        return [Problem(subject, field, f"{key!r} must name a {ARCHIVE_SUFFIX} archive with the adapter files at its root")]
    return []


class _BucketArtifact(AdapterArtifact):
    def __init__(self, bucket: s3.IBucket, key: str) -> None:
        self.bucket = bucket
        self.key = key

    def problems(self, subject: str) -> list[Problem]:
        return _archive_key_problems(subject, self.key, "artifact.key")

    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        statements = [iam.PolicyStatement(actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(self.key)])]
        if self.bucket.encryption_key is not None:
            statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[self.bucket.encryption_key.key_arn]))
        return AdapterArtifactConfig(f"s3://{self.bucket.bucket_name}/{self.key}", tuple(statements))


class _UrlArtifact(AdapterArtifact):
    def __init__(self, url: str, encryption_key: kms.IKey | None) -> None:
        self.url = url
        self.encryption_key = encryption_key

    def problems(self, subject: str) -> list[Problem]:
        if not isinstance(self.url, str) or Token.is_unresolved(self.url):
            return [Problem(subject, "artifact.url", "must be a literal s3:// URL")]
        match = _S3_URL.match(self.url)
        if not match:
            return [Problem(subject, "artifact.url", f"{self.url!r} is not an s3://<bucket>/<key> URL")]
        return _archive_key_problems(subject, match["key"], "artifact.url")

    def bind(self, scope: Construct) -> AdapterArtifactConfig:
        match = _S3_URL.match(self.url)
        assert match, "bind() is only called after problems() found none"
        statements = [
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[f"arn:{Aws.PARTITION}:s3:::{match['bucket']}/{match['key']}"],
            )
        ]
        if self.encryption_key is not None:
            statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[self.encryption_key.key_arn]))
        return AdapterArtifactConfig(self.url, tuple(statements))


class _LocalArchive(AdapterArtifact):
    def __init__(self, path: Path) -> None:
        self.path = path

    def problems(self, subject: str) -> list[Problem]:
        if not self.path.name.endswith(ARCHIVE_SUFFIX):
            return [Problem(subject, "artifact.path", f"{str(self.path)!r} must be a {ARCHIVE_SUFFIX} archive")]
        if not self.path.is_file():
            return [Problem(subject, "artifact.path", f"{str(self.path)!r} does not exist")]
        return []

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
        statements = [iam.PolicyStatement(actions=["s3:GetObject"], resources=[object_arn])]
        if location.kms_key_arn:
            statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[location.kms_key_arn]))
        return AdapterArtifactConfig(location.s3_object_url, tuple(statements))
