"""Every targeted module must exist in the base: otherwise the adapter was trained on another model."""

from __future__ import annotations

from cdk_adapters.compat.checks.base import AdapterCheck, AdapterCheckContext, listed


def _run(context: AdapterCheckContext):
    facts = context.facts
    if not facts.target_modules:
        if context.contents is None or context.contents.weights_header is None:
            yield context.problem("target_modules", "no target_modules are declared; retrain with PEFT's LoraConfig")
        return
    missing = [module for module in facts.target_modules if module.rsplit(".", 1)[-1] not in context.base.module_names]
    if missing:
        base = context.base.model_id or "the base model"
        yield context.problem(
            "target_modules",
            f"{listed(missing)} not found in {base} (it has {listed(context.base.module_names)}); "
            "the adapter was trained for a different architecture: retrain on the pinned base",
        )


CHECK = AdapterCheck(
    id="target-modules-in-base",
    description="every target module exists in the base model",
    run=_run,
)
