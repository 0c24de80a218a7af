"""The weights must be `adapter_model.safetensors` and must hold LoRA tensors."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.adapter_contents import ADAPTER_WEIGHTS, PICKLED_WEIGHTS
from cdk_adapters.gate.adapter_facts import lora_pairs
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    if contents.root_file(ADAPTER_WEIGHTS) in contents.links:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"the weights file {ADAPTER_WEIGHTS} is a symbolic link, which is never followed; copy the file itself",
        )
        return
    if not contents.has_root_file(ADAPTER_WEIGHTS):
        pickled = [name for name in PICKLED_WEIGHTS if contents.has_root_file(name)]
        if pickled:
            yield context.problem(
                ADAPTER_WEIGHTS,
                f"weights are in pickle format ({pickled[0]}), which is not safetensors and can run code "
                "when loaded; re-save with model.save_pretrained(dir, safe_serialization=True)",
            )
        else:
            yield context.problem(
                ADAPTER_WEIGHTS,
                f"the weights file {ADAPTER_WEIGHTS} is missing; save the adapter with PEFT's save_pretrained()",
            )
        return
    if contents.weights_error is not None:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"{ADAPTER_WEIGHTS} is not a valid safetensors file ({contents.weights_error}); re-save it",
        )
        return
    assert contents.weights_header is not None  # the file is there and had no weights_error: it was read
    if not lora_pairs(contents.weights_header.tensors):
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"{ADAPTER_WEIGHTS} holds no LoRA tensors (no lora_A/lora_B weights); "
            "save the PEFT model itself, not the base or a merged model",
        )


CHECK = AdapterRule(
    id="weights-file",
    description="adapter_model.safetensors exists, is safetensors (not pickle), and holds LoRA tensors",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
