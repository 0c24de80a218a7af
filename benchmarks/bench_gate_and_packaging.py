"""What the compatibility gate and deterministic packaging cost, next to what they guard.

The container runs the gate on every ``POST /adapters`` before vLLM loads the adapter, so the gate
must be cheap next to loading the weights. Packaging must cost about what a plain ``tar czf``
costs, despite the fixed metadata that makes it reproducible. Uses an adapter with the real shapes
of a rank-16 LoRA on Llama-3.1-8B (all seven projections, bf16, about 80 MB), random weights.

    .venv/bin/python benchmarks/bench_gate_and_packaging.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.gate import BaseModelFacts, Reference, check_adapter_dir

HIDDEN, INTERMEDIATE, KV_WIDTH, LAYERS, RANK = 4096, 14336, 1024, 32, 16
PROJECTIONS = {
    "self_attn.q_proj": (HIDDEN, HIDDEN),
    "self_attn.k_proj": (HIDDEN, KV_WIDTH),
    "self_attn.v_proj": (HIDDEN, KV_WIDTH),
    "self_attn.o_proj": (HIDDEN, HIDDEN),
    "mlp.gate_proj": (HIDDEN, INTERMEDIATE),
    "mlp.up_proj": (HIDDEN, INTERMEDIATE),
    "mlp.down_proj": (INTERMEDIATE, HIDDEN),
}
BASE = BaseModelFacts(
    model_id="meta-llama/Llama-3.1-8B-Instruct",
    revision=None,
    module_names=frozenset(name.split(".")[-1] for name in PROJECTIONS) | {"embed_tokens", "lm_head"},
    hidden_size=HIDDEN,
)


def write_llama8b_shaped_adapter(directory: Path) -> Path:
    """A PEFT-format LoRA (config + safetensors) with Llama-3.1-8B's projection shapes."""
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for layer in range(LAYERS):
        for module, (fan_in, fan_out) in PROJECTIONS.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(RANK, fan_in, generator=generator).to(torch.bfloat16)
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(fan_out, RANK, generator=generator).to(torch.bfloat16)
    save_file(tensors, directory / "adapter_model.safetensors")
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": 32,
        "target_modules": sorted(name.split(".")[-1] for name in PROJECTIONS),
        "base_model_name_or_path": BASE.model_id,
        "bias": "none",
        "use_dora": False,
        "modules_to_save": None,
    }
    (directory / "adapter_config.json").write_text(json.dumps(config))
    return directory


def plain_tar_gz(source: Path, output: Path) -> None:
    """The baseline: what `tar czf` does, with the file system's own metadata."""
    with tarfile.open(output, "w:gz", compresslevel=9) as tar:
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            tar.add(source / name, arcname=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        (scratch_dir / "adapter").mkdir()
        adapter = write_llama8b_shaped_adapter(scratch_dir / "adapter")
        size_mb = (adapter / "adapter_model.safetensors").stat().st_size / 1e6
        problems = check_adapter_dir("bench-v1", adapter, Reference(BASE, RANK))
        assert not problems, problems
        print(f"adapter: {LAYERS} layers x {len(PROJECTIONS)} projections, rank {RANK}, {size_mb:.1f} MB safetensors")

        register = interleaved_medians(
            {
                "load weights (safetensors -> torch)": lambda: load_file(adapter / "adapter_model.safetensors"),
                "compatibility gate (check_adapter_dir)": lambda: check_adapter_dir("bench-v1", adapter, Reference(BASE, RANK)),
            },
            rounds=args.rounds,
        )
        print_table("register time: gate next to loading", register, baseline="load weights (safetensors -> torch)")

        packaging = interleaved_medians(
            {
                "plain tar czf (tarfile, level 9)": lambda: plain_tar_gz(adapter, scratch_dir / "plain.tar.gz"),
                "deterministic package_adapter": lambda: package_adapter(adapter, scratch_dir / "det.tar.gz"),
            },
            rounds=max(1, args.rounds // 2),
        )
        print_table("packaging: deterministic next to plain", packaging, baseline="plain tar czf (tarfile, level 9)")


if __name__ == "__main__":
    main()
