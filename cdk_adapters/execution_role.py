"""The least-privilege permissions of an endpoint's execution role.

SageMaker uses this role to pull the image, download the base model and every adapter archive,
write container logs and publish instance metrics. Each permission is scoped to this endpoint's
own resources; the only ``*`` resources are those IAM offers no narrower form for
(``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData`` - which is held to SageMaker's
namespaces by a condition - and the EC2 network-interface calls a VPC endpoint needs).
No AWS managed policy is attached.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from cdk_adapters import nag_acknowledgments as nag

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
    """One inline policy with everything the base model needs, attached to the execution role.

    Adapters get their own policies (see `AdapterInferenceComponent`), so adding one never edits
    this policy.
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
