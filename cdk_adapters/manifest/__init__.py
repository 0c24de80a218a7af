"""The adapter manifest: schema, loader, lock file, gate and wiring into `MultiAdapterEndpoint`.

The wiring (`add_manifest_adapters`, `endpoint_props`, `model_data_for`) imports aws-cdk-lib and is
loaded on first use, so `cdk-adapters validate` and the lock tooling start quickly without it.
"""

from __future__ import annotations

import importlib
from typing import Any

from cdk_adapters.manifest.gating import (
    ManifestPlan,
    PlannedAdapter,
    base_facts,
    check_manifest,
    manifest_reference,
    plan_manifest,
    plan_manifest_file,
)
from cdk_adapters.manifest.loader import DEFAULT_MANIFEST_PATH, LoadedManifest, load_manifest, parse_manifest
from cdk_adapters.manifest.lock import LockEntry, LockFile, load_lock, lock_path_for, write_lock
from cdk_adapters.manifest.schema import AdapterRow, BaseModelSpec, Manifest
from cdk_adapters.manifest.serving_schema import ServingLimits, TierSpec

_WIRING = (
    "add_manifest_adapters",
    "adapter_locations_for",
    "endpoint_from_manifest",
    "endpoint_props",
    "model_data_for",
    "package_local_adapter",
)

__all__ = [
    "DEFAULT_MANIFEST_PATH",
    "AdapterRow",
    "BaseModelSpec",
    "LoadedManifest",
    "LockEntry",
    "LockFile",
    "Manifest",
    "ManifestPlan",
    "PlannedAdapter",
    "ServingLimits",
    "TierSpec",
    "base_facts",
    "check_manifest",
    "load_lock",
    "load_manifest",
    "lock_path_for",
    "manifest_reference",
    "parse_manifest",
    "plan_manifest",
    "plan_manifest_file",
    "write_lock",
]


def __getattr__(name: str) -> Any:
    if name in _WIRING:
        return getattr(importlib.import_module("cdk_adapters.manifest.wiring"), name)
    if name == "service_from_manifest":
        return getattr(importlib.import_module("cdk_adapters.manifest.service_wiring"), name)
    raise AttributeError(f"module 'cdk_adapters.manifest' has no attribute {name!r}")
