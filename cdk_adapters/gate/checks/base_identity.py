"""An adapter trained on another base (or another revision of it) loads fine and answers wrongly."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    facts, base = context.facts, context.base
    assert facts is not None  # needs_facts: the rule runs only where the facts are known
    if base.model_id is not None and facts.base_model_name_or_path != base.model_id:
        recorded = facts.base_model_name_or_path
        hint = ""
        if isinstance(recorded, str) and (recorded.startswith(("/", ".", "~")) or "\\" in recorded):
            hint = " (PEFT recorded the local path it loaded from)"
        yield context.problem(
            "base_model_name_or_path",
            f"adapter was trained on {recorded!r}{hint} but the pinned base is {base.model_id!r}; "
            f"retrain on the pinned base, or if it is the same model set base_model_name_or_path to "
            f"{base.model_id!r} in adapter_config.json",
        )
    if base.revision is not None and facts.revision is not None and facts.revision != base.revision:
        yield context.problem(
            "revision",
            f"adapter was trained on revision {facts.revision!r} but the pinned base revision is "
            f"{base.revision!r}; retrain on the pinned revision (or pin the base to the adapter's)",
        )


CHECK = AdapterRule(
    id="base-identity",
    description="base_model_name_or_path equals the pinned base id; revision, when recorded, equals the pin",
    run=_run,
    needs_base=True,
)
