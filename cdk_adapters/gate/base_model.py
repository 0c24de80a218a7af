"""What the gate must know about the base model, read from a Hugging Face model directory.

The manifest states these facts at synth time (so synth needs no weights); the serving container
reads them from the model it actually loaded, so both gates compare adapters with the same facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk_adapters.gate import vlm_traps
from cdk_adapters.gate.adapter_facts import VISION_COMPONENTS
from cdk_adapters.gate.safetensors_header import TensorInfo, read_safetensors_header

_INDEX_FILE = "model.safetensors.index.json"
_SINGLE_FILE = "model.safetensors"


@dataclass(frozen=True)
class BaseModelFacts:
    """The base model an adapter must fit.

    `module_names` are leaf module names that own a 2-D weight (``q_proj``, ``down_proj``,
    ``embed_tokens``, ``lm_head`` ...): a LoRA can only target those. `model_id` and `revision`
    are the pinned identity; ``None`` skips the identity comparison.

    `module_shapes` holds ``(leaf, out, in)`` for every 2-D weight, so LoRA shapes can be checked
    exactly: with grouped-query attention ``k_proj``/``v_proj`` write fewer than `hidden_size`
    features, and MLP projections read or write ``intermediate_size``. ``None`` (a manifest that
    states no shapes) falls back to "one side of each LoRA pair equals `hidden_size`".
    """

    model_id: str | None
    revision: str | None
    module_names: frozenset[str]
    hidden_size: int
    vision_language: bool = False
    module_shapes: frozenset[tuple[str, int, int]] | None = None
    architecture: str | None = None
    """``architectures[0]`` of config.json, e.g. ``LlavaForConditionalGeneration``; None: unknown."""
    vision_tower_type: str | None = None
    """A vision-language model's ``vision_config.model_type`` (``clip_vision_model`` ...); None: unknown or none."""
    vision_feature_select_strategy: str | None = None
    """LLaVA-style models: ``default`` (CLS token dropped) or ``full``; None: not such a model."""

    def shapes_of(self, leaf: str) -> frozenset[tuple[int, int]] | None:
        """The ``(out, in)`` shapes of the base's `leaf` modules; None when shapes are unknown."""
        if self.module_shapes is None:
            return None
        return frozenset((out, in_) for name, out, in_ in self.module_shapes if name == leaf)

    @classmethod
    def from_model_dir(cls, path: Path | str, *, model_id: str | None = None, revision: str | None = None) -> BaseModelFacts:
        """Read `config.json` and the safetensors headers (single file or sharded index)."""
        path = Path(path)
        if not path.is_dir():
            raise ValueError(
                f"{path} {'is not a directory' if path.exists() else 'does not exist'}; give a Hugging Face model directory"
            )
        config_path = path / "config.json"
        try:
            config = json.loads(config_path.read_text())
        except FileNotFoundError:
            raise ValueError(f"{path} has no config.json; is it a Hugging Face model directory?") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{config_path} is not valid JSON: {error}") from None
        shapes: set[tuple[str, int, int]] = set()
        weight_names: set[str] = set()
        for weights_file in _weight_files(path):
            header = read_safetensors_header(weights_file)
            shapes.update(_leaf_matrix_shapes(header.tensors))
            weight_names.update(header.tensors)
        module_names = {leaf for leaf, _, _ in shapes}
        if not module_names:
            raise ValueError(f"{path} holds no 2-D weights in safetensors form")
        vision = _vision_facts(config)
        if _is_vision_language(config):
            missing = vision_serving_problems(path, config, weight_names, vision[1])
            if missing:
                raise ValueError(f"{path} is a vision-language model but cannot be served as one: " + "; ".join(missing))
        return cls(
            model_id=model_id,
            revision=revision,
            module_names=frozenset(module_names),
            hidden_size=_hidden_size(config, config_path),
            vision_language=_is_vision_language(config),
            module_shapes=frozenset(shapes),
            architecture=vision[0],
            vision_tower_type=vision[1],
            vision_feature_select_strategy=vision[2],
        )


