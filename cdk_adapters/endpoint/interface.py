"""`IMultiAdapterEndpoint`: what a caller or another team's stack needs of a multi-adapter endpoint.

Implemented by `MultiAdapterEndpoint` (the platform's endpoint, in the app that deploys it) and by
`ImportedMultiAdapterEndpoint` (the same endpoint seen from another stack or CDK app, through
`MultiAdapterEndpoint.from_endpoint_attributes` or `from_discovery_parameter`), as aws-cdk-lib
pairs ``IBucket`` with ``Bucket`` and ``Bucket.fromBucketAttributes``. A Protocol, not a base
class: constructs are jsii classes, whose metaclass does not mix with `abc.ABCMeta`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam

if TYPE_CHECKING:
    from cdk_adapters.artifacts.artifact import AdapterArtifact
    from cdk_adapters.endpoint.components import AdapterInferenceComponent
    from cdk_adapters.gate import Acknowledgment


@runtime_checkable
class IMultiAdapterEndpoint(Protocol):
    """A SageMaker endpoint serving LoRA adapters of one base model, each as its own component."""

    endpoint_name: str
    """``EndpointName`` for ``InvokeEndpoint``."""
    endpoint_arn: str
    base_component_name: str
    """The base model's inference component."""
    discovery_parameter_name: str | None
    """The SSM parameter holding the discovery record (None: an import that was not told it)."""

    @property
    def component_prefix(self) -> str:
        """Adapter components are named ``<component_prefix>-<adapter, lower-cased>``."""
        ...

    def add_adapter(
        self, name: str, *, artifact: AdapterArtifact, acknowledge: Acknowledgment | None = None
    ) -> AdapterInferenceComponent:
        """Serve one adapter as its own component, named by the naming rule, after the gate."""
        ...

    def grant_invoke(self, grantee: iam.IGrantable, adapters: Sequence[str] | None = None) -> iam.Grant:
        """Let `grantee` invoke the named adapters or aliases. Default: on `MultiAdapterEndpoint`,
        every component of the endpoint; on an import (a tenant's stack), only the adapters added
        through that import (``all_components=True`` there grants every component)."""
        ...

    def grant_read_discovery(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the discovery record."""
        ...

    def metric(self, metric_name: str, *, adapter: str | None = None, **props: Any) -> cloudwatch.Metric:
        """An ``AWS/SageMaker`` metric of one adapter's component, or of the base component."""
        ...
