"""Publishing an endpoint's discovery record: an SSM parameter and a few stack outputs.

The record (`cdk_adapters.contract.discovery.DiscoveryRecord`) holds the endpoint, the base
component and the naming rule, not a per-adapter map, so it has the same size for one adapter as
for a thousand and adding an adapter never changes it. It is rendered late (``Lazy``), once, at
synth, from the endpoint's final state (aliases included).

No per-adapter listing is published: an SSM parameter holds at most 8,192 characters (about 160
adapters of the old map), a stack at most 200 outputs, and clients need only the rule. The
construct's `adapter_component_names()` lists the adapters in-process; ``cdk-adapters`` synth
summaries list them from the templates.

This is a function, not a construct, on purpose: the parameter and outputs keep the construct IDs
they had directly under the endpoint, so their logical IDs (a public contract) do not change; the
parameter has a fixed name, and a changed logical ID would replace it and collide on that name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import jsii
from aws_cdk import CfnOutput, IStableStringProducer, Lazy, Stack, Token
from aws_cdk import aws_ssm as ssm
from constructs import Construct, IValidation

from cdk_adapters.contract.discovery import DiscoveryRecord, DiscoveryRecordError
from cdk_adapters.problems import ConfigurationError, Problem

SSM_STANDARD_MAX_LENGTH = 4096
SSM_ADVANCED_MAX_LENGTH = 8192
"""SSM parameter value limits of the Standard and Advanced tiers (characters)."""


class _Record(Protocol):
    """A record published as JSON: an endpoint's `DiscoveryRecord` or a service's `ServiceRecord`."""

    def to_json(self) -> str: ...


def discovery_parameter_name(prefix: str) -> str:
    """The default SSM parameter name of an endpoint whose component prefix is `prefix`.

    Unchanged since the parameter held a per-adapter map, so grants by name keep working.
    """
    return f"/cdk-adapters/{prefix}/inference-components"


def publish_discovery(
    scope: Construct,
    *,
    parameter_name: str,
    endpoint_name: str,
    base_component_name: str,
    component_prefix: str,
    record: Callable[[], DiscoveryRecord],
) -> ssm.StringParameter:
    """Add the outputs and the discovery parameter to `scope` (the endpoint)."""
    CfnOutput(scope, "EndpointName", value=endpoint_name, description="SageMaker endpoint name")
    CfnOutput(scope, "BaseInferenceComponentName", value=base_component_name, description="Base model inference component")
    CfnOutput(
        scope,
        "AdapterComponentPrefix",
        value=f"{component_prefix}-",
        description="An adapter's InferenceComponentName is this prefix plus the adapter name, lower-cased",
    )
    CfnOutput(scope, "DiscoveryParameterName", value=parameter_name, description="SSM parameter with the discovery record")
    rendered = Lazy.string(_Render(record))
    parameter = ssm.StringParameter(
        scope,
        "DiscoveryParameter",
        parameter_name=parameter_name,
        string_value=rendered,
        description=f"cdk-adapters discovery record (endpoint, base component, naming rule) of endpoint {component_prefix}",
    )
    _size_the_tier(parameter, record, parameter_name)
    return parameter


def publish_record(
    scope: Construct, id: str, *, parameter_name: str, record: Callable[[], _Record], description: str
) -> ssm.StringParameter:
    """An SSM parameter holding `record`'s JSON, rendered at synth, in the tier its size needs
    (a service's record: `cdk_adapters.service`)."""
    parameter = ssm.StringParameter(
        scope, id, parameter_name=parameter_name, string_value=Lazy.string(_Render(record)), description=description
    )
    _size_the_tier(parameter, record, parameter_name)
    return parameter


def _size_the_tier(parameter: ssm.StringParameter, record: Callable[[], _Record], parameter_name: str) -> None:
    cfn: ssm.CfnParameter = parameter.node.default_child  # type: ignore[assignment]  # CDK types default_child as IConstruct
    cfn.tier = Lazy.string(_Tier(record))
    parameter.node.add_validation(_RecordSizeValidation(record, parameter_name))


@jsii.implements(IStableStringProducer)
class _Render:
    def __init__(self, record: Callable[[], _Record]) -> None:
        self._record = record

    def produce(self) -> str:
        return self._record().to_json()


@jsii.implements(IStableStringProducer)
class _Tier:
    def __init__(self, record: Callable[[], _Record]) -> None:
        self._record = record

    def produce(self) -> str:
        return "Standard" if len(self._record().to_json()) <= SSM_STANDARD_MAX_LENGTH else "Advanced"


@jsii.implements(IValidation)
class _RecordSizeValidation:
    def __init__(self, record: Callable[[], _Record], parameter_name: str) -> None:
        self._record = record
        self._parameter_name = parameter_name

    def validate(self) -> list[str]:
        size = len(self._record().to_json())
        if size <= SSM_ADVANCED_MAX_LENGTH:
            return []
        return [
            f"discovery parameter {self._parameter_name}: the record is {size} characters; SSM holds "
            f"{SSM_ADVANCED_MAX_LENGTH}. Only aliases, the canary's adapter list and the serving reference "
            "(base model modules and shapes, adapter locations) make it grow: keep fewer aliases, fewer "
            "adapters on the canary, or fewer adapter locations"
        ]


LOOKUP_DUMMY_PREFIX = "dummy-value-for-"
"""What `ssm.StringParameter.value_from_lookup` returns before the context holds the value."""
PLACEHOLDER_NAME = "lookup-pending"
"""Names of the placeholder endpoint on the first synth pass, before the lookup is cached."""


def lookup_discovery_record(scope: Construct, subject: str, parameter_name: str) -> tuple[DiscoveryRecord, bool]:
    """The record in `parameter_name`, read at synth (``ssm.StringParameter.value_from_lookup``,
    cached in ``cdk.context.json``), and whether it is still the lookup's placeholder (first pass)."""
    value = lookup_parameter(scope, subject, parameter_name)
    if value is None:
        return DiscoveryRecord(PLACEHOLDER_NAME, f"{PLACEHOLDER_NAME}-base", PLACEHOLDER_NAME), True
    try:
        record = DiscoveryRecord.from_json(value)
    except DiscoveryRecordError as error:
        raise ConfigurationError(
            [
                Problem(
                    subject,
                    "parameter_name",
                    f"{parameter_name!r} (cached in cdk.context.json) is not a discovery record this cdk-adapters reads: {error}",
                )
            ],
            heading="cannot import MultiAdapterEndpoint",
        ) from None
    return record, False


def lookup_parameter(scope: Construct, subject: str, parameter_name: str) -> str | None:
    """`parameter_name`'s value read at synth (cached in ``cdk.context.json``); None on the first
    pass, before the CLI has looked it up. The stack needs an explicit account and region."""
    stack = Stack.of(scope)
    if Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region):
        raise ConfigurationError(
            [
                Problem(
                    subject,
                    "parameter_name",
                    f"{stack.stack_name} needs an explicit env (account and region) to look up {parameter_name!r}; or use from_endpoint_attributes",
                )
            ],
            heading="cannot look up the discovery record",
        )
    value = ssm.StringParameter.value_from_lookup(scope, parameter_name)
    return None if value.startswith(LOOKUP_DUMMY_PREFIX) else value
