"""The least-privilege permissions of an endpoint's execution role, and whom it trusts.

SageMaker uses this role to pull the image, download the base model and every adapter archive,
write container logs and publish instance metrics. Each permission is scoped as narrowly as IAM
allows; the only ``*`` resources are those IAM offers no narrower form for
(``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData`` - which is held to SageMaker's
namespaces by a condition - and the EC2 ``Describe*`` calls a VPC endpoint needs). No AWS
managed policy is attached.

What the scoping does not narrow: the image pull is granted on a whole ECR repository (IAM has no
per-image form), and for an asset image that repository is CDK's bootstrap asset repository, which
holds every container asset of the account and region. Every S3 grant carries
``s3:ResourceAccount`` (the bucket's owner), so a bucket of the same name in another account is
never read; every KMS decryption for S3 carries ``kms:ViaService``, so the key serves S3 reads only.
The role writes to log groups the endpoint creates (`endpoint_logs`); it may not create groups.

Adapters are read by location (`AdapterLocation`: one grant per bucket prefix), so the policy's
size does not depend on the adapter count. Local archives (CDK file assets in the bootstrap
bucket) are granted object by object in a second policy, the only part that grows (about 150
characters each); synth fails with a clear message before the role's inline policies would pass
IAM's limit (`ROLE_INLINE_POLICY_LIMIT`), which caps an endpoint at a few dozen local archives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import jsii
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IValidation

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.hosting.logs import log_group_arns
from cdk_adapters.hosting.networking import VpcPlacement
from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.private.arns import log_group_arn
from cdk_adapters.private.iam_conditions import kms_via_s3, s3_owned_by

SAGEMAKER_METRIC_NAMESPACES = ("/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents")
ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
LOG_ACTIONS = ("logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents")
"""No ``logs:CreateLogGroup``: the endpoint creates its log groups (retention, key) before SageMaker writes."""
VPC_DESCRIBE_ACTIONS = (
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeVpcs",
)
"""What SageMaker's VPC guide lists for hosted endpoints (host-vpc.html, "Add Permissions for Endpoint
Access for Containers Running in a VPC"); Describe calls have no resource-level permissions."""
VPC_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
)
"""Actions on an existing interface: the Service Authorization Reference gives them the
``network-interface`` resource with the ``ec2:Vpc`` condition key."""


ROLE_INLINE_POLICY_LIMIT = 10_240
"""IAM's limit on the characters of all inline policies of one role together (white space not counted)."""


def inline_policy_characters(policies: Iterable[iam.Policy]) -> int:
    """How much of `ROLE_INLINE_POLICY_LIMIT` these policies use, estimated high.

    The documents are measured as CloudFormation will receive them; intrinsic functions such as
    ``{"Ref": "AWS::Partition"}`` are longer than the strings they resolve to, so the real figure
    is lower, never higher.
    """
    total = 0
    for policy in policies:
        document = Stack.of(policy).resolve(policy.document.to_json())
        total += len("".join(json.dumps(document, separators=(",", ":")).split()))
    return total


def sagemaker_principal(scope: Construct) -> iam.IPrincipal:
    """``sagemaker.amazonaws.com``, only when acting for this account and region (confused deputy).

    SageMaker's "Cross-service confused deputy prevention" page gives, for real-time inference,
    exactly ``ArnLike aws:SourceArn arn:<partition>:sagemaker:<region>:<account>:*`` and says not to
    replace it with a model's or endpoint's ARN (the ``*`` is literal there). The account is part
    of that ARN, and the page's inference example sets no ``aws:SourceAccount``; it is left out
    because the page does not say SageMaker Hosting sets it, and a condition on an absent key denies.
    """
    source = Stack.of(scope).format_arn(service="sagemaker", resource="*")
    return iam.ServicePrincipal("sagemaker.amazonaws.com", conditions={"ArnLike": {"aws:SourceArn": source}})


