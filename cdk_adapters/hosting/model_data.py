"""Where the base model's weights come from: an uncompressed S3 prefix or one ``.tar.gz`` object.

An uncompressed prefix (``ModelDataSource`` with ``CompressionType: None``) is the fast path for
multi-gigabyte LLM weights: SageMaker copies the files instead of downloading and unpacking one
archive, which cuts minutes off every instance start. The archive form exists for small models.

The role's grants are held to the bucket's owner (``s3:ResourceAccount``): by default the bucket's
account as CDK knows it (``bucket.env.account``: the account given to ``from_bucket_attributes``,
else the stack's), or `bucket_owner`. Decryption with the bucket's key is allowed through S3 only.

SageMaker reads whatever is at the location when an instance starts (the model data source takes
no version or checksum). `cdk-adapters lock --base-model` pins each object's size and S3-stored
checksum in the manifest's lock so that `cdk-adapters lock --check` reports an in-place change
before a deploy (`cdk_adapters.manifest.base_pin`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from aws_cdk import Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.private.iam_conditions import account_problem, kms_via_s3, s3_owned_by
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class ModelDataConfig:
    """The model's ``ModelDataSource`` and the statements its execution role needs to read it."""

    model_data_source: sagemaker.CfnModel.ModelDataSourceProperty
    statements: tuple[iam.PolicyStatement, ...]


class ModelData(ABC):
    """Base model weights in S3."""

    bucket: s3.IBucket
    bucket_owner: str
    """The account whose bucket the role may read."""

    @staticmethod
    def from_s3_prefix(bucket: s3.IBucket, prefix: str, *, bucket_owner: str | None = None) -> ModelData:
        """Every object under `prefix` (e.g. ``models/llama-3.1-8b/``), copied uncompressed to
        ``/opt/ml/model``. A missing trailing ``/`` is added, so ``models/llama`` never also reads
        ``models/llama-2/``. `bucket_owner`: default ``bucket.env.account``."""
        return _PrefixModelData(bucket, prefix, bucket_owner or bucket.env.account)

    @staticmethod
    def from_s3_archive(bucket: s3.IBucket, key: str, *, bucket_owner: str | None = None) -> ModelData:
        """One ``.tar.gz`` object, unpacked into ``/opt/ml/model``. `bucket_owner`: default
        ``bucket.env.account``."""
        return _ArchiveModelData(bucket, key, bucket_owner or bucket.env.account)

    def problems(self, subject: str) -> list[Problem]:
        """Every problem with this location; `subject` names the construct in messages."""
        owner = account_problem(self.bucket_owner)
        return ([Problem(subject, "model_data.bucket_owner", owner)] if owner else []) + self._key_problems(subject)

    @abstractmethod
    def _key_problems(self, subject: str) -> list[Problem]:
        """Every problem with the key or prefix."""

    @abstractmethod
    def bind(self) -> ModelDataConfig:
        """The CloudFormation ``ModelDataSource`` and the read permissions it needs."""


def _config(
    bucket: s3.IBucket, key: str, data_type: str, compression: str, statements: tuple[iam.PolicyStatement, ...]
) -> ModelDataConfig:
    """The ``S3DataSource`` for `key` and the read `statements`, plus decrypt on the bucket's key."""
    source = sagemaker.CfnModel.ModelDataSourceProperty(
        s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
            s3_uri=f"s3://{bucket.bucket_name}/{key}", s3_data_type=data_type, compression_type=compression
        )
    )
    return ModelDataConfig(source, statements + _decrypt_statements(bucket))


def _decrypt_statements(bucket: s3.IBucket) -> tuple[iam.PolicyStatement, ...]:
    if bucket.encryption_key is None:
        return ()
    return (iam.PolicyStatement(actions=["kms:Decrypt"], resources=[bucket.encryption_key.key_arn], conditions=kms_via_s3()),)


class _PrefixModelData(ModelData):
    def __init__(self, bucket: s3.IBucket, prefix: str, bucket_owner: str) -> None:
        self.bucket = bucket
        self.bucket_owner = bucket_owner
        self.prefix = prefix if not isinstance(prefix, str) or prefix.endswith("/") else prefix + "/"

    def _key_problems(self, subject: str) -> list[Problem]:
        if not isinstance(self.prefix, str) or Token.is_unresolved(self.prefix):
            return [Problem(subject, "model_data.prefix", "must be a literal string")]
        if self.prefix.startswith("/") or self.prefix == "/":
            return [
                Problem(
                    subject, "model_data.prefix", f"{self.prefix!r} must be a key prefix like 'models/llama/' (no leading '/')"
                )
            ]
        return []

    def bind(self) -> ModelDataConfig:
        statements = (
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(f"{self.prefix}*")],
                conditions=s3_owned_by(self.bucket_owner),
            ),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{self.prefix}*"]}, **s3_owned_by(self.bucket_owner)},
            ),
        )
        return _config(self.bucket, self.prefix, "S3Prefix", "None", statements)


class _ArchiveModelData(ModelData):
    def __init__(self, bucket: s3.IBucket, key: str, bucket_owner: str) -> None:
        self.bucket = bucket
        self.bucket_owner = bucket_owner
        self.key = key

    def _key_problems(self, subject: str) -> list[Problem]:
        if not isinstance(self.key, str) or Token.is_unresolved(self.key):
            return [Problem(subject, "model_data.key", "must be a literal string")]
        if not self.key.endswith(".tar.gz"):
            return [Problem(subject, "model_data.key", f"{self.key!r} must name a .tar.gz archive")]
        return []

    def bind(self) -> ModelDataConfig:
        statements = (
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(self.key)],
                conditions=s3_owned_by(self.bucket_owner),
            ),
        )
        return _config(self.bucket, self.key, "S3Object", "Gzip", statements)
