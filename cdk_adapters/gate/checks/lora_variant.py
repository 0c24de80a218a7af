"""LoRA variants whose forward pass is not ``base(x) + scale * B(A(x))``: vLLM serves none of them.

vLLM 0.31 computes every adapted module as ``base(x) + (lora_alpha / r) * B A x`` (``/ sqrt(r)``
with rsLoRA). ``PEFTHelper`` (``vllm/lora/peft_helper.py``) keeps only the fields ``r``,
``lora_alpha``, ``target_modules``, ``bias``, ``modules_to_save``, ``use_rslora`` and
``use_dora``; ``from_dict`` silently drops every other key of ``adapter_config.json``, and nothing
else under ``vllm/lora/`` reads the config. So each option below loads without an error and
answers differently from PEFT; the gate refuses it instead. (The options are read from the config
as PEFT 0.21 writes it; an option at its default value is not a problem.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem

VARIANTS: dict[str, str] = {
    "use_qalora": "QA-LoRA (lora_A reads the input pooled in groups)",
    "alora_invocation_tokens": "activated LoRA (the adapter applies only after its invocation tokens)",
    "use_bdlora": "block-diagonal LoRA (BD-LoRA)",
    "velora_config": "VeLoRA",
    "monteclora_config": "MonteCLoRA",
    "arrow_config": "Arrow routing between adapters",
    "kasa_config": "KaSA",
    "target_parameters": "LoRA on bare parameters (target_parameters, such as MoE expert weights)",
    "layer_replication": "layer replication (the base model's layers are duplicated and stacked)",
}
"""Config key -> what PEFT does with it, for every LoraConfig option that changes the computation and
that vLLM drops (see the LoraConfig field table in docs/manifest.md)."""


def _is_set(value: Any) -> bool:
    return value not in (None, False, [], {}, "", 0)


def variants_in(config: Mapping[str, Any]) -> dict[str, str]:
    return {key: what for key, what in VARIANTS.items() if _is_set(config.get(key))}


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.contents is not None  # needs_contents: the rule runs only where the files are at hand
    config = context.contents.config
    if config is None:
        return
    for key, what in variants_in(config).items():
        yield context.problem(
            key,
            f"the adapter uses {what} ({key}={config.get(key)!r}), which vLLM does not implement: it would load the "
            f"plain LoRA matrices and answer differently from the trained adapter; retrain as plain LoRA "
            f"without {key}, or merge the adapter into the base model",
        )


CHECK = AdapterRule(
    id="lora-variant",
    description="no LoRA variant vLLM drops (QA-LoRA, aLoRA, BD-LoRA, VeLoRA, MonteCLoRA, Arrow, KaSA, target_parameters, layer_replication)",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
