"""The log groups an endpoint's logs go to, created by the stack before anything writes.

SageMaker writes the base component's container output to
``/aws/sagemaker/InferenceComponents/<base component>`` and the endpoint's to
``/aws/sagemaker/Endpoints/<endpoint>`` (adapter components run no container of their own); the
container writes captured requests to ``/cdk-adapters/capture/<endpoint>``, one stream per adapter,
so that one tenant's prompts can be read without another's. Left to itself, SageMaker creates a
group on first write when the role may (``logs:CreateLogGroup``): such a group keeps its logs
forever, uses no key of yours, and belongs to no stack. Here every group is created by
CloudFormation with a retention and a customer managed key (created with yearly rotation unless
one is given), the endpoint and the base component depend on them (so they exist before the first
line is written), and the role may not create groups at all.

Deletion: `EndpointLogs.removal_policy` defaults to RETAIN, aws-cdk-lib's own default for log
groups, so deleting the stack keeps the logs. The groups keep their names (the endpoint's names
are deterministic), so deploying the same stack again after deleting it fails with "already
exists" until the groups are deleted, or adopted with ``cdk deploy --import-existing-resources``;
``RemovalPolicy.DESTROY`` deletes them with the stack instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from aws_cdk import Annotations, Aws, CfnResource, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_adapters.contract import capture_record
from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.private.arns import log_group_arn
from cdk_adapters.problems import ConfigurationError, Problem

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


ENDPOINT_LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
COMPONENT_LOG_GROUP_PREFIX = "/aws/sagemaker/InferenceComponents/"


def log_group_names(endpoint_name: str, base_component_name: str) -> tuple[str, str, str]:
    """Where the endpoint's logs go: SageMaker's groups for the endpoint and the base component,
    and the capture group the container writes one stream per adapter to."""
    return (
        ENDPOINT_LOG_GROUP_PREFIX + endpoint_name,
        COMPONENT_LOG_GROUP_PREFIX + base_component_name,
        capture_record.capture_log_group_name(endpoint_name),
    )


def log_group_arns(scope: Construct, endpoint_name: str, base_component_name: str) -> list[str]:
    """The endpoint's three log groups (`log_group_names`), and their streams (``:*``)."""
    arns = []
    for group in log_group_names(endpoint_name, base_component_name):
        arn = log_group_arn(scope, group)
        arns += [arn, f"{arn}:*"]
    return arns


@dataclass(frozen=True)
class EndpointLogs:
    """Retention, encryption and deletion of the endpoint's log groups."""

    retention: logs.RetentionDays = DEFAULT_RETENTION
    """How long log events are kept. Default one year. ``RetentionDays.INFINITE`` keeps them
    forever (HIPAA's and NIST's retention rules then report the groups)."""
    encryption_key: kms.IKey | None = None
    """The customer managed key of every group. A key defined in this app gets key-policy
    statements letting CloudWatch Logs use it for these groups only; an imported key's policy must
    already allow it (synth warns). Default None: the endpoint creates a key, with yearly rotation,
    that follows the groups' removal policy."""
    service_managed_key: bool = False
    """True: no customer managed key, CloudWatch Logs encrypts with keys it manages (no key to pay
    for; HIPAA's and NIST's encryption rules and checkov's CKV_AWS_158 then report the groups).
    Default False."""
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """What deleting the stack does to the groups. Default RETAIN (the logs outlive the endpoint)."""

    def problems(self, subject: str) -> list[Problem]:
        found = []
        if not isinstance(self.retention, logs.RetentionDays):
            found.append(Problem(subject, "logs.retention", f"must be an aws_logs.RetentionDays, got {self.retention!r}"))
        if self.encryption_key is not None and not _is_key(self.encryption_key):
            found.append(Problem(subject, "logs.encryption_key", f"must be an aws_kms.IKey, got {self.encryption_key!r}"))
        if not isinstance(self.service_managed_key, bool):
            found.append(Problem(subject, "logs.service_managed_key", f"must be True or False, got {self.service_managed_key!r}"))
        elif self.service_managed_key and self.encryption_key is not None:
            found.append(
                Problem(
                    subject, "logs.service_managed_key", "is True while logs.encryption_key names a key: give one or the other"
                )
            )
        if self.removal_policy not in REMOVAL_POLICIES:
            allowed = ", ".join(policy.name for policy in REMOVAL_POLICIES)
            found.append(
                Problem(
                    subject,
                    "logs.removal_policy",
                    f"must be one of {allowed} (log groups take no snapshot), got {self.removal_policy!r}",
                )
            )
        return found


