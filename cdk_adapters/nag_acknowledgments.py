"""Every cdk-nag finding the endpoint knowingly accepts, each with the reason it is acceptable.

cdk-nag 3 reports findings through CDK's policy validation; acknowledging one is
``Validations.of(construct).acknowledge(id=..., reason=...)`` on the exact finding id. Wildcard
findings (``AwsSolutions-IAM5[Resource::...]``) name the resource as cdk-nag flattens it, so the ids
are computed here from the same values the policies were built from, never typed by hand:
a new wildcard therefore shows up as a finding instead of hiding behind a broad acknowledgment.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import Construct, IConstruct

IAM_WILDCARD = "AwsSolutions-IAM5"
INLINE_POLICY_RULES = ("HIPAA.Security-IAMNoInlinePolicy", "NIST.800.53.R5-IAMNoInlinePolicy")
ENDPOINT_CONFIG_KMS_RULES = (
    "HIPAA.Security-SageMakerEndpointConfigurationKMSKeyConfigured",
    "NIST.800.53.R5-SageMakerEndpointConfigurationKMSKeyConfigured",
)


REASON_ECR_TOKEN = (
    "ecr:GetAuthorizationToken has no resource-level permissions (IAM requires '*'); the image pull itself "
    "is limited to the one serving-image repository"
)
REASON_METRICS = (
    "cloudwatch:PutMetricData cannot be scoped to a metric namespace by resource (its only resource type is a "
    "CloudWatch dataset, so '*' is required); a cloudwatch:namespace condition limits it to SageMaker's endpoint "
    "and inference component namespaces"
)
REASON_LOG_STREAMS = (
    "log streams are created at run time with generated names; the wildcard covers only the streams of this "
    "endpoint's own log group"
)
REASON_MODEL_PREFIX = (
    "an uncompressed base model is a set of files under one S3 prefix (ModelDataSource S3Prefix); the "
    "wildcard covers only that prefix, read-only"
)
REASON_VPC = (
    "SageMaker creates and deletes the endpoint's network interfaces in the given subnets; the EC2 "
    "network-interface and Describe* actions do not support resource-level scoping at creation time"
)
REASON_INLINE_POLICY = (
    "inline on purpose: the policy grants only this endpoint's own resources (its image repository, log groups, "
    "model prefix and adapter locations) to this endpoint's own execution role, and must never be attached to "
    "another principal; its size does not grow with the adapter count"
)
REASON_ADAPTER_LOCATION = (
    "adapters are read by location, not by adapter: one read-only grant on a declared bucket prefix that holds "
    "only immutable, versioned adapter archives (cdk-adapters publish never overwrites), so the role's policy "
    "stays the same size for one adapter or a thousand; per-object grants pass IAM's 10,240-character limit at "
    "about 40 adapters"
)
REASON_LOCAL_ARCHIVE_POLICY = (
    "inline on purpose: it names the exact CDK asset objects of this endpoint's local adapter archives, for this "
    "endpoint's own execution role only; it grows by one object ARN per local archive, and synth refuses it "
    "before the role's inline policies would pass IAM's 10,240-character limit"
)
ALARM_ACTION_RULES = ("HIPAA.Security-CloudWatchAlarmAction", "NIST.800.53.R5-CloudWatchAlarmAction")
REASON_ALARM_WITHOUT_TOPIC = (
    "no SNS topic was given (MonitoringAlarms.topic): the alarm is still acted on - the base component's rolling "
    "update rolls back on the endpoint alarms it names, and the endpoint dashboard shows every alarm's state; "
    "pass a topic to be notified"
)
REASON_LOCAL_STORAGE_KMS = (
    "the instance type has local NVMe instance storage, which the instance hardware encrypts; SageMaker "
    "rejects KmsKeyId for such instance types (CreateEndpointConfig fails), so no key can be configured"
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
            return delimiter.join(flatten_reference(item) for item in items)
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


def acknowledge_wildcards(policy: IConstruct, statements_by_reason: Iterable[tuple[Iterable[str], str]]) -> None:
    """Acknowledge exactly the ``*`` resources listed, each with its reason."""
    acknowledge(
        policy,
        (
            Acknowledgment(id=wildcard_finding_id(policy, resource), reason=reason)
            for resources, reason in statements_by_reason
            for resource in resources
            if "*" in flatten_reference(Stack.of(policy).resolve(resource))
        ),
    )


def acknowledge_inline_policy(policy: IConstruct, reason: str = REASON_INLINE_POLICY) -> None:
    acknowledge(policy, (Acknowledgment(id=rule, reason=reason) for rule in INLINE_POLICY_RULES))


def acknowledge_local_storage_kms(endpoint_config: Construct) -> None:
    acknowledge(endpoint_config, (Acknowledgment(id=rule, reason=REASON_LOCAL_STORAGE_KMS) for rule in ENDPOINT_CONFIG_KMS_RULES))


def acknowledge_alarm_without_action(alarm: IConstruct) -> None:
    """An alarm with no SNS action (none was configured): HIPAA's and NIST's alarm-action rules."""
    acknowledge(alarm, (Acknowledgment(id=rule, reason=REASON_ALARM_WITHOUT_TOPIC) for rule in ALARM_ACTION_RULES))
