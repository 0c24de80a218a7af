"""The LoRA memory arithmetic against hand-computed cases (Llama-3.1-8B from the example manifest, the tiny Llama)."""

from __future__ import annotations

import pytest

from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.planner.fit import GIB
from cdk_adapters.planner.lora_memory import BaseModelShapes, gpu_bytes_per_slot, host_bytes_from_tensors
from tests.planner.cli_run import plan
from tests.planner.tiny_manifest import TINY_SHAPES, write_tiny_manifest

# Llama-3.1-8B, per decoder layer, in + out of each LoRA-capable linear module (example manifest shapes):
LLAMA_LAYER_IN_PLUS_OUT = {
    "q_proj": 4096 + 4096,
    "k_proj": 4096 + 1024,
    "v_proj": 4096 + 1024,
    "o_proj": 4096 + 4096,
    "gate_proj": 4096 + 14336,
    "up_proj": 4096 + 14336,
    "down_proj": 14336 + 4096,
}
LLAMA_EMBEDDINGS = 2 * (128256 + 4096)  # embed_tokens and lm_head, once each
LLAMA_LAYERS = 32


def test_llama_8b_slot_adapter_and_base_by_hand():
    """rank 16 bf16: slot = 16 x (32 x 81,920 + 264,704) x 2 bytes; adapter = 16 x 32 x 81,920 x 2 bytes."""
    per_layer = sum(LLAMA_LAYER_IN_PLUS_OUT.values())
    assert per_layer == 81920
    expected_slot = 16 * (LLAMA_LAYERS * per_layer + LLAMA_EMBEDDINGS) * 2
    expected_adapter = 16 * LLAMA_LAYERS * per_layer * 2  # the lock facts: r=16 on the seven linear modules
    assert expected_slot == 92_356_608 and expected_adapter == 83_886_080

    document = plan("--num-layers", "32", "--tenants", "12", "--json").json()
    memory = document["memory"]
    assert memory["gpu_bytes_per_slot"] == expected_slot
    assert {a["name"]: a["host_bytes"] for a in memory["adapters"]} == {
        "support-en-v1": expected_adapter,
        "support-de-v1": expected_adapter,
    }
    assert {a["basis"] for a in memory["adapters"]} == {"lock facts"}
    # Base weights: 8,029,995,008 parameters x 2 bytes = 14.957 GiB; KV: 2 x 32 layers x 1,024 x 2 bytes x 8,192 tokens = 1 GiB.
    gpu = memory["gpu_per_gpu_gib"]
    assert gpu["base_weights"] == round(8_029_995_008 * 2 / GIB, 3)
    assert gpu["kv_cache_one_sequence"] == 1.0
    assert gpu["budget"] == 21.6  # 24 GiB x 0.9 on ml.g6.2xlarge
    assert gpu["lora_slots"] == round(4 * expected_slot / GIB, 3)  # the manifest's max_loras 4
    assert memory["max_loras_that_fit"] == int((21.6 * GIB - 8_029_995_008 * 2 - GIB) // expected_slot)
    assert memory["host_gib"]["cpu_cache"] == round(8 * expected_adapter / GIB, 3)  # max_cpu_loras 8
    assert memory["recommended"] == {"max_loras": 12, "max_cpu_loras": 12}


def test_tiny_llama_slot_by_hand():
    """2 layers x (128 x 4 + 192 x 3) + 2 x (300 + 64) = 2,904; x rank 16 x 4 bytes (float32) = 185,856."""
    base = BaseModelShapes.from_manifest(TINY_SHAPES, num_layers=2)
    assert gpu_bytes_per_slot(base, 16, "float32") == 16 * (2 * (4 * 128 + 3 * 192) + 2 * 364) * 4 == 185_856
    assert base.parameters == 2 * (4 * 64 * 64 + 3 * 128 * 64) + 2 * 300 * 64


def test_tied_embeddings_still_get_an_lm_head_slot():
    shapes = {leaf: value for leaf, value in TINY_SHAPES.items() if leaf != "lm_head"}
    untied = BaseModelShapes.from_manifest(TINY_SHAPES, num_layers=2)
    tied = BaseModelShapes.from_manifest(shapes, num_layers=2)
    assert gpu_bytes_per_slot(tied, 8, "bfloat16") == gpu_bytes_per_slot(untied, 8, "bfloat16")


def test_local_adapters_are_sized_from_their_files(tmp_path, zoo):
    """Local rows: exact elements of the LoRA tensors in the files; layer count read from them too."""
    manifest = write_tiny_manifest(
        tmp_path,
        [
            {"name": "attn-v1", "source": str(zoo.adapter("good"))},
            {"name": "wide-v1", "source": str(zoo.adapter("rank-32"))},
        ],
        serving={"max_loras": 2, "max_cpu_loras": 4, "max_lora_rank": 32},
    )
    document = plan("--manifest", str(manifest), "--tenants", "2", "--dtype", "float32", "--json").json()
    sizes = {a["name"]: a for a in document["memory"]["adapters"]}
    # q, k, v, o at rank r in 2 layers: r x (64 + 64) x 4 modules x 2 layers x 4 bytes
    assert sizes["attn-v1"]["host_bytes"] == 8 * 128 * 4 * 2 * 4 == 32_768
    assert sizes["wide-v1"]["host_bytes"] == 32 * 128 * 4 * 2 * 4
    assert {a["basis"] for a in sizes.values()} == {"adapter files"}
    assert document["memory"]["largest_adapter"] == "wide-v1"
    header = AdapterContents.from_dir(zoo.adapter("rank-32")).weights_header
    assert host_bytes_from_tensors(header.tensors, "float32") == sizes["wide-v1"]["host_bytes"]
    assert document["memory"]["base_source"] == "manifest module_shapes x 2 layers"


def test_base_model_dir_gives_exact_counts(zoo):
    from_dir = BaseModelShapes.from_model_dir(zoo.base_dir)
    from_manifest = BaseModelShapes.from_manifest(TINY_SHAPES, num_layers=2)
    assert from_dir.parameters == from_manifest.parameters
    assert gpu_bytes_per_slot(from_dir, 16, "float32") == gpu_bytes_per_slot(from_manifest, 16, "float32")


@pytest.mark.parametrize("dtype, size", [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_dtype_scales_every_figure(dtype, size):
    base = BaseModelShapes.from_manifest(TINY_SHAPES, num_layers=2)
    assert gpu_bytes_per_slot(base, 8, dtype) == 8 * 2904 * size