def _weight_files(path: Path) -> list[Path]:
    index = path / _INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        return [path / name for name in sorted(set(weight_map.values()))]
    single = path / _SINGLE_FILE
    if single.is_file():
        return [single]
    raise ValueError(f"{path} has neither {_SINGLE_FILE} nor {_INDEX_FILE}")


def _leaf_matrix_shapes(tensors: Mapping[str, TensorInfo]) -> set[tuple[str, int, int]]:
    found: set[tuple[str, int, int]] = set()
    for name, info in tensors.items():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] == "weight" and len(info.shape) == 2:
            found.add((parts[-2], info.shape[0], info.shape[1]))
    return found


def _hidden_size(config: dict[str, Any], config_path: Path) -> int:
    # Vision-language configs keep the language model's size under text_config.
    for candidate in (config, config.get("text_config") or {}, config.get("llm_config") or {}):
        for key in ("hidden_size", "n_embd", "d_model"):
            value = candidate.get(key)
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError(f"{config_path} states no hidden_size")


def _is_vision_language(config: dict[str, Any]) -> bool:
    return any(key in config for key in ("vision_config", "vision_tower", "mm_vision_tower", "visual"))


def _vision_facts(config: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(architecture, vision tower type, feature select strategy)`` from config.json."""
    architectures = config.get("architectures")
    architecture = (
        architectures[0] if isinstance(architectures, list) and architectures and isinstance(architectures[0], str) else None
    )
    vision_config = config.get("vision_config")
    tower = vision_config.get("model_type") if isinstance(vision_config, dict) else None
    strategy = config.get("vision_feature_select_strategy")
    if strategy is None and vlm_traps.uses_feature_select_strategy(architecture):
        strategy = "default"  # what transformers and vLLM assume when a LLaVA config leaves it out
    return architecture, tower if isinstance(tower, str) else None, strategy if isinstance(strategy, str) else None


def vision_serving_problems(path: Path, config: dict[str, Any], weight_names: set[str], tower_type: str | None) -> list[str]:
    """What a vision-language model directory lacks for vLLM to serve it, all at once.

    A common mistake is to package only the language model (weights or files): vLLM then fails to
    start, or serves text while refusing images.
    """
    problems = []
    processor = _json_file(path / "processor_config.json")
    if not (path / "preprocessor_config.json").is_file() and "image_processor" not in processor:
        problems.append(
            "no image processor: save the processor with save_pretrained (preprocessor_config.json or processor_config.json with image_processor)"
        )
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")):
        problems.append("no tokenizer (tokenizer.json, tokenizer.model or vocab.json): save the tokenizer with save_pretrained")
    has_template = (
        any((path / name).is_file() for name in ("chat_template.jinja", "chat_template.json"))
        or "chat_template" in _json_file(path / "tokenizer_config.json")
        or "chat_template" in processor
    )
    if not has_template:
        problems.append(
            "no chat template (chat_template.jinja, or chat_template in tokenizer_config.json): image chat requests need one"
        )
    if not any(part in VISION_COMPONENTS for name in weight_names for part in name.split(".")):
        problems.append("the weights hold no vision tower or connector: package the whole model, not only the language model")
    misplaced = vlm_traps.misplaced_tower_paths(sorted(weight_names), tower_type)
    if misplaced:
        problems.append(
            f"{len(misplaced)} vision tower weights are keyed in transformers 5's layout (e.g. {misplaced[0]}), which "
            f"vLLM {vlm_traps.TRANSFORMERS5_TOWER_CHECKPOINT.vllm_version} refuses to load: re-key "
            f"'vision_tower.' to 'vision_tower.vision_model.' (e.g. {vlm_traps.rekeyed(misplaced[0])})"
        )
    return problems


def _json_file(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}
