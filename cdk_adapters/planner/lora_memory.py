"""vLLM 0.31's LoRA memory rule: what one GPU slot costs, and what one CPU-cached adapter costs.

Read from vLLM 0.31.0's own source (``vllm/lora/``):

* **GPU slots are allocated once, at start-up, for every LoRA-capable module, at max_lora_rank.**
  ``LoRAModelManager._create_lora_modules`` (``vllm/lora/model_manager.py``) wraps every module whose
  leaf name is in ``get_supported_lora_modules`` (``vllm/lora/utils.py``: every ``LinearBase`` layer, plus
  the model's ``embedding_modules``, i.e. ``embed_tokens`` and ``lm_head`` for Llama) unless
  ``--lora-target-modules`` narrows it, which we do not pass. Not just the modules the adapters target.
  Each wrapper's ``create_lora_weights`` (``BaseLinearLayerWithLoRA`` in ``lora/layers/base_linear.py``,
  ``MergedColumnParallelLinearWithLoRA`` in ``column_parallel_linear.py``, ``VocabParallelEmbeddingWithLoRA``
  in ``vocab_parallel_embedding.py``, ``LogitsProcessorWithLoRA`` in ``logits_processor.py``) allocates
  ``lora_a_stacked`` of ``max_loras x max_lora_rank x in`` and ``lora_b_stacked`` of ``max_loras x out x
  max_lora_rank`` per packed slice, in ``lora_dtype`` (``auto``: the model's dtype, ``vllm/config/lora.py``).
  So one slot costs ``max_lora_rank x sum over modules (in + out) x dtype bytes``, whatever the adapters.
* **The CPU cache holds max_cpu_loras adapters at their real size.** ``WorkerLoRAManager._load_adapter``
  (``vllm/lora/worker_manager.py``) loads each adapter with ``LoRAModel.from_local_checkpoint``
  (``vllm/lora/lora_model.py``) on ``device="cpu"`` in ``lora_dtype`` (pinned memory on CUDA hosts), and
  ``LoRAModelManager`` keeps up to ``capacity = max_cpu_loras`` of them (``AdapterLRUCache``), GPU-resident
  ones included. So one cached adapter costs ``sum over its adapted modules rank x (in + out) x dtype bytes``.

tests/planner/test_vllm_allocation.py builds vLLM's real LoRA manager for a tiny model and compares
the bytes of every tensor it allocated with `gpu_bytes_per_slot`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cdk_adapters.gate.adapter_facts import EMBEDDING_MODULES, AdapterFacts, lora_pairs
from cdk_adapters.gate.safetensors_header import TensorInfo

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
"""``--dtype`` values and their sizes; vLLM's ``lora_dtype=auto`` follows the model's dtype."""
_INPUT_EMBEDDINGS = "embed_tokens"
_OUTPUT_EMBEDDINGS = "lm_head"


@dataclass(frozen=True)
class ModuleShape:
    """``count`` modules named `leaf` whose weight is ``[out_features, in_features]``."""

    leaf: str
    out_features: int
    in_features: int
    count: int


@dataclass(frozen=True)
class BaseModelShapes:
    """Every 2-D weight of the base model (which vLLM wraps for LoRA), with how often it occurs."""

    modules: tuple[ModuleShape, ...]
    source: str
    """Where the counts came from, for the report."""

    @classmethod
    def from_manifest(cls, module_shapes: Mapping[str, list[tuple[int, int]]], num_layers: int) -> BaseModelShapes:
        """Manifest shapes (one per leaf and shape) times `num_layers`, embeddings once.

        A manifest lists each distinct shape once; a decoder repeats them in every layer. A base
        whose `lm_head` is tied to `embed_tokens` stores no lm_head weight, but vLLM still wraps an
        lm_head module of the transposed shape, so it is added.
        """
        modules = []
        for leaf, shapes in sorted(module_shapes.items()):
            for out, in_ in shapes:
                count = 1 if leaf in EMBEDDING_MODULES else num_layers
                modules.append(ModuleShape(leaf, int(out), int(in_), count))
        leaves = {module.leaf for module in modules}
        if _INPUT_EMBEDDINGS in leaves and _OUTPUT_EMBEDDINGS not in leaves:
            embedding = next(module for module in modules if module.leaf == _INPUT_EMBEDDINGS)
            modules.append(ModuleShape(_OUTPUT_EMBEDDINGS, embedding.out_features, embedding.in_features, 1))
        return cls(tuple(modules), f"manifest module_shapes x {num_layers} layers")

    @classmethod
    def from_model_dir(cls, path: Path | str) -> BaseModelShapes:
        """Exact counts from a local model's safetensors headers (every 2-D ``*.weight`` tensor)."""
        from cdk_adapters.gate.base_model import _weight_files
        from cdk_adapters.gate.safetensors_header import read_safetensors_header

        counts: Counter[tuple[str, int, int]] = Counter()
        for weights in _weight_files(Path(path)):
            for name, info in read_safetensors_header(weights).tensors.items():
                parts = name.split(".")
                if len(parts) >= 2 and parts[-1] == "weight" and len(info.shape) == 2:
                    counts[(parts[-2], info.shape[0], info.shape[1])] += 1
        if not counts:
            raise ValueError(f"{path} holds no 2-D weights in safetensors form")
        modules = [ModuleShape(leaf, out, in_, count) for (leaf, out, in_), count in sorted(counts.items())]
        return cls(tuple(modules), f"safetensors headers in {path}")

    @property
    def parameters(self) -> int:
        """Parameters in 2-D weights (norms and biases, a rounding error, are left out)."""
        return sum(m.count * m.out_features * m.in_features for m in self.modules)

    def weight_bytes(self, dtype: str) -> int:
        return self.parameters * DTYPE_BYTES[dtype]

    @property
    def num_layers(self) -> int:
        repeated = [m.count for m in self.modules if m.leaf not in EMBEDDING_MODULES]
        return max(repeated) if repeated else 1

    def kv_bytes_per_token(self, dtype: str, hidden_size: int) -> int:
        """Key and value of one token in every layer: 2 x layers x k_proj width (grouped-query aware)."""
        widths = [m.out_features for m in self.modules if m.leaf == "k_proj"]
        width = max(widths) if widths else hidden_size
        return 2 * self.num_layers * width * DTYPE_BYTES[dtype]

    def shapes_of(self, leaf: str) -> list[ModuleShape]:
        return [m for m in self.modules if m.leaf == leaf]


