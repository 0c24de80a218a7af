"""The endpoint, its imported twin and the interface both satisfy, and what they share: the checks
`add_adapter` runs, adapter components, grants, discovery, tenant assignment and the execution role."""

from __future__ import annotations

from cdk_adapters.private.lazy_exports import lazy_exports

_EXPORTS = {
    # what ``from cdk_adapters.endpoint import ...`` gave when this folder was one module
    "MultiAdapterEndpoint": "cdk_adapters.endpoint.endpoint",
    "VARIANT_NAME": "cdk_adapters.endpoint.endpoint",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
