"""What the gate must know about the base model, read from a Hugging Face model directory.

The manifest states these facts at synth time (so synth needs no weights); the serving container
reads them from the model it actually loaded, so both gates compare adapters with the same facts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cdk_adapters.compat.safetensors_header import read_safetensors_header

_INDEX_FILE = "model.safetensors.index.json"
_SINGLE_FILE = "model.safetensors"


@dataclass(frozen=True)
class BaseModelFacts:
    """The base model an adapter must fit.

    `module_names` are leaf module names that own a 2-D weight (``q_proj``, ``down_proj``,
    ``embed_tokens``, ``lm_head`` ...): a LoRA can only target those. `model_id` and `revision`
    are the pinned identity; ``None`` skips the identity comparison.
    """

    model_id: str | None
    revision: str | None
    module_names: frozenset[str]
    hidden_size: int
    vision_language: bool = False

    @classmethod
    def from_model_dir(
        cls, path: Path | str, *, model_id: str | None = None, revision: str | None = None
    ) -> "BaseModelFacts":
        """Read `config.json` and the safetensors headers (single file or sharded index)."""
        path = Path(path)
        config_path = path / "config.json"
        try:
            config = json.loads(config_path.read_text())
        except FileNotFoundError:
            raise ValueError(f"{path} has no config.json; is it a Hugging Face model directory?") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{config_path} is not valid JSON: {error}") from None
        module_names: set[str] = set()
        for weights_file in _weight_files(path):
            header = read_safetensors_header(weights_file)
            module_names.update(_leaf_modules_with_matrix_weights(header.tensors))
        if not module_names:
            raise ValueError(f"{path} holds no 2-D weights in safetensors form")
        return cls(
            model_id=model_id,
            revision=revision,
            module_names=frozenset(module_names),
            hidden_size=_hidden_size(config, config_path),
            vision_language=_is_vision_language(config),
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


def _leaf_modules_with_matrix_weights(tensors) -> set[str]:
    leaves = set()
    for name, info in tensors.items():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] == "weight" and len(info.shape) == 2:
            leaves.add(parts[-2])
    return leaves


def _hidden_size(config: dict, config_path: Path) -> int:
    # Vision-language configs keep the language model's size under text_config.
    for candidate in (config, config.get("text_config") or {}, config.get("llm_config") or {}):
        for key in ("hidden_size", "n_embd", "d_model"):
            value = candidate.get(key)
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError(f"{config_path} states no hidden_size")


def _is_vision_language(config: dict) -> bool:
    return any(key in config for key in ("vision_config", "vision_tower", "mm_vision_tower", "visual"))
