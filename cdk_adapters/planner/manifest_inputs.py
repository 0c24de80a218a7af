"""What the planner reads from a gated manifest: base model shapes and each adapter's size.

S3 rows are sized from their lock facts (rank x targets x base shapes), local rows exactly from
their safetensors headers (`AdapterContents`, as the gate reads them), so planning stays offline.
"""

from __future__ import annotations

from pathlib import Path

from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.safetensors_header import TensorInfo
from cdk_adapters.manifest.gating import ManifestPlan
from cdk_adapters.planner.fit import AdapterSize
from cdk_adapters.planner.lora_memory import (
    BaseModelShapes,
    host_bytes_from_facts,
    host_bytes_from_tensors,
    layers_in_adapters,
)
from cdk_adapters.problems import ConfigurationError, Problem


def _local_tensors(plan: ManifestPlan) -> dict[str, dict[str, TensorInfo]]:
    found: dict[str, dict[str, TensorInfo]] = {}
    for adapter in plan.adapters:
        if adapter.local_dir is not None:
            header = AdapterContents.from_dir(adapter.local_dir).weights_header
            if header is not None:
                found[adapter.name] = header.tensors
    return found


def base_shapes(plan: ManifestPlan, *, num_layers: int | None = None, base_model_dir: Path | None = None) -> BaseModelShapes:
    """Exact from `base_model_dir`; else the manifest's module_shapes x a layer count (flag or local adapters)."""
    if base_model_dir is not None:
        try:
            return BaseModelShapes.from_model_dir(base_model_dir)
        except ValueError as error:
            raise ConfigurationError([Problem(f"base model '{base_model_dir}'", "(directory)", str(error))]) from None
    spec = plan.manifest.base_model
    problems = []
    if spec.module_shapes is None:
        problems.append(
            Problem(
                "base_model",
                "module_shapes",
                "is not set, so LoRA slot sizes cannot be computed; paste it from `cdk-adapters base-facts DIR`, "
                "or pass --base-model-dir DIR",
            )
        )
    layers = num_layers or layers_in_adapters(_local_tensors(plan).values())
    if layers is None:
        problems.append(
            Problem(
                "base_model",
                "(layers)",
                "the manifest does not say how many decoder layers the base has; pass --num-layers N "
                "(num_hidden_layers in its config.json, 32 for Llama-3.1-8B) or --base-model-dir DIR",
            )
        )
    if problems:
        raise ConfigurationError(problems, heading="cannot size the LoRA slots")
    assert spec.module_shapes is not None and layers is not None  # each missing one raised above
    return BaseModelShapes.from_manifest(spec.module_shapes, layers)


def adapter_sizes(plan: ManifestPlan, base: BaseModelShapes, dtype: str) -> tuple[AdapterSize, ...]:
    tensors = _local_tensors(plan)
    sizes = []
    for adapter in plan.adapters:
        if adapter.name in tensors:
            sizes.append(AdapterSize(adapter.name, host_bytes_from_tensors(tensors[adapter.name], dtype), "adapter files"))
        else:
            sizes.append(AdapterSize(adapter.name, host_bytes_from_facts(adapter.facts, base, dtype), "lock facts"))
    return tuple(sizes)


__all__ = ["adapter_sizes", "base_shapes"]
