"""Manifests for the planner's tests: the tiny Llama (2 layers, hidden 64) with real PEFT adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support import tiny_models as tm

TINY_SHAPES = {
    "down_proj": [[64, 128]],
    "embed_tokens": [[300, 64]],
    "gate_proj": [[128, 64]],
    "k_proj": [[64, 64]],
    "lm_head": [[300, 64]],
    "o_proj": [[64, 64]],
    "q_proj": [[64, 64]],
    "up_proj": [[128, 64]],
    "v_proj": [[64, 64]],
}
"""The tiny Llama's `cdk-adapters base-facts` shapes (vocabulary 300)."""


def write_tiny_manifest(directory: Path, adapters: list[dict[str, Any]], *, serving: dict[str, Any] | None = None) -> Path:
    document = {
        "version": 1,
        "base_model": {
            "id": tm.TINY_BASE_MODEL_ID,
            "revision": tm.TINY_BASE_REVISION,
            "artifact": "s3://example-models/base/tiny-llama/",
            "hidden_size": 64,
            "module_names": sorted(TINY_SHAPES),
            "module_shapes": TINY_SHAPES,
        },
        "serving": serving or {"max_loras": 2, "max_cpu_loras": 4, "max_lora_rank": 16},
        "adapters": adapters,
    }
    path = directory / "plan.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
