"""cdk-adapters: serve many LoRA adapters of one base model from one SageMaker endpoint.

Every public name is importable from here (``from cdk_adapters import MultiAdapterEndpoint``).
Exports are resolved lazily so that the standard-library parts (the compatibility gate, the
pinned image facts) import without aws-cdk-lib, as the serving container does.

Modules that sat at the package root before it was grouped into folders still import under their
old names (``cdk_adapters.compute``), with a `DeprecationWarning` naming the new place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

_EXPORTS = {
    # name -> module that defines it
    "Problem": "cdk_adapters.problems",
    "ConfigurationError": "cdk_adapters.problems",
    "MultiAdapterEndpoint": "cdk_adapters.endpoint.endpoint",
    "IMultiAdapterEndpoint": "cdk_adapters.endpoint.interface",
    "ImportedMultiAdapterEndpoint": "cdk_adapters.endpoint.imported",
    "ServingReference": "cdk_adapters.contract.discovery",
    "AdapterInferenceComponent": "cdk_adapters.endpoint.components",
    "BaseInferenceComponent": "cdk_adapters.endpoint.components",
    "ComputeRequirements": "cdk_adapters.hosting.compute",
    "StartupTimeouts": "cdk_adapters.hosting.compute",
    "Instances": "cdk_adapters.hosting.instances",
    "BaseCopies": "cdk_adapters.hosting.base_copies",
    "BaseModelIdentity": "cdk_adapters.endpoint.base_model_identity",
    "Networking": "cdk_adapters.hosting.networking",
    "FlatPropWarning": "cdk_adapters.endpoint.prop_groups",
    "VllmOptions": "cdk_adapters.hosting.vllm_options",
    "ContainerImage": "cdk_adapters.hosting.container_image",
    "ModelData": "cdk_adapters.hosting.model_data",
    "AdapterArtifact": "cdk_adapters.artifacts.artifact",
    "AdapterLocation": "cdk_adapters.artifacts.location",
    "AdapterBucket": "cdk_adapters.artifacts.bucket",
    "FleetPlacement": "cdk_adapters.endpoint.fleet",
    "RankTier": "cdk_adapters.endpoint.rank_tiers",
    "EndpointLogs": "cdk_adapters.hosting.logs",
    "ServingPolicy": "cdk_adapters.endpoint.serving_policy",
    "AdapterLimits": "cdk_adapters.contract.tenant_limits",
    "DiscoveryRecord": "cdk_adapters.contract.discovery",
    "endpoint_from_manifest": "cdk_adapters.manifest",
    "AdapterService": "cdk_adapters.service",
    "ServiceCell": "cdk_adapters.service",
    "ImportedAdapterService": "cdk_adapters.service",
    "service_from_manifest": "cdk_adapters.manifest",
    "ServiceRecord": "cdk_adapters.contract.service_record",
    "PlacementRecord": "cdk_adapters.contract.cell_placement",
    "ScalableCopyCount": "cdk_adapters.hosting.scaling",
    "CopyScalingMetric": "cdk_adapters.hosting.scaling",
    "WakeUpScope": "cdk_adapters.hosting.scaling",
    "InstanceScaling": "cdk_adapters.hosting.compute",
    "InstancePool": "cdk_adapters.hosting.instance_pools",
    "RollingUpdate": "cdk_adapters.hosting.rolling_update",
    "BatchSize": "cdk_adapters.hosting.rolling_update",
    "DeployCheck": "cdk_adapters.deploy_check.settings",
    "AdapterCheck": "cdk_adapters.deploy_check.settings",
    "RequestMetrics": "cdk_adapters.monitoring.metric_source",
    "MonitoringAlarms": "cdk_adapters.monitoring.alarms",
    "AlarmThresholds": "cdk_adapters.monitoring.alarms",
    "MAX_ADAPTER_NAME_LENGTH": "cdk_adapters.endpoint.names",
    "validate_adapter_name": "cdk_adapters.endpoint.names",
    "BaseModelFacts": "cdk_adapters.gate",
    "Acknowledgment": "cdk_adapters.gate",
    "check_adapter_dir": "cdk_adapters.gate",
    "load_manifest": "cdk_adapters.manifest",
    "plan_manifest": "cdk_adapters.manifest",
    "add_manifest_adapters": "cdk_adapters.manifest",
    "CopyPlacement": "cdk_adapters.hosting.copy_placement",
    "Routing": "cdk_adapters.hosting.routing",
    "Observability": "cdk_adapters.hosting.sagemaker_metrics",
    "DataCapture": "cdk_adapters.hosting.data_capture",
    "CapacityReservation": "cdk_adapters.hosting.capacity_reservation",
    "SsmAccess": "cdk_adapters.hosting.instance_access",
    "package_adapter": "cdk_adapters.artifacts.packaging",
    "publish_archive": "cdk_adapters.artifacts.publish",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdk_adapters' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


_MOVED = {
    # old module path (under cdk_adapters) -> where it lives now
    "endpoint_interface": "endpoint.interface",
    "imported_endpoint": "endpoint.imported",
    "invoke_grant": "endpoint.invoke_grant",
    "discovery_parameter": "endpoint.discovery_parameter",
    "serving_reference": "endpoint.serving_reference",
    "execution_role": "endpoint.execution_role",
    "iam_conditions": "private.iam_conditions",
    "endpoint_logs": "hosting.logs",
    "inference_component": "endpoint.components",
    "fleet": "endpoint.fleet",
    "serving_policy": "endpoint.serving_policy",
    "names": "endpoint.names",
    "compute": "hosting.compute",
    "instance_types": "hosting.instance_types",
    "instance_pools": "hosting.instance_pools",
    "instance_storage": "hosting.instance_storage",
    "instance_access": "hosting.instance_access",
    "capacity_reservation": "hosting.capacity_reservation",
    "copy_placement": "hosting.copy_placement",
    "networking": "hosting.networking",
    "scaling": "hosting.scaling",
    "deployment": "hosting.rolling_update",
    "vllm_options": "hosting.vllm_options",
    "model_data": "hosting.model_data",
    "container_image": "hosting.container_image",
    "image_build_context": "hosting.image_build_context",
    "routing": "hosting.routing",
    "data_capture": "hosting.data_capture",
    "observability": "hosting.sagemaker_metrics",
    "adapter_artifact": "artifacts.artifact",
    "adapter_location": "artifacts.location",
    "adapter_bucket": "artifacts.bucket",
    "packaging": "artifacts.packaging",
    "publish": "artifacts.publish",
    "s3_checksum": "artifacts.s3_checksum",
    "deploy_check_request": "deploy_check.request",
    "deploy_check_handler": "deploy_check.handler",
    "tokens": "private.cdk_tokens",
    "text_table": "private.text_table",
    "nag_acknowledgments": "private.nag_acknowledgments",
    "synth_summary": "cli.synth_summary",
    "monitoring.request_metrics": "monitoring.metric_source",
    "manifest.plan": "manifest.gating",
}


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old root module name as the module that now holds its code (one object, two names)."""

    def __init__(self, old: str, new: str) -> None:
        self._old, self._new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{self._old} moved to {self._new}; import from there or from cdk_adapters", DeprecationWarning, stacklevel=2
        )
        return importlib.import_module(self._new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is already executed under its new name."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix(f"{__name__}.")
        if old == fullname or old not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(fullname, f"{__name__}.{_MOVED[old]}"))


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
