"""A bucket for published adapter archives that itself refuses to change them.

`cdk-adapters publish` never overwrites, but anyone else with ``s3:PutObject`` on the adapter
prefix could, and SageMaker downloads the archive again for every new copy. This bucket's policy
makes the rule S3's own, for every principal, including administrators of the account:

* ``s3:PutObject`` under an adapter prefix is denied unless the request carries ``If-None-Match``
  (``s3:if-none-match``), so a write can only create a key that does not exist. This also refuses
  ``CopyObject`` into the prefix and multipart uploads (their part calls carry no conditional
  header); `publish` uses one ``PutObject`` (an adapter archive is far below its 5 GiB limit).
* ``s3:DeleteObject`` and ``s3:DeleteObjectVersion`` under an adapter prefix are denied, so no
  version of a published archive disappears, and no delete marker hides it.

Versioning, KMS encryption with a rotated customer managed key, TLS-only access, no public access
and bucket-owner-enforced ownership complete it. Retiring an adapter version is a reviewed change
to this policy (or a lifecycle rule), not an ``aws s3 rm``.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.artifacts.publish import DEFAULT_PREFIX
from cdk_adapters.private.nag_acknowledgments import acknowledge
from cdk_adapters.problems import Problem, raise_if_any

REPLICATION_RULES = ("HIPAA.Security-S3BucketReplicationEnabled", "NIST.800.53.R5-S3BucketReplicationEnabled")
REASON_REPLICATION = (
    "no cross-region replication by default: an adapter archive is rebuilt byte-for-byte from its PEFT output "
    "(deterministic packaging, its sha256 in the lock), and this bucket keeps every version and refuses overwrites "
    "and deletes under its adapter prefixes; a second region is the account's disaster-recovery choice (add a "
    "replication configuration to the bucket to opt in)"
)
LOGGING_RULES = ("AwsSolutions-S1", "HIPAA.Security-S3BucketLoggingEnabled", "NIST.800.53.R5-S3BucketLoggingEnabled")
REASON_NO_ACCESS_LOGS = (
    "no server_access_logs_bucket was given, so S3 server access logging is off (a log bucket is the account's "
    "own, usually shared, choice); object-level calls are recorded by CloudTrail data events where the account "
    "enables them; pass server_access_logs_bucket to log every request"
)


class AdapterBucket(Construct):
    """An S3 bucket whose adapter prefixes accept only new keys and never lose an object version.

    Example::

        adapters = AdapterBucket(stack, "Adapters")
        endpoint = MultiAdapterEndpoint(..., adapter_locations=[adapters.location()])

    then ``cdk-adapters publish DIR --name NAME --bucket <adapters.bucket.bucket_name>``.

    :param prefixes: key prefixes that hold adapter archives (default ``["adapters/"]``, what
        `cdk-adapters publish` writes to); ``""`` protects the whole bucket.
    :param encryption_key: customer managed key for SSE-KMS. Default: a new key with rotation.
    :param server_access_logs_bucket: where S3 server access logs go. Default: none (see the nag
        acknowledgment).
    :param object_lock_retention: also enable S3 Object Lock with this default retention in
        COMPLIANCE mode: no version can be deleted by anyone until it expires, even if the
        bucket policy is changed. Default: no Object Lock (the policy alone refuses deletes).
    :param removal_policy: default RETAIN: deleting the stack keeps published adapters.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefixes: Sequence[str] = (DEFAULT_PREFIX + "/",),
        encryption_key: kms.IKey | None = None,
        server_access_logs_bucket: s3.IBucket | None = None,
        server_access_logs_prefix: str | None = None,
        object_lock_retention: Duration | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        self.prefixes = tuple(_problems_or_prefixes(list(prefixes)))
        self.encryption_key = encryption_key or kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            description="Encrypts published LoRA adapter archives",
            removal_policy=removal_policy,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.encryption_key,
            bucket_key_enabled=True,
            versioned=True,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=server_access_logs_bucket,
            server_access_logs_prefix=server_access_logs_prefix,
            object_lock_enabled=True if object_lock_retention is not None else None,
            object_lock_default_retention=(
                s3.ObjectLockRetention.compliance(object_lock_retention) if object_lock_retention is not None else None
            ),
            removal_policy=removal_policy,
        )
        objects = [self.bucket.arn_for_objects(f"{prefix}*") for prefix in self.prefixes]
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyWritesThatCouldOverwrite",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=objects,
                conditions={"Null": {"s3:if-none-match": "true"}},
            )
        )
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyDeletingPublishedAdapters",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=objects,
            )
        )
        acknowledge(self.bucket, (Acknowledgment(id=rule, reason=REASON_REPLICATION) for rule in REPLICATION_RULES))
        if server_access_logs_bucket is None:
            acknowledge(self.bucket, (Acknowledgment(id=rule, reason=REASON_NO_ACCESS_LOGS) for rule in LOGGING_RULES))

    def location(self, prefix: str | None = None) -> AdapterLocation:
        """The `AdapterLocation` an endpoint declares to read adapters from `prefix` (default: the first)."""
        return AdapterLocation.from_bucket(
            self.bucket, self.prefixes[0] if prefix is None else prefix, encryption_key=self.encryption_key
        )


def _problems_or_prefixes(prefixes: list[str]) -> list[str]:
    subject = "AdapterBucket"
    problems: list[Problem] = []
    normalized: list[str] = []
    if not prefixes:
        problems.append(Problem(subject, "prefixes", "must name at least one prefix ('' protects the whole bucket)"))
    for prefix in prefixes:
        if not isinstance(prefix, str) or Token.is_unresolved(prefix):
            problems.append(Problem(subject, "prefixes", f"{prefix!r} must be a literal string"))
        elif prefix.startswith("/") or "*" in prefix:
            problems.append(
                Problem(subject, "prefixes", f"{prefix!r} must be a key prefix like 'adapters/' (no leading '/', no '*')")
            )
        else:
            normalized.append(prefix if prefix == "" or prefix.endswith("/") else prefix + "/")
    raise_if_any(problems, "invalid AdapterBucket")
    return normalized
