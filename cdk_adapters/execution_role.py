"""The least-privilege permissions of an endpoint's execution role.

SageMaker uses this role to pull the image, download the base model and every adapter archive,
write container logs and publish instance metrics. Each permission is scoped to this endpoint's
own resources; the only ``*`` resources are those IAM offers no narrower form for
(``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData`` - which is held to SageMaker's
namespaces by a condition - and the EC2 network-interface calls a VPC endpoint needs).
No AWS managed policy is attached.

Adapters are read by location (`AdapterLocation`: one grant per bucket prefix), so the policy's
size does not depend on the adapter count. Local archives (CDK file assets in the bootstrap
bucket) are granted object by object in a second policy, the only part that grows (about 150
characters each); synth fails with a clear message before the role's inline policies would pass
IAM's limit (`ROLE_INLINE_POLICY_LIMIT`), which caps an endpoint at a few dozen local archives.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

import jsii
from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IValidation

from cdk_adapters import nag_acknowledgments as nag
from cdk_adapters.adapter_location import AdapterLocation

SAGEMAKER_METRIC_NAMESPACES = ("/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents")
ENDPOINT_LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
COMPONENT_LOG_GROUP_PREFIX = "/aws/sagemaker/InferenceComponents/"
ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
LOG_ACTIONS = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents")
VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)


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


def log_group_arns(scope: Construct, endpoint_name: str, base_component_name: str) -> list[str]:
    """The endpoint's and the base component's log groups, and their streams (``:*``)."""
    stack = Stack.of(scope)
    arns = []
    for group in (ENDPOINT_LOG_GROUP_PREFIX + endpoint_name, COMPONENT_LOG_GROUP_PREFIX + base_component_name):
        arn = stack.format_arn(
            service="logs", resource="log-group", resource_name=group, arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        arns += [arn, f"{arn}:*"]
    return arns


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
        vpc_access: bool,
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
        if vpc_access:
            statements.append(iam.PolicyStatement(sid="AttachToVpc", actions=list(VPC_ACTIONS), resources=["*"]))
        self.policy = iam.Policy(self, "Policy", statements=statements)
        role.attach_inline_policy(self.policy)
        reasons = {
            "AuthenticateToEcr": nag.REASON_ECR_TOKEN,
            "WriteOwnLogs": nag.REASON_LOG_STREAMS,
            "PublishSageMakerMetrics": nag.REASON_METRICS,
            "AttachToVpc": nag.REASON_VPC,
        }
        nag.acknowledge_wildcards(
            self.policy,
            [(statement.resources, reasons[statement.sid]) for statement in statements if statement.sid in reasons]
            + [(statement.resources, nag.REASON_MODEL_PREFIX) for statement in model_data_statements],
        )
        nag.acknowledge_inline_policy(self.policy)
        self.local_archive_policy: iam.Policy | None = None
        self._local_archive_reads: iam.PolicyStatement | None = None
        self._local_archive_keys: iam.PolicyStatement | None = None
        self.local_archive_count = 0
        self.node.add_validation(_PolicySizeValidation(self))

    def add_location(self, location: AdapterLocation) -> None:
        """Let the role read every archive under `location` (one statement, whatever the count)."""
        statements = location.statements()
        self.policy.add_statements(*statements)
        nag.acknowledge_wildcards(self.policy, [(statements[0].resources, nag.REASON_ADAPTER_LOCATION)])

    def add_local_archive(self, object_arn: str, kms_key_arn: str | None) -> None:
        """Let the role read one local archive's asset object (exact ARN, no wildcard)."""
        if self.local_archive_policy is None:
            self._local_archive_reads = iam.PolicyStatement(sid="ReadLocalAdapterArchives", actions=["s3:GetObject"])
            self.local_archive_policy = iam.Policy(self, "LocalArchivePolicy", statements=[self._local_archive_reads])
            self._role.attach_inline_policy(self.local_archive_policy)
            nag.acknowledge_inline_policy(self.local_archive_policy, nag.REASON_LOCAL_ARCHIVE_POLICY)
        assert self._local_archive_reads is not None
        self._local_archive_reads.add_resources(object_arn)
        self.local_archive_count += 1
        if kms_key_arn:
            if self._local_archive_keys is None:
                self._local_archive_keys = iam.PolicyStatement(sid="DecryptLocalAdapterArchives", actions=["kms:Decrypt"])
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
