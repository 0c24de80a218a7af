"""`adapter_config.json` must exist, parse, and describe a LoRA adapter with a rank."""

from __future__ import annotations

from cdk_adapters.compat.adapter_contents import ADAPTER_CONFIG
from cdk_adapters.compat.checks.base import AdapterCheck, AdapterCheckContext


def _run(context: AdapterCheckContext):
    contents = context.contents
    if contents is not None and contents.config_error is not None:
        yield context.problem(
            ADAPTER_CONFIG,
            f"{contents.config_error}; point the source at the folder PEFT's save_pretrained() wrote",
        )
        return
    facts = context.facts
    if facts is None:
        return
    if facts.peft_type != "LORA":
        yield context.problem(
            "peft_type",
            f"peft_type is {facts.peft_type!r}; vLLM serves only LoRA adapters (peft_type 'LORA'); "
            "train with peft.LoraConfig",
        )
    if facts.rank is None or facts.rank <= 0:
        yield context.problem("r", f"r must be a positive integer (got {facts.rank!r}); fix adapter_config.json")


CHECK = AdapterCheck(
    id="adapter-config",
    description="adapter_config.json exists, is JSON, has peft_type LORA and a positive rank r",
    run=_run,
    needs_facts=False,
)
