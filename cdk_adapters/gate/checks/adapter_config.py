"""`adapter_config.json` must exist, parse, and describe a LoRA adapter with a rank."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
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
            f"peft_type is {facts.peft_type!r}; vLLM serves only LoRA adapters (peft_type 'LORA'); train with peft.LoraConfig",
        )
    if facts.rank is None or facts.rank <= 0:
        # The file's own value: the facts hold None for anything that is not an integer ("eight").
        config = contents.config if contents is not None and contents.config is not None else {"r": facts.rank}
        got = f"got {config['r']!r}" if "r" in config else "it is missing"
        yield context.problem("r", f"r must be a positive integer ({got}); fix adapter_config.json")
    if contents is not None and contents.config is not None:
        yield from _malformed_fields(context, contents.config)


def _malformed_fields(context: AdapterRuleContext, config: dict[str, Any]) -> Iterator[Problem]:
    """Fields PEFT itself writes in one shape; another shape means a hand edit the gate must not guess at."""
    alpha = config.get("lora_alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        yield context.problem(
            "lora_alpha",
            f"must be a positive number (got {alpha!r}); vLLM requires it to scale the adapter: "
            "set the lora_alpha the adapter was trained with (PEFT's default is 8)",
        )
    targets = config.get("target_modules")
    if targets is None:
        yield context.problem("target_modules", "is missing; vLLM requires it: re-save the adapter with PEFT's save_pretrained()")
    elif not isinstance(targets, str) and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
        yield context.problem(
            "target_modules",
            f"must be a list of module names or one regular expression (got {targets!r}); re-save the adapter with PEFT",
        )
    for key, kind in (("rank_pattern", "rank"), ("alpha_pattern", "alpha")):
        value = config.get(key)
        if value in (None, {}):
            continue
        if not isinstance(value, dict):
            yield context.problem(
                key, f"must map module-name patterns to a {kind} (got {value!r}); re-save the adapter with PEFT"
            )
            continue
        for pattern, number in value.items():
            try:
                re.compile(pattern)
            except re.error as error:
                yield context.problem(
                    key,
                    f"key {pattern!r} is not a valid regular expression ({error}); PEFT could not have written it: "
                    "re-save the adapter with PEFT",
                )
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= 0:
                yield context.problem(
                    key, f"{pattern!r} maps to {number!r}, not a positive {kind}; re-save the adapter with PEFT"
                )


CHECK = AdapterRule(
    id="adapter-config",
    description="adapter_config.json exists, is JSON, has peft_type LORA, a positive rank r and lora_alpha, and well-formed target_modules, rank_pattern and alpha_pattern",
    run=_run,
    needs_facts=False,
)
