"""The endpoint, its imported twin and the interface both satisfy, and what they share: the checks
`add_adapter` runs, adapter components, grants, discovery, tenant assignment and the execution role."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # what ``from cdk_adapters.endpoint import ...`` gave when this folder was one module
    "MultiAdapterEndpoint": "cdk_adapters.endpoint.endpoint",
    "VARIANT_NAME": "cdk_adapters.endpoint.endpoint",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
