"""Build vLLM 0.31's real LoRA model manager for a model directory and print what it allocated (JSON).

Run as ``python -m tests.planner.vllm_lora_slots MODEL_DIR MAX_LORAS MAX_LORA_RANK DTYPE``. It constructs the
model with dummy weights (no loading) and `create_lora_manager` exactly as the CPU worker does, then
sums the bytes of every ``lora_a_stacked`` / ``lora_b_stacked`` tensor of every wrapped module. vLLM
reports no LoRA memory figure of its own (its CPU worker logs none), so the tensors are the truth.
A separate process keeps vLLM's process-wide distributed state out of the test session.
"""

from __future__ import annotations

import json
import socket
import sys


def main(model_dir: str, max_loras: int, max_lora_rank: int, dtype: str) -> dict:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.lora.model_manager import LoRAModelManager, create_lora_manager
    from vllm.model_executor.model_loader import get_model

    config = EngineArgs(
        model=model_dir,
        enable_lora=True,
        max_loras=max_loras,
        max_lora_rank=max_lora_rank,
        max_cpu_loras=max_loras,
        dtype=dtype,
        max_model_len=256,
        load_format="dummy",
        enforce_eager=True,
    ).create_engine_config()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with set_current_vllm_config(config):
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
        model = get_model(vllm_config=config)
        manager = create_lora_manager(
            model,
            max_num_seqs=4,
            max_num_batched_tokens=256,
            vocab_size=config.model_config.get_vocab_size(),
            lora_config=config.lora_config,
            device=torch.device("cpu"),
            lora_manager_cls=LoRAModelManager,
            vllm_config=config,
        )
    modules = {}
    for name, module in manager.modules.items():
        tensors = [
            tensor
            for stacked in (module.lora_a_stacked, module.lora_b_stacked)
            for tensor in (stacked if isinstance(stacked, tuple) else (stacked,))
        ]
        modules[name] = {
            "class": type(module).__name__,
            "bytes": sum(t.numel() * t.element_size() for t in tensors),
            "shapes": [list(t.shape) for t in tensors],
        }
    return {
        "lora_dtype": str(config.lora_config.lora_dtype),
        "total_bytes": sum(m["bytes"] for m in modules.values()),
        "modules": modules,
    }


if __name__ == "__main__":
    model_dir, max_loras, rank, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print("VLLM_LORA_SLOTS " + json.dumps(main(model_dir, max_loras, rank, dtype)))
