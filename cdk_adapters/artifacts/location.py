"""Where adapter archives may live: an S3 bucket and key prefix, and the key that encrypts them.

The execution role reads adapters *by location*, not by adapter: one ``s3:GetObject`` grant on
``<bucket>/<prefix>*`` per declared location, so the role's policy has the same size for one
adapter as for a thousand (IAM caps a role's inline policies at 10,240 characters; one statement
per adapter used to exhaust it at about 40). Every adapter artifact must lie inside a declared
location; one outside every location is a synth error, never a silent widening of the grant.

The grant reads whatever lies under the prefix. ``cdk-adapters publish`` never overwrites a key,
but anyone else allowed to write the prefix can replace an archive, and SageMaker downloads it
again for every new copy; so who may write a location (a bucket policy, S3 Object Lock) decides
what is served, not this grant.

The grant is held to the bucket's owner (``s3:ResourceAccount``): by default the account the
endpoint's stack deploys to; `bucket_owner` names another account's bucket.

Tenants: a location may be assigned to one tenant (``tenant="acme"``). The platform's discovery
record then says which prefix each tenant may use, and a tenant's import
(``from_discovery_parameter(..., tenant="acme")``) refuses at the tenant's synth an adapter that
does not lie under its own prefix (rule ``tenant-location``): the most specific assigned location
holding an object decides whose it is, so ``s3://b/`` for one tenant and ``s3://b/beta/`` for
another give ``beta/...`` to the second. The platform's own adapters may use any location. The
role still reads every location: the assignment keeps a tenant's synth from naming another
tenant's archive; it is not an IAM boundary (one execution role reads for the whole endpoint).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from cdk_adapters.contract.discovery import tenant_name_problems
from cdk_adapters.contract.s3_url import S3Url, S3UrlError, as_prefix, parse_s3_url
from cdk_adapters.private.iam_conditions import account_problem, kms_via_s3, s3_owned_by
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class AdapterLocation:
    """An S3 bucket and key prefix holding adapter archives (``.tar.gz``).

    Build one with `from_s3_url` or `from_bucket`. A prefix always ends in ``/`` (``adapters`` is
    read as ``adapters/``, so it never also covers ``adapters-old/``); an empty prefix is the
    whole bucket.
    """

    bucket_name: str
    """A literal name, or the token of a bucket in this app (`from_bucket`)."""
    prefix: str
    encryption_key: kms.IKey | None = None
    """The customer managed KMS key of these objects, if any; the role gets ``kms:Decrypt`` on it."""
    url: str | None = None
    """The URL it was declared with, for messages; None for `from_bucket`."""
    bucket_owner: str | None = None
    """The 12-digit account that owns the bucket; the grant reads only a bucket it owns. None: the
    account of the stack the endpoint is in."""
    tenant: str | None = None
    """The tenant whose adapters come from here (published in the discovery record); None: the
    platform's own location, which no tenant of a platform that assigns tenants may use."""

    @staticmethod
    def from_s3_url(
        url: str, *, encryption_key: kms.IKey | None = None, bucket_owner: str | None = None, tenant: str | None = None
    ) -> AdapterLocation:
        """``s3://bucket/prefix/``, e.g. the ``--bucket``/``--prefix`` you publish adapters to.
        `bucket_owner`: the bucket's account when it is not the endpoint stack's. `tenant`: the
        tenant this prefix is assigned to (default: none, the platform's)."""
        try:
            parsed = parse_s3_url(url, key_required=False)
        except S3UrlError:
            return AdapterLocation(
                bucket_name="", prefix="", encryption_key=encryption_key, url=url, bucket_owner=bucket_owner, tenant=tenant
            )
        return AdapterLocation(parsed.bucket, _as_prefix(parsed.key), encryption_key, url, bucket_owner, tenant)

    @staticmethod
    def from_bucket(
        bucket: s3.IBucket,
        prefix: str = "",
        *,
        encryption_key: kms.IKey | None = None,
        bucket_owner: str | None = None,
        tenant: str | None = None,
    ) -> AdapterLocation:
        """A prefix of a bucket you have as a construct. Default key: the bucket's own, if any.
        Default owner: the bucket's account (``bucket.env.account``: the account given to
        ``Bucket.from_bucket_attributes``, else its stack's). `tenant`: as in `from_s3_url`."""
        return AdapterLocation(
            bucket.bucket_name,
            _as_prefix(prefix),
            encryption_key or bucket.encryption_key,
            bucket_owner=bucket_owner or bucket.env.account,
            tenant=tenant,
        )

    def describe(self) -> str:
        if self.url is not None:
            return self.url
        bucket = "<bucket of this app>" if Token.is_unresolved(self.bucket_name) else self.bucket_name
        return f"s3://{bucket}/{self.prefix}"

    def problems(self, subject: str, field: str) -> list[Problem]:
        found = []
        if self.bucket_owner is not None and account_problem(self.bucket_owner):
            found.append(Problem(subject, f"{field}.bucket_owner", account_problem(self.bucket_owner) or ""))
        if self.tenant is not None:
            found += [Problem(subject, f"{field}.tenant", message) for message in tenant_name_problems(self.tenant)]
        return found + self._prefix_problems(subject, field)

    def assignment_problems(self, declared: list[AdapterLocation], subject: str) -> list[Problem]:
        """This location, assigned to a tenant, is not also assigned to another tenant among
        `declared` (the endpoint's locations so far): one prefix has at most one tenant."""
        if self.tenant is None:
            return []
        return [
            Problem(
                subject,
                "adapter_locations",
                f"{self.describe()} is assigned to tenant {other.tenant!r} already; one location has one tenant "
                f"(give {self.tenant!r} a prefix of its own)",
            )
            for other in declared
            if other.tenant is not None
            and other.tenant.lower() != self.tenant.lower()
            and (other.bucket_name, other.prefix) == (self.bucket_name, self.prefix)
        ]

    def _prefix_problems(self, subject: str, field: str) -> list[Problem]:
        if self.url is not None:
            try:
                parsed = parse_s3_url(self.url, key_required=False)
            except S3UrlError as error:
                return [Problem(subject, field, str(error))]
            if "*" in parsed.key or "?" in parsed.key:
                return [
                    Problem(subject, field, f"{self.url!r}: a location is a plain key prefix; wildcards are added by the grant")
                ]
        elif not isinstance(self.prefix, str) or Token.is_unresolved(self.prefix) or self.prefix.startswith("/"):
            return [
                Problem(subject, field, f"prefix {self.prefix!r} must be a literal key prefix like 'adapters/' (no leading '/')")
            ]
        elif "*" in self.prefix or "?" in self.prefix:
            return [
                Problem(
                    subject, field, f"prefix {self.prefix!r}: a location is a plain key prefix; wildcards are added by the grant"
                )
            ]
        return []

    def contains(self, bucket_name: str, key: str) -> bool:
        """Whether the object ``bucket_name/key`` lies inside this location (`S3Url.holds`, the
        rule the manifest gate applies too)."""
        return S3Url(self.bucket_name, self.prefix).holds(bucket_name, key)

    def statements(self, default_owner: str = Aws.ACCOUNT_ID) -> list[iam.PolicyStatement]:
        """Read access to every object under the prefix of a bucket its owner owns, and decryption
        with its key through S3 only. `default_owner`: the owner when `bucket_owner` is None."""
        objects = f"arn:{Aws.PARTITION}:s3:::{self.bucket_name}/{self.prefix}*"
        owner = self.bucket_owner or default_owner
        found = [iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects], conditions=s3_owned_by(owner))]
        if self.encryption_key is not None:
            found.append(
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[self.encryption_key.key_arn], conditions=kms_via_s3())
            )
        return found


def _as_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or Token.is_unresolved(prefix):
        return prefix
    return as_prefix(prefix)
