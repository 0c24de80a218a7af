"""What vLLM serves through the middleware is what the adapter's weights compute.

The reference is transformers + PEFT on the same files (`peft_reference`). The other kinds of adapter
the gate admits, alone and in mixed concurrent batches, are in test_serving_kinds.
"""

from __future__ import annotations

import pytest

from tests.container.peft_reference import peft_greedy_token_ids
from tests.container.sagemaker_calls import NEW_TOKENS, invoke, register

pytestmark = pytest.mark.vllm


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