def gpu_bytes_per_slot(base: BaseModelShapes, max_lora_rank: int, dtype: str) -> int:
    """What one of the ``max_loras`` GPU slots costs: every module, at ``max_lora_rank``."""
    return max_lora_rank * sum(m.count * (m.in_features + m.out_features) for m in base.modules) * DTYPE_BYTES[dtype]


def host_bytes_from_facts(facts: AdapterFacts, base: BaseModelShapes, dtype: str) -> int:
    """One adapter in the CPU cache, from its lock facts: ``max_rank`` on every targeted module.

    With a ``rank_pattern`` the lock records only the largest rank, so this is an upper bound.
    """
    rank = facts.max_rank or facts.rank or 0
    elements = sum(
        m.count * rank * (m.in_features + m.out_features) for leaf in facts.target_modules for m in base.shapes_of(leaf)
    )
    return elements * DTYPE_BYTES[dtype]


def host_bytes_from_tensors(tensors: Mapping[str, TensorInfo], dtype: str) -> int:
    """One adapter in the CPU cache, exactly: its LoRA tensors' elements in ``lora_dtype``."""
    elements = 0
    for pair in lora_pairs(tensors):
        for info in (pair.a, pair.b):
            if info is not None:
                size = 1
                for dim in info.shape:
                    size *= dim
                elements += size
    return elements * DTYPE_BYTES[dtype]


def layers_in_adapters(tensor_maps: Iterable[Mapping[str, TensorInfo]]) -> int | None:
    """The decoder's layer count as local adapters reveal it (``...layers.<i>...``), if they do."""
    highest = -1
    for tensors in tensor_maps:
        for pair in lora_pairs(tensors):
            parts = pair.module_path.split(".")
            for index, part in enumerate(parts[:-1]):
                if part in ("layers", "h", "blocks") and parts[index + 1].isdigit():
                    highest = max(highest, int(parts[index + 1]))
    return highest + 1 if highest >= 0 else None


__all__ = [
    "DTYPE_BYTES",
    "BaseModelShapes",
    "ModuleShape",
    "gpu_bytes_per_slot",
    "host_bytes_from_facts",
    "host_bytes_from_tensors",
    "layers_in_adapters",
]
