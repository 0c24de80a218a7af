"""cdk-adapters: serve many LoRA adapters of one base model from one SageMaker endpoint.

Exports are resolved lazily so that the standard-library parts (the compatibility gate, the
pinned image facts) import without aws-cdk-lib, as the serving container does.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # name -> module that defines it
    "Problem": "cdk_adapters.problems",
    "ConfigurationError": "cdk_adapters.problems",
    "MultiAdapterEndpoint": "cdk_adapters.endpoint",
    "IMultiAdapterEndpoint": "cdk_adapters.endpoint_interface",
    "ImportedMultiAdapterEndpoint": "cdk_adapters.imported_endpoint",
    "ServingReference": "cdk_adapters.contract.discovery",
    "AdapterInferenceComponent": "cdk_adapters.inference_component",
    "BaseInferenceComponent": "cdk_adapters.inference_component",
    "ComputeRequirements": "cdk_adapters.compute",
    "StartupTimeouts": "cdk_adapters.compute",
    "VllmOptions": "cdk_adapters.vllm_options",
    "ContainerImage": "cdk_adapters.container_image",
    "ModelData": "cdk_adapters.model_data",
    "AdapterArtifact": "cdk_adapters.adapter_artifact",
    "AdapterLocation": "cdk_adapters.adapter_location",
    "AdapterBucket": "cdk_adapters.adapter_bucket",
    "FleetPlacement": "cdk_adapters.fleet",
    "EndpointLogs": "cdk_adapters.endpoint_logs",
    "ServingPolicy": "cdk_adapters.serving_policy",
    "AdapterLimits": "cdk_adapters.contract.tenant_limits",
    "DiscoveryRecord": "cdk_adapters.contract.discovery",
    "endpoint_from_manifest": "cdk_adapters.manifest",
    "ScalableCopyCount": "cdk_adapters.scaling",
    "CopyScalingMetric": "cdk_adapters.scaling",
    "WakeUpScope": "cdk_adapters.scaling",
    "InstanceScaling": "cdk_adapters.compute",
    "InstancePool": "cdk_adapters.instance_pools",
    "RollingUpdate": "cdk_adapters.deployment",
    "BatchSize": "cdk_adapters.deployment",
    "DeployCheck": "cdk_adapters.deploy_check",
    "AdapterCheck": "cdk_adapters.deploy_check",
    "RequestMetrics": "cdk_adapters.monitoring.request_metrics",
    "MonitoringAlarms": "cdk_adapters.monitoring.alarms",
    "AlarmThresholds": "cdk_adapters.monitoring.alarms",
    "MAX_ADAPTER_NAME_LENGTH": "cdk_adapters.names",
    "validate_adapter_name": "cdk_adapters.names",
    "BaseModelFacts": "cdk_adapters.gate",
    "Acknowledgment": "cdk_adapters.gate",
    "check_adapter_dir": "cdk_adapters.gate",
    "load_manifest": "cdk_adapters.manifest",
    "plan_manifest": "cdk_adapters.manifest",
    "add_manifest_adapters": "cdk_adapters.manifest",
    "package_adapter": "cdk_adapters.packaging",
    "publish_archive": "cdk_adapters.publish",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdk_adapters' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
