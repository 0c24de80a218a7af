"""Every targeted module must exist in the base: otherwise the adapter was trained on another model."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    facts = context.facts
    assert facts is not None  # needs_facts: the rule runs only where the facts are known
    if not facts.target_modules:
        # With files at hand, the weights-file check already says why no targets could be read.
        if context.contents is None:
            yield context.problem(
                "target_modules", "the lock entry records no target modules; re-create it with `cdk-adapters lock`"
            )
        return
    missing = [module for module in facts.target_modules if module.rsplit(".", 1)[-1] not in context.base.module_names]
    if missing:
        base = context.base.model_id or "the base model"
        yield context.problem(
            "target_modules",
            f"{listed(missing)} not found in {base} (it has {listed(context.base.module_names)}); "
            "the adapter was trained for a different architecture: retrain on the pinned base",
        )


CHECK = AdapterRule(
    id="target-modules-in-base",
    description="every target module exists in the base model",
    run=_run,
    needs_base=True,
)
