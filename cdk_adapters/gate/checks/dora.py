"""vLLM cannot serve DoRA: stock vLLM answers 500 at registration, so refuse it earlier and clearly."""

from __future__ import annotations

from cdk_adapters.gate.checks.base import AdapterCheck, AdapterCheckContext


def _run(context: AdapterCheckContext):
    if context.facts.use_dora:
        yield context.problem(
            "use_dora",
            "vLLM cannot serve DoRA adapters (use_dora=true); retrain without DoRA or merge it into the base model",
        )


CHECK = AdapterCheck(id="dora", description="use_dora is false", run=_run)
