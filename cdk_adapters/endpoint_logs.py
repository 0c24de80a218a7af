"""The log groups SageMaker writes an endpoint's logs to, created by the stack before SageMaker writes.

SageMaker writes the base component's container output to
``/aws/sagemaker/InferenceComponents/<base component>`` and the endpoint's to
``/aws/sagemaker/Endpoints/<endpoint>`` (adapter components run no container of their own). Left
to itself, SageMaker creates a group on first write when the role may (``logs:CreateLogGroup``):
such a group keeps its logs forever, uses no key of yours, and belongs to no stack. Here both
groups are created by CloudFormation with a retention and an optional customer managed key, the
endpoint and the base component depend on them (so they exist before the first line is written),
and the role may not create groups at all.

Deletion: `EndpointLogs.removal_policy` defaults to RETAIN, aws-cdk-lib's own default for log
groups, so deleting the stack keeps the logs. The groups keep their names (the endpoint's names
are deterministic), so deploying the same stack again after deleting it fails with "already
exists" until the groups are deleted, or adopted with ``cdk deploy --import-existing-resources``;
``RemovalPolicy.DESTROY`` deletes them with the stack instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, Aws, CfnResource, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_adapters import nag_acknowledgments as nag
from cdk_adapters.execution_role import log_group_arn, log_group_names
from cdk_adapters.problems import Problem

DEFAULT_RETENTION = logs.RetentionDays.ONE_YEAR
"""365 days: the default period of AWS Config's ``cw-loggroup-retention-period-check``."""
LOGS_KEY_ACTIONS = (
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:DescribeKey",
)
"""What CloudWatch Logs needs of a key that encrypts a log group ("Encrypt log data in CloudWatch
Logs using AWS KMS", whose example grants the same families with wildcards)."""
REMOVAL_POLICIES = (RemovalPolicy.RETAIN, RemovalPolicy.DESTROY, RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)


@dataclass(frozen=True)
class EndpointLogs:
    """Retention, encryption and deletion of the endpoint's two log groups."""

    retention: logs.RetentionDays = DEFAULT_RETENTION
    """How long log events are kept. Default one year. ``RetentionDays.INFINITE`` keeps them
    forever (HIPAA's and NIST's retention rules then report the groups)."""
    encryption_key: kms.IKey | None = None
    """A customer managed key for both groups. A key defined in this app gets a key-policy statement
    letting CloudWatch Logs use it for these two groups only; an imported key's policy must already
    allow it (synth warns). Default None: CloudWatch Logs encrypts with keys it manages."""
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """What deleting the stack does to the groups. Default RETAIN (the logs outlive the endpoint)."""

    def problems(self, subject: str) -> list[Problem]:
        found = []
        if not isinstance(self.retention, logs.RetentionDays):
            found.append(Problem(subject, "logs.retention", f"must be an aws_logs.RetentionDays, got {self.retention!r}"))
        if self.encryption_key is not None and not _is_key(self.encryption_key):
            found.append(Problem(subject, "logs.encryption_key", f"must be an aws_kms.IKey, got {self.encryption_key!r}"))
        if self.removal_policy not in REMOVAL_POLICIES:
            allowed = ", ".join(policy.name for policy in REMOVAL_POLICIES)
            found.append(Problem(subject, "logs.removal_policy", f"must be one of {allowed} (log groups take no snapshot), got {self.removal_policy!r}"))
        return found


class EndpointLogGroups(Construct):
    """The endpoint's log group (`endpoint`) and the base component's (`base_component`)."""

    def __init__(
        self, scope: Construct, id: str, *, settings: EndpointLogs, endpoint_name: str, base_component_name: str
    ) -> None:
        super().__init__(scope, id)
        endpoint_group, component_group = log_group_names(endpoint_name, base_component_name)
        self.endpoint = self._group("Endpoint", endpoint_group, settings)
        self.base_component = self._group("BaseComponent", component_group, settings)
        key = settings.encryption_key
        if key is None:
            return
        added = key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=list(LOGS_KEY_ACTIONS),
                resources=["*"],
                conditions={
                    "ArnEquals": {
                        "kms:EncryptionContext:aws:logs:arn": [log_group_arn(self, endpoint_group), log_group_arn(self, component_group)]
                    }
                },
            )
        )
        if not added.statement_added:
            Annotations.of(self).add_warning_v2(
                "cdk-adapters:log-key-policy",
                "logs.encryption_key is imported, so its key policy cannot be changed here: it must allow "
                f"logs.<region>.amazonaws.com to use it for {endpoint_group} and {component_group}, or creating "
                "the log groups fails",
            )

    @property
    def resources(self) -> list[CfnResource]:
        """The two ``AWS::Logs::LogGroup`` resources, for dependencies."""
        return [group.node.default_child for group in (self.endpoint, self.base_component)]  # type: ignore[misc]

    def _group(self, id: str, name: str, settings: EndpointLogs) -> logs.LogGroup:
        group = logs.LogGroup(
            self,
            id,
            log_group_name=name,
            retention=settings.retention,
            encryption_key=settings.encryption_key,
            removal_policy=settings.removal_policy,
        )
        if settings.encryption_key is None:
            nag.acknowledge_log_group_service_key(group)
        return group


def _is_key(value: object) -> bool:
    return hasattr(value, "key_arn") and hasattr(value, "add_to_resource_policy")