def with_logs_key(scope: Construct, id: str, settings: EndpointLogs, description: str) -> EndpointLogs:
    """`settings` with the key its groups use: the given key, or a new one (rotated yearly, removed
    with the groups when they are destroyed); unchanged for `service_managed_key`."""
    if settings.encryption_key is not None or settings.service_managed_key:
        return settings
    destroyed = settings.removal_policy == RemovalPolicy.DESTROY
    key = kms.Key(
        scope,
        id,
        enable_key_rotation=True,
        description=description,
        removal_policy=RemovalPolicy.DESTROY if destroyed else RemovalPolicy.RETAIN,
    )
    return replace(settings, encryption_key=key)


def allow_logs_to_use_key(scope: Construct, settings: EndpointLogs, group_names: list[str]) -> None:
    """Let CloudWatch Logs use the groups' key for exactly `group_names` (a key of this app); an
    imported key's policy cannot be changed here, so synth says what it must allow."""
    key = settings.encryption_key
    if key is None:
        return
    added = key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            actions=list(LOGS_KEY_ACTIONS),
            resources=["*"],
            conditions={
                "ArnEquals": {"kms:EncryptionContext:aws:logs:arn": [log_group_arn(scope, name) for name in group_names]}
            },
        )
    )
    if not added.statement_added:
        Annotations.of(scope).add_warning_v2(
            "cdk-adapters:log-key-policy",
            "logs.encryption_key is imported, so its key policy cannot be changed here: it must allow "
            f"logs.<region>.amazonaws.com to use it for {', '.join(group_names)}, or creating the log groups fails",
        )


CAPTURE_READ_ACTIONS = ("logs:GetLogEvents",)
"""The one read IAM can hold to a stream (resource ``log-group:<group>:log-stream:<stream>``).
``FilterLogEvents``, ``StartQuery`` (Logs Insights), ``StartLiveTail`` and ``DescribeLogStreams``
are authorized on the whole group: granting any of them reads or lists every tenant's stream."""


def capture_stream_arns(scope: Construct, endpoint_name: str, adapter_keys: list[str]) -> list[str]:
    """The capture streams of `adapter_keys` (`capture_record.capture_stream`), one ARN each."""
    group = log_group_arn(scope, capture_record.capture_log_group_name(endpoint_name))
    return [f"{group}:log-stream:{capture_record.capture_stream(key)}" for key in adapter_keys]


def grant_read_capture(
    scope: Construct,
    grantee: iam.IGrantable,
    *,
    endpoint_name: str,
    adapters: object,
    is_own: Callable[[str], bool],
    subject: str,
    not_own: str,
) -> iam.Grant:
    """``logs:GetLogEvents`` on exactly the capture streams of `adapters`; a name `is_own` refuses
    is a problem (`not_own` says why), as is an empty list."""
    names = [adapters] if isinstance(adapters, str) else list(adapters)  # type: ignore[call-overload]  # any iterable the caller passes; names are checked next
    refused = [name for name in names if not isinstance(name, str) or not is_own(name)]
    if not names or refused:
        raise ConfigurationError(
            [Problem(subject, "grant_read_capture.adapters", f"{name!r} {not_own}") for name in refused]
            or [Problem(subject, "grant_read_capture.adapters", "name at least one adapter")]
        )
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(CAPTURE_READ_ACTIONS),
        resource_arns=capture_stream_arns(scope, endpoint_name, [adapter_name_key(name) for name in names]),
    )


def log_group(scope: Construct, id: str, settings: EndpointLogs, name: str) -> logs.LogGroup:
    """One group with `settings`' retention, key and removal policy."""
    group = logs.LogGroup(
        scope,
        id,
        log_group_name=name,
        retention=settings.retention,
        encryption_key=settings.encryption_key,
        removal_policy=settings.removal_policy,
    )
    if settings.encryption_key is None:
        nag.acknowledge_log_group_service_key(group)
    return group


class EndpointLogGroups(Construct):
    """The endpoint's log group (`endpoint`), the base component's (`base_component`) and the
    adapters' capture group (`capture`, one stream per adapter; empty while capture is off).

    `settings` carry the key already (`with_logs_key`)."""

    def __init__(
        self, scope: Construct, id: str, *, settings: EndpointLogs, endpoint_name: str, base_component_name: str
    ) -> None:
        super().__init__(scope, id)
        names = log_group_names(endpoint_name, base_component_name)
        endpoint_group, component_group, capture_group = names
        self.endpoint = log_group(self, "Endpoint", settings, endpoint_group)
        self.base_component = log_group(self, "BaseComponent", settings, component_group)
        self.capture = log_group(self, "Capture", settings, capture_group)
        allow_logs_to_use_key(self, settings, list(names))

    @property
    def resources(self) -> list[CfnResource]:
        """The ``AWS::Logs::LogGroup`` resources, for dependencies."""
        return [group.node.default_child for group in (self.endpoint, self.base_component, self.capture)]  # type: ignore[misc]  # a LogGroup's default child is its CfnLogGroup


def _is_key(value: object) -> bool:
    return hasattr(value, "key_arn") and hasattr(value, "add_to_resource_policy")
