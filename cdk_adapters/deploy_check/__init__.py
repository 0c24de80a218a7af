"""The deploy check: invoke every new or changed adapter after CloudFormation creates it (the
construct, the request contract and the Lambda handler)."""

from __future__ import annotations

from cdk_adapters.private.lazy_exports import lazy_exports

_EXPORTS = {
    # what ``from cdk_adapters.deploy_check import ...`` gave when this folder was one module
    "DeployCheck": "cdk_adapters.deploy_check.settings",
    "AdapterCheck": "cdk_adapters.deploy_check.settings",
    "AdapterDeployCheck": "cdk_adapters.deploy_check.deploy_check",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
