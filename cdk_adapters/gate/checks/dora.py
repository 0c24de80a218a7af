"""vLLM cannot serve DoRA: stock vLLM answers 500 at registration, so refuse it earlier and clearly."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    if context.facts.use_dora:
        yield context.problem(
            "use_dora",
            "vLLM cannot serve DoRA adapters (use_dora=true); retrain without DoRA or merge it into the base model",
        )


CHECK = AdapterRule(id="dora", description="use_dora is false", run=_run)
