"""A tenant stack's grant to the platform endpoint's role: read exactly this stack's local
adapter archives (CDK asset objects), nothing else, in a policy that lives with the tenant's stack."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.private.iam_conditions import kms_via_s3, s3_owned_by

REASON_TENANT_ARCHIVE_POLICY = (
    "inline on purpose: it lets the platform's endpoint role read the exact CDK asset objects of this tenant "
    "stack's local adapter archives, nothing else; it lives and is deleted with the tenant's stack"
)


class TenantArchiveGrant:
    """One inline policy on the platform's role, one statement for objects and one for their keys."""

    def __init__(self, scope: Construct, execution_role_arn: str) -> None:
        self._scope = scope
        self._execution_role_arn = execution_role_arn
        self._archive_policy: iam.Policy | None = None
        self._archive_reads: iam.PolicyStatement | None = None
        self._archive_keys: iam.PolicyStatement | None = None

    def add(self, object_arn: str, kms_key_arn: str | None) -> iam.Policy:
        """Let the role read `object_arn` (and decrypt with `kms_key_arn`, through S3); the policy."""
        if self._archive_policy is None:
            role = iam.Role.from_role_arn(self._scope, "ExecutionRole", self._execution_role_arn, mutable=True)
            self._archive_reads = iam.PolicyStatement(
                sid="ReadTenantAdapterArchives", actions=["s3:GetObject"], conditions=s3_owned_by(Aws.ACCOUNT_ID)
            )
            self._archive_policy = iam.Policy(self._scope, "LocalArchivePolicy", statements=[self._archive_reads])
            self._archive_policy.attach_to_role(role)
            nag.acknowledge_inline_policy(self._archive_policy, REASON_TENANT_ARCHIVE_POLICY)
        assert self._archive_reads is not None
        self._archive_reads.add_resources(object_arn)
        if kms_key_arn:
            if self._archive_keys is None:
                self._archive_keys = iam.PolicyStatement(
                    sid="DecryptTenantAdapterArchives", actions=["kms:Decrypt"], conditions=kms_via_s3()
                )
                self._archive_policy.add_statements(self._archive_keys)
            self._archive_keys.add_resources(kms_key_arn)
        return self._archive_policy
