"""vLLM refuses adapters that train biases (``bias`` other than ``none``)."""

from __future__ import annotations

from cdk_adapters.gate.checks.base import AdapterCheck, AdapterCheckContext


def _run(context: AdapterCheckContext):
    if context.facts.bias != "none":
        yield context.problem(
            "bias",
            f"vLLM cannot serve adapters with trained biases (bias={context.facts.bias!r}); retrain with bias='none'",
        )


CHECK = AdapterCheck(id="lora-bias", description="bias is 'none'", run=_run)
