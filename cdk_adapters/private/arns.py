"""The ARNs of SageMaker endpoints and inference components, built from their literal names.

Names are known at synth (they derive from the stack name and construct path), so an ARN never
needs a reference to the resource: a grant or a check in another stack names it directly.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from constructs import IConstruct


def endpoint_arn(scope: IConstruct, endpoint_name: str) -> str:
    """``arn:<partition>:sagemaker:<region>:<account>:endpoint/<name>`` in `scope`'s stack."""
    return Stack.of(scope).format_arn(service="sagemaker", resource="endpoint", resource_name=endpoint_name)


def inference_component_arn(scope: IConstruct, component_name: str) -> str:
    """The ARN of an inference component (or, with a trailing ``*``, a name pattern of them)."""
    return Stack.of(scope).format_arn(service="sagemaker", resource="inference-component", resource_name=component_name)


def log_group_arn(scope: IConstruct, group: str) -> str:
    """A CloudWatch Logs group's ARN (``arn:...:log-group:<name>``, without the ``:*`` of its streams)."""
    return Stack.of(scope).format_arn(
        service="logs", resource="log-group", resource_name=group, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