class ExecutionRolePermissions(Construct):
    """The execution role's inline policy: everything the base model needs plus one read grant per
    adapter location, so adding an adapter never edits it; and, only once a local archive is
    added, a second policy naming each local archive object.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        role: iam.IRole,
        repository_arn: str,
        endpoint_name: str,
        base_component_name: str,
        model_data_statements: Sequence[iam.PolicyStatement],
        volume_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, id)
        self._role = role
        statements = [
            iam.PolicyStatement(sid="PullServingImage", actions=list(ECR_PULL_ACTIONS), resources=[repository_arn]),
            iam.PolicyStatement(sid="AuthenticateToEcr", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=list(LOG_ACTIONS),
                resources=log_group_arns(self, endpoint_name, base_component_name),
            ),
            iam.PolicyStatement(
                sid="PublishSageMakerMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": list(SAGEMAKER_METRIC_NAMESPACES)}},
            ),
            *model_data_statements,
        ]
        if volume_key is not None:
            # SageMaker and EBS use the volume key on the role's behalf when they create the
            # instances' volumes; no AWS page says through which service the calls arrive, so no
            # kms:ViaService here (a wrong one would fail every instance start). The grant is
            # limited to AWS resources instead.
            statements += [
                iam.PolicyStatement(
                    sid="UseVolumeKey",
                    actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext"],
                    resources=[volume_key.key_arn],
                ),
                iam.PolicyStatement(
                    sid="GrantVolumeKeyToEbs",
                    actions=["kms:CreateGrant"],
                    resources=[volume_key.key_arn],
                    conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
                ),
            ]
        self.policy = iam.Policy(self, "Policy", statements=statements)
        role.attach_inline_policy(self.policy)
        reasons = {
            "AuthenticateToEcr": nag.REASON_ECR_TOKEN,
            "WriteOwnLogs": nag.REASON_LOG_STREAMS,
            "PublishSageMakerMetrics": nag.REASON_METRICS,
        }
        self._wildcard_reasons: dict[str, list[str]] = {}
        """Finding id -> the reason of every statement with that wildcard (``*`` is in several)."""
        nag.acknowledge_wildcards(
            self.policy,
            [(statement.resources, reasons[statement.sid]) for statement in statements if statement.sid in reasons]
            + [(statement.resources, nag.REASON_MODEL_PREFIX) for statement in model_data_statements],
            self._wildcard_reasons,
        )
        nag.acknowledge_inline_policy(self.policy)
        self.local_archive_policy: iam.Policy | None = None
        self._local_archive_reads: iam.PolicyStatement | None = None
        self._local_archive_keys: iam.PolicyStatement | None = None
        self.local_archive_count = 0
        self.node.add_validation(_PolicySizeValidation(self))

    def add_location(self, location: AdapterLocation) -> None:
        """Let the role read every archive under `location` (one statement, whatever the count)."""
        statements = location.statements(default_owner=Stack.of(self).account)
        self.policy.add_statements(*statements)
        nag.acknowledge_wildcards(self.policy, [(statements[0].resources, nag.REASON_ADAPTER_LOCATION)], self._wildcard_reasons)

    def add_log_groups(self, group_names: Sequence[str]) -> None:
        """Let SageMaker write the streams of more log groups (rank tiers' base components), as it
        writes the endpoint's own (same actions, same reason for the streams' ``:*``)."""
        arns = [arn for name in group_names for group in [log_group_arn(self, name)] for arn in (group, f"{group}:*")]
        self.add_statements(
            [iam.PolicyStatement(sid="WriteTierLogs", actions=list(LOG_ACTIONS), resources=arns)], nag.REASON_LOG_STREAMS
        )

    def add_statements(self, statements: Sequence[iam.PolicyStatement], wildcard_reason: str) -> None:
        """Add `statements` (e.g. data capture's writes) to the role's policy; their ``*``
        resources are acknowledged with `wildcard_reason`."""
        self.policy.add_statements(*statements)
        nag.acknowledge_wildcards(self.policy, [(statements[0].resources, wildcard_reason)], self._wildcard_reasons)

    def add_vpc_access(self, vpc: ec2.IVpc, placement: VpcPlacement) -> None:
        """Let SageMaker attach the instances to `placement`'s subnets and security groups.

        ``ec2:CreateNetworkInterface`` is limited to these subnets and security groups (the new
        interface's id is unknown until created, so its resource is ``network-interface/*``); the
        calls on existing interfaces to interfaces in this VPC (``ec2:Vpc``, not the subnets, so an
        interface in a subnet dropped by an update can still be deleted); only Describe is ``*``.
        """
        stack = Stack.of(self)
        any_interface = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        create = iam.PolicyStatement(
            sid="CreateInterfacesInOwnSubnets",
            actions=["ec2:CreateNetworkInterface"],
            resources=[
                any_interface,
                *(stack.format_arn(service="ec2", resource="subnet", resource_name=s) for s in placement.subnet_ids),
                *(
                    stack.format_arn(service="ec2", resource="security-group", resource_name=g)
                    for g in placement.security_group_ids
                ),
            ],
        )
        manage = iam.PolicyStatement(
            sid="ManageInterfacesInOwnVpc",
            actions=list(VPC_INTERFACE_ACTIONS),
            resources=[any_interface],
            conditions={"ArnEquals": {"ec2:Vpc": vpc.vpc_arn}},
        )
        describe = iam.PolicyStatement(sid="DescribeVpc", actions=list(VPC_DESCRIBE_ACTIONS), resources=["*"])
        self.policy.add_statements(create, manage, describe)
        nag.acknowledge_wildcards(
            self.policy,
            [([any_interface], nag.REASON_VPC_INTERFACES), (["*"], nag.REASON_VPC_DESCRIBE)],
            self._wildcard_reasons,
        )

    def add_local_archive(self, object_arn: str, kms_key_arn: str | None) -> None:
        """Let the role read one local archive's asset object (exact ARN, no wildcard)."""
        if self.local_archive_policy is None:
            self._local_archive_reads = iam.PolicyStatement(
                sid="ReadLocalAdapterArchives",
                actions=["s3:GetObject"],
                # CDK's bootstrap bucket belongs to the account the stack deploys to.
                conditions=s3_owned_by(Stack.of(self).account),
            )
            self.local_archive_policy = iam.Policy(self, "LocalArchivePolicy", statements=[self._local_archive_reads])
            self._role.attach_inline_policy(self.local_archive_policy)
            nag.acknowledge_inline_policy(self.local_archive_policy, nag.REASON_LOCAL_ARCHIVE_POLICY)
        assert self._local_archive_reads is not None
        self._local_archive_reads.add_resources(object_arn)
        self.local_archive_count += 1
        if kms_key_arn:
            if self._local_archive_keys is None:
                self._local_archive_keys = iam.PolicyStatement(
                    sid="DecryptLocalAdapterArchives", actions=["kms:Decrypt"], conditions=kms_via_s3()
                )
                self.local_archive_policy.add_statements(self._local_archive_keys)
            if kms_key_arn not in self._local_archive_keys.resources:
                self._local_archive_keys.add_resources(kms_key_arn)

    @property
    def policies(self) -> list[iam.Policy]:
        return [self.policy] + ([self.local_archive_policy] if self.local_archive_policy is not None else [])

    def characters(self) -> int:
        """Estimated characters of the inline policies this construct attaches (see `inline_policy_characters`)."""
        return inline_policy_characters(self.policies)


@jsii.implements(IValidation)
class _PolicySizeValidation:
    """At synth, once: refuse inline policies past IAM's per-role limit (the deploy would fail)."""

    def __init__(self, permissions: ExecutionRolePermissions) -> None:
        self._permissions = permissions

    def validate(self) -> list[str]:
        used = self._permissions.characters()
        if used <= ROLE_INLINE_POLICY_LIMIT:
            return []
        local = self._permissions.local_archive_count
        return [
            f"{self._permissions.node.path}: the execution role's inline policies come to about {used} characters, "
            f"over IAM's {ROLE_INLINE_POLICY_LIMIT} per role; {local} local adapter archive(s) are granted one by one. "
            "Publish adapters to S3 (`cdk-adapters publish`) under a declared AdapterLocation, which costs nothing "
            "per adapter, or serve some from another MultiAdapterEndpoint."
        ]
