"""Many endpoints ("cells") as one service: `AdapterService`, placing each adapter family in one
cell, and `ImportedAdapterService`, a tenant stack's view of one deployed elsewhere.

Exports load on first use, so the wave gate's handler (`wave_handler`, standard library and boto3)
imports without aws-cdk-lib, as `cdk-adapters bake` does."""

from __future__ import annotations

from cdk_adapters.private.lazy_exports import lazy_exports

_EXPORTS = {
    "AdapterService": "cdk_adapters.service.service",
    "ServiceCell": "cdk_adapters.service.service",
    "ImportedAdapterService": "cdk_adapters.service.imported",
    "WaveGate": "cdk_adapters.service.wave_gate",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
