"""Every cdk-nag finding the endpoint knowingly accepts, each with the reason it is acceptable.

cdk-nag 3 reports findings through CDK's policy validation; acknowledging one is
``Validations.of(construct).acknowledge(id=..., reason=...)`` on the exact finding id. Wildcard
findings (``AwsSolutions-IAM5[Resource::...]``) name the resource as cdk-nag flattens it, so the ids
are computed here from the same values the policies were built from, never typed by hand:
a new wildcard therefore shows up as a finding instead of hiding behind a broad acknowledgment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import Construct, IConstruct

IAM_WILDCARD = "AwsSolutions-IAM5"
INLINE_POLICY_RULES = ("HIPAA.Security-IAMNoInlinePolicy", "NIST.800.53.R5-IAMNoInlinePolicy")
ENDPOINT_CONFIG_KMS_RULES = (
    "HIPAA.Security-SageMakerEndpointConfigurationKMSKeyConfigured",
    "NIST.800.53.R5-SageMakerEndpointConfigurationKMSKeyConfigured",
)


REASON_ECR_TOKEN = (
    "ecr:GetAuthorizationToken has no resource-level permissions (IAM requires '*'); it only issues a registry "
    "login token. What can be pulled is set by the pull statement, which names one repository; for an asset image "
    "that is CDK's bootstrap asset repository, which holds every container asset image of the account and region "
    "(IAM cannot narrow a pull to one image), so pin a dedicated repository with ContainerImage.from_digest_uri to "
    "narrow it"
)
REASON_METRICS = (
    "cloudwatch:PutMetricData cannot be scoped to a metric namespace by resource (its only resource type is a "
    "CloudWatch dataset, so '*' is required); a cloudwatch:namespace condition limits it to SageMaker's endpoint "
    "and inference component namespaces"
)
REASON_LOG_STREAMS = (
    "log streams are created at run time with generated names; the wildcard covers only the streams of this "
    "endpoint's own log group, which the endpoint creates (the role cannot create log groups)"
)
REASON_MODEL_PREFIX = (
    "an uncompressed base model is a set of files under one S3 prefix (ModelDataSource S3Prefix); the "
    "wildcard covers only that prefix, read-only, in a bucket of the expected owner (s3:ResourceAccount)"
)
REASON_VPC_INTERFACES = (
    "a network interface's id is assigned when it is created, so ec2:CreateNetworkInterface can only name "
    "network-interface/* of this account and region; the same call is allowed only with this endpoint's subnets "
    "and security groups, which are named exactly, and the calls on existing interfaces are held to this "
    "endpoint's VPC by an ec2:Vpc condition"
)
REASON_VPC_DESCRIBE = (
    "the EC2 Describe calls SageMaker makes for an endpoint in a VPC (DescribeVpcs, DescribeSubnets, "
    "DescribeSecurityGroups, DescribeNetworkInterfaces, DescribeDhcpOptions, DescribeVpcEndpoints) have no "
    "resource-level permissions, so IAM requires '*'; they are read-only"
)
REASON_INLINE_POLICY = (
    "inline on purpose: the policy grants this endpoint's execution role what this endpoint needs (the image's "
    "repository, its own log groups, its model prefix and adapter locations) and must never be attached to "
    "another principal; its size does not grow with the adapter count"
)
REASON_ADAPTER_LOCATION = (
    "adapters are read by location, not by adapter: one read-only grant on a declared bucket prefix (held to the "
    "bucket owner's account by s3:ResourceAccount), so the role's policy stays the same size for one adapter or a "
    "thousand; per-object grants pass IAM's 10,240-character limit at about 40 adapters. The role may read every "
    "object under the prefix, including any written there later: cdk-adapters publish never overwrites a key, but "
    "it cannot stop other writers, so who may write the prefix (bucket policy, S3 Object Lock) decides what is served"
)
REASON_LOCAL_ARCHIVE_POLICY = (
    "inline on purpose: it names the exact CDK asset objects of this endpoint's local adapter archives, for this "
    "endpoint's own execution role only; it grows by one object ARN per local archive, and synth refuses it "
    "before the role's inline policies would pass IAM's 10,240-character limit"
)
ALARM_ACTION_RULES = ("HIPAA.Security-CloudWatchAlarmAction", "NIST.800.53.R5-CloudWatchAlarmAction")
LOG_GROUP_KMS_RULES = ("HIPAA.Security-CloudWatchLogGroupEncrypted", "NIST.800.53.R5-CloudWatchLogGroupEncrypted")
REASON_LOG_GROUP_SERVICE_KEY = (
    "no customer managed key was given (EndpointLogs.encryption_key): CloudWatch Logs still encrypts the log "
    "data at rest, with keys it manages; pass a KMS key to control and audit its use"
)
REASON_LOCAL_STORAGE_KMS = (
    "the instance type has local NVMe instance storage, which the instance hardware encrypts; SageMaker "
    "rejects KmsKeyId for such instance types (CreateEndpointConfig fails), so no key can be configured"
)


LAMBDA_RULES = {
    "concurrency": ("HIPAA.Security-LambdaConcurrency", "NIST.800.53.R5-LambdaConcurrency"),
    "dlq": ("HIPAA.Security-LambdaDLQ", "NIST.800.53.R5-LambdaDLQ"),
    "vpc": ("HIPAA.Security-LambdaInsideVPC", "NIST.800.53.R5-LambdaInsideVPC"),
}
"""HIPAA's and NIST's Lambda rules by what they ask for (reserved concurrency, a DLQ, a VPC)."""


def acknowledge_lambda_rules(construct: IConstruct, reasons: Iterable[tuple[str, str]]) -> None:
    """Acknowledge `LAMBDA_RULES` kinds on a function (or the provider framework holding them), each with its reason."""
    acknowledge(construct, (Acknowledgment(id=rule, reason=reason) for kind, reason in reasons for rule in LAMBDA_RULES[kind]))


def alarm_without_topic_reason(*, drives_rollback: bool, on_dashboard: bool) -> str:
    """Why an alarm with no SNS action is accepted, saying exactly what does act on it."""
    shown = "in the CloudWatch console and on the endpoint dashboard" if on_dashboard else "in the CloudWatch console"
    if drives_rollback:
        return (
            "no SNS topic was given (MonitoringAlarms.topic), so the alarm notifies no one; SageMaker acts on it: the "
            "base component's rolling update names it in its AutoRollbackConfiguration and rolls the update back "
            f"when it fires. Its state shows {shown}; pass a topic to be notified"
        )
    return (
        "no SNS topic was given (MonitoringAlarms.topic), so the alarm takes no action: nothing is notified and no "
        f"rollback watches it. Its state shows {shown}; pass a topic to be notified"
    )


def flatten_reference(value: Any) -> str:
    """Render a resolved CloudFormation value the way cdk-nag names it in finding ids."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict):
        if "Fn::Join" in value:
            delimiter, items = value["Fn::Join"]
            return str(delimiter).join(flatten_reference(item) for item in items)
        if "Fn::Sub" in value:
            return flatten_reference(value["Fn::Sub"])
        if "Fn::GetAtt" in value:
            resource, attribute = value["Fn::GetAtt"]
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if "Fn::ImportValue" in value:
            return flatten_reference(value["Fn::ImportValue"])
        if "Ref" in value:
            return f"<{flatten_reference(value['Ref'])}>"
    return json.dumps(value, separators=(",", ":"))


