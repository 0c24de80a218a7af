"""The summary of an adapter that the gate reasons about, and that the lock file records.

Facts come from an adapter's files at validate/publish time and from the committed lock entry at
synth time, so synth of an ``s3://`` source stays offline yet runs the same checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.safetensors_header import SafetensorsHeader, TensorInfo

LORA_PARTS = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B")
_PEFT_PREFIX = "base_model.model."

EMBEDDING_MODULES = frozenset(
    {"embed_tokens", "lm_head", "wte", "wpe", "word_embeddings", "embed_in", "embed_out", "tok_embeddings", "output"}
)
"""Leaf names of input/output embedding layers across common architectures."""

VISION_COMPONENTS = frozenset(
    {
        "vision_tower",
        "vision_model",
        "vision_encoder",
        "visual",
        "vision",
        "image_encoder",
        "multi_modal_projector",
        "mm_projector",
        "vision_projection",
        "connector",
        "merger",
        "aligner",
        "resampler",
        "vision_resampler",
        "img_projection",
    }
)
"""Path components that mark a vision tower or the connector that feeds it to the language model."""


@dataclass(frozen=True)
class LoraPair:
    """One adapted module: its path, and the shapes of its A and B matrices (either may be missing)."""

    module_path: str
    a: TensorInfo | None
    b: TensorInfo | None
    embedding: bool

    @property
    def leaf(self) -> str:
        return self.module_path.rsplit(".", 1)[-1]

    @property
    def ranks(self) -> set[int]:
        ranks = set()
        if self.a is not None and len(self.a.shape) == 2:
            ranks.add(self.a.shape[0])
        if self.b is not None and len(self.b.shape) == 2:
            ranks.add(self.b.shape[1])
        return ranks

    @property
    def is_vision(self) -> bool:
        return any(part in VISION_COMPONENTS for part in self.module_path.split("."))


def module_path_of(tensor_name: str) -> tuple[str, str] | None:
    """``(module path, lora part)`` for a LoRA tensor name, or None for any other tensor."""
    parts = tensor_name.split(".")
    for index, part in enumerate(parts):
        if part in LORA_PARTS:
            path = ".".join(parts[:index])
            if path.startswith(_PEFT_PREFIX):
                path = path[len(_PEFT_PREFIX) :]
            return path, part
    return None


def lora_pairs(tensors: Mapping[str, TensorInfo]) -> list[LoraPair]:
    """Group LoRA tensors by the module they adapt, in name order."""
    found: dict[str, dict[str, TensorInfo]] = {}
    for name in sorted(tensors):
        parsed = module_path_of(name)
        if parsed is None:
            continue
        path, part = parsed
        found.setdefault(path, {})[part] = tensors[name]
    pairs = []
    for path, parts in found.items():
        embedding = "lora_embedding_A" in parts or "lora_embedding_B" in parts
        pairs.append(
            LoraPair(
                module_path=path,
                a=parts.get("lora_embedding_A" if embedding else "lora_A"),
                b=parts.get("lora_embedding_B" if embedding else "lora_B"),
                embedding=embedding,
            )
        )
    return pairs


def pattern_rank(config: Mapping[str, Any], module_path: str) -> int | None:
    """The rank PEFT gives `module_path`: the first matching `rank_pattern` key, else `r`."""
    return _as_int(_pattern_value(config, "rank_pattern", "r", module_path))


def pattern_alpha(config: Mapping[str, Any], module_path: str) -> float | None:
    """The alpha PEFT gives `module_path`: the first matching `alpha_pattern` key, else `lora_alpha`."""
    return _as_number(_pattern_value(config, "alpha_pattern", "lora_alpha", module_path))


def _pattern_value(config: Mapping[str, Any], patterns_key: str, default_key: str, module_path: str) -> Any:
    # PEFT's own matching (peft.utils.other.get_pattern_key): the key is a regex for the path's tail.
    for key, value in patterns(config, patterns_key).items():
        try:
            if re.match(rf"(.*\.)?({key})$", module_path):
                return value
        except re.error:
            continue  # reported by the adapter-config check
    return config.get(default_key)


def patterns(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``rank_pattern`` / ``alpha_pattern`` as a dict; anything else (a hand edit) counts as empty."""
    value = config.get(key)
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _names(value: Any) -> tuple[str, ...]:
    """A list of module names from the config; a bare string is one name (PEFT accepts both)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(str(item) for item in value)
    return ()


def generalise(module_path: str) -> str:
    """``model.layers.3.self_attn.q_proj`` -> ``model.layers.*.self_attn.q_proj``."""
    return ".".join("*" if part.isdigit() else part for part in module_path.split("."))


@dataclass(frozen=True)
class AdapterFacts:
    """What the checks need to know about one adapter; a lock entry stores it as is (`facts`)."""

    peft_type: str | None
    rank: int | None
    max_rank: int | None
    alpha: float | None
    target_modules: tuple[str, ...]
    base_model_name_or_path: str | None
    revision: str | None
    use_dora: bool = False
    modules_to_save: tuple[str, ...] = ()
    bias: str = "none"
    trainable_token_indices: bool = False
    vision_modules: tuple[str, ...] = ()

    @classmethod
    def from_contents(cls, contents: AdapterContents) -> AdapterFacts | None:
        """Facts from the config, refined by the weights header when it is readable."""
        config = contents.config
        if config is None:
            return None
        rank = _as_int(config.get("r"))
        declared_ranks = [rank] if rank is not None else []
        declared_ranks += [value for value in patterns(config, "rank_pattern").values() if _as_int(value)]
        header = contents.weights_header
        pairs = lora_pairs(header.tensors) if header is not None else []
        max_rank: int | None
        if pairs:
            targets = sorted({pair.leaf for pair in pairs})
            tensor_ranks = [r for pair in pairs for r in pair.ranks]
            max_rank = max(tensor_ranks + ([rank] if rank is not None else []))
            vision = sorted({generalise(pair.module_path) for pair in pairs if pair.is_vision})
        else:
            targets = _declared_targets(config)
            max_rank = max(declared_ranks) if declared_ranks else None
            vision = sorted(t for t in targets if any(p in VISION_COMPONENTS for p in t.split(".")))
        return cls(
            peft_type=config.get("peft_type"),
            rank=rank,
            max_rank=max_rank,
            alpha=_as_number(config.get("lora_alpha")),
            target_modules=tuple(targets),
            base_model_name_or_path=config.get("base_model_name_or_path"),
            revision=config.get("revision"),
            # DoRA's magnitude vectors in the weights count even if the config was edited to hide them.
            use_dora=bool(config.get("use_dora")) or _has_dora_magnitudes(header),
            modules_to_save=_names(config.get("modules_to_save")),
            bias=str(config.get("bias") or "none"),
            trainable_token_indices=bool(config.get("trainable_token_indices")),
            vision_modules=tuple(vision),
        )


def _declared_targets(config: Mapping[str, Any]) -> list[str]:
    """Target names from the config, used only when the weights cannot be read.

    A string is a regular expression over module paths (or ``all-linear``), not a module name;
    only the tensors can say what it matched, so it yields nothing here.
    """
    targets = config.get("target_modules")
    if isinstance(targets, list):
        return sorted({str(t) for t in targets})
    return []


def _has_dora_magnitudes(header: SafetensorsHeader | None) -> bool:
    return header is not None and any("lora_magnitude_vector" in name.split(".") for name in header.tensors)
