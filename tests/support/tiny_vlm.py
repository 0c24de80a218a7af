"""The tiny LLaVA of `cdk_adapters.local.demo_vlm` (what ``demo-model --vision-language`` writes),
plus what only the tests need: transformers 5's tower layout, to show the traps it sets.

transformers 5 saves the tower as ``vision_tower.encoder...``; vLLM 0.31 refuses such a checkpoint
at start-up and silently ignores an adapter's tower LoRA tensors keyed that way.
"""

from __future__ import annotations

import json
from pathlib import Path

from cdk_adapters.local.demo_vlm import (  # noqa: F401  (re-exported for the tests)
    CHAT_TEMPLATE,
    IMAGE_SIZE,
    IMAGE_TOKEN,
    LANGUAGE_TARGETS,
    PATCH_SIZE,
    TINY_VLM_MODEL_ID,
    TINY_VLM_REVISION,
    TOWER_TARGETS,
    _rekey_file,
    build_tokenizer,
    build_vlm,
    build_vlm_adapter,
    png,
    vllm_layout,
)


def transformers5_layout(directory: Path) -> Path:
    """Rewrite a model's or adapter's weights into transformers 5's tower layout (no ``vision_model``)."""
    directory = Path(directory)
    for name in ("model.safetensors", "adapter_model.safetensors"):
        if (directory / name).is_file():
            _rekey_file(directory / name, to_vision_model=False)
    return directory


def model_config(base_dir: Path) -> dict:
    return json.loads((Path(base_dir) / "config.json").read_text())
