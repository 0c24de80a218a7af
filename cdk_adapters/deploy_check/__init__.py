"""The deploy check: invoke every new or changed adapter after CloudFormation creates it (the
construct, the request contract and the Lambda handler)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # what ``from cdk_adapters.deploy_check import ...`` gave when this folder was one module
    "DeployCheck": "cdk_adapters.deploy_check.settings",
    "AdapterCheck": "cdk_adapters.deploy_check.settings",
    "AdapterDeployCheck": "cdk_adapters.deploy_check.deploy_check",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
