"""What vLLM serves through the middleware is what the adapter's weights compute.

The reference is transformers + PEFT on the same files in float32, decoding greedily one token
at a time from the exact prompt token ids vLLM reports.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.sagemaker_calls import NEW_TOKENS, invoke, register

pytestmark = pytest.mark.vllm


def peft_greedy_token_ids(base_dir: Path, adapter_dir: Path, prompt_ids: list[int], count: int) -> list[int]:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, adapter_dir).eval()
    ids = torch.tensor([prompt_ids])
    generated: list[int] = []
    with torch.no_grad():
        for _ in range(count):
            next_id = int(model(input_ids=ids).logits[0, -1].argmax())
            generated.append(next_id)
            ids = torch.cat([ids, torch.tensor([[next_id]])], dim=1)
    return generated


def test_each_adapter_serves_exactly_what_peft_computes_and_adapters_differ(served, zoo):
    outputs = {}
    for name, kind in (("parity-a-v1", "good"), ("parity-b-v1", "good-2")):
        assert register(served.client, name, zoo.adapter(kind)).status_code == 200
        response = invoke(served.client, name)
        assert response.status_code == 200, response.text
        choice = response.json()["choices"][0]
        assert len(choice["token_ids"]) == NEW_TOKENS
        expected = peft_greedy_token_ids(zoo.base_dir, zoo.adapter(kind), choice["prompt_token_ids"], NEW_TOKENS)
        assert choice["token_ids"] == expected, f"{name}: vLLM {choice['token_ids']} != PEFT {expected}"
        outputs[name] = choice["token_ids"]
    assert outputs["parity-a-v1"] != outputs["parity-b-v1"]
