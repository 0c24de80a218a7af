"""The reference an adapter served by vLLM must equal: transformers + PEFT on the same files.

float32, decoding greedily one token at a time from the exact prompt token ids vLLM reports.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


def peft_greedy_token_ids(base_dir: Path, adapter_dir: Path, prompt_ids: list[int], count: int) -> list[int]:
    import torch

    model = _peft_model(str(base_dir), str(adapter_dir))
    ids = torch.tensor([prompt_ids])
    generated: list[int] = []
    with torch.no_grad():
        for _ in range(count):
            next_id = int(model(input_ids=ids).logits[0, -1].argmax())
            generated.append(next_id)
            ids = torch.cat([ids, torch.tensor([[next_id]])], dim=1)
    return generated


@lru_cache(maxsize=4)
def _peft_model(base_dir: str, adapter_dir: str):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    return PeftModel.from_pretrained(model, adapter_dir).eval()