def wildcard_finding_id(scope: IConstruct, resource: str) -> str:
    """The ``AwsSolutions-IAM5[Resource::...]`` id for a policy resource of `scope`'s stack."""
    return f"{IAM_WILDCARD}[Resource::{flatten_reference(Stack.of(scope).resolve(resource))}]"


def acknowledge(construct: IConstruct, acknowledgments: Iterable[Acknowledgment]) -> None:
    rules = list(acknowledgments)
    if rules:
        Validations.of(construct).acknowledge(*rules)


def acknowledge_wildcards(
    policy: IConstruct,
    statements_by_reason: Iterable[tuple[Iterable[str], str]],
    known: dict[str, list[str]] | None = None,
) -> None:
    """Acknowledge exactly the ``*`` resources listed, each with its reason.

    One finding id can stand for several statements (``Resource::*`` is the ECR token, the metrics
    and the VPC Describe calls): its reason names them all. `known` carries the reasons already
    given for this policy, so a later call adds to them instead of replacing them.
    """
    reasons = known if known is not None else {}
    touched: list[str] = []
    for resources, reason in statements_by_reason:
        for resource in resources:
            if "*" not in flatten_reference(Stack.of(policy).resolve(resource)):
                continue
            finding = wildcard_finding_id(policy, resource)
            given = reasons.setdefault(finding, [])
            if reason not in given:
                given.append(reason)
            if finding not in touched:
                touched.append(finding)
    acknowledge(policy, (Acknowledgment(id=finding, reason="; ".join(reasons[finding])) for finding in touched))


def acknowledge_inline_policy(policy: IConstruct, reason: str = REASON_INLINE_POLICY) -> None:
    acknowledge(policy, (Acknowledgment(id=rule, reason=reason) for rule in INLINE_POLICY_RULES))


def acknowledge_local_storage_kms(endpoint_config: Construct) -> None:
    acknowledge(endpoint_config, (Acknowledgment(id=rule, reason=REASON_LOCAL_STORAGE_KMS) for rule in ENDPOINT_CONFIG_KMS_RULES))


def acknowledge_alarm_without_action(alarm: IConstruct, reason: str) -> None:
    """An alarm with no SNS action (none was configured): HIPAA's and NIST's alarm-action rules."""
    acknowledge(alarm, (Acknowledgment(id=rule, reason=reason) for rule in ALARM_ACTION_RULES))


def acknowledge_log_group_service_key(log_group: IConstruct) -> None:
    """A log group without a customer managed key (none was given): HIPAA's and NIST's encryption rules."""
    acknowledge(log_group, (Acknowledgment(id=rule, reason=REASON_LOG_GROUP_SERVICE_KEY) for rule in LOG_GROUP_KMS_RULES))
