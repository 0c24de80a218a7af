"""Writing manifests (and lock files) for tests, around the tiny base model and real adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.manifest import LockFile, lock_path_for, write_lock
from cdk_adapters.manifest.refresh import lock_entry_for_archive
from tests.support import tiny_models as tm

TINY_BASE = {
    "id": tm.TINY_BASE_MODEL_ID,
    "revision": tm.TINY_BASE_REVISION,
    "artifact": "s3://example-models/base/tiny-llama/",
    "hidden_size": 64,
    "module_names": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens", "lm_head"],
}
ADAPTER_BUCKET = "example-adapters"
ADAPTER_LOCATION = f"s3://{ADAPTER_BUCKET}/adapters/"
"""Every `s3_uri` lies under it; test manifests declare it unless a test says otherwise."""


def s3_uri(name: str) -> str:
    return f"s3://{ADAPTER_BUCKET}/adapters/{name}/adapter.tar.gz"


def write_manifest(
    directory: Path,
    adapters: list[dict[str, Any]],
    *,
    serving: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
    name: str = "adapters.yaml",
    adapter_locations: list[Any] | None = None,
) -> Path:
    document: dict[str, Any] = {
        "version": 1,
        "base_model": {**TINY_BASE, **(base or {})},
        "adapter_locations": [ADAPTER_LOCATION] if adapter_locations is None else adapter_locations,
        "adapters": adapters,
    }
    if serving is not None:
        document["serving"] = serving
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def lock_adapters(manifest_path: Path, published: dict[str, Path], scratch: Path) -> Path:
    """Lock entries for `published` (name -> adapter dir), as `cdk-adapters publish` would write them."""
    lock = LockFile()
    for name, adapter_dir in published.items():
        packaged = package_adapter(adapter_dir, scratch / f"{name}.tar.gz")
        lock.adapters[name] = lock_entry_for_archive(s3_uri(name), packaged.path, packaged.sha256, packaged.size)
    path = lock_path_for(manifest_path)
    write_lock(path, lock)
    return path
