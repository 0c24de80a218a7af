"""`modules_to_save` ships full copies of layers, which vLLM's LoRA path does not apply to causal LMs."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    if context.facts.modules_to_save:
        yield context.problem(
            "modules_to_save",
            f"vLLM cannot serve adapters with modules_to_save ({listed(context.facts.modules_to_save)}): "
            "it would ignore or refuse those full layers; retrain with modules_to_save=None "
            "(target those modules with LoRA instead) or merge the adapter into the base model",
        )


CHECK = AdapterRule(id="modules-to-save", description="modules_to_save is empty", run=_run)
