"""Adapters initialised by changing the base model's weights only work on that changed base.

PiSSA, OLoRA, CorDA, LoftQ and LoRA-GA (``init_lora_weights`` = ``"pissa"``/``"pissa_niter_K"``,
``"olora"``, ``"corda"``, ``"loftq"``, ``"lora_ga"``) move part of each adapted weight into the
initial A and B and subtract it from (or quantize) the base layer, so the saved adapter is a delta
on a *residual* base, not on the published base model. vLLM applies it to the published base
(``PEFTHelper`` keeps no ``init_lora_weights``), which double-counts that part. PEFT converts such an
adapter into a plain one on save (``save_pretrained(..., path_initial_model_for_weight_conversion=...)``),
and then writes ``init_lora_weights: true``; other values (``true``, ``false``, ``"gaussian"``,
``"orthogonal"``, ``"eva"``) only choose the starting A and B and are harmless at serving time.
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem

BASE_ALTERING = ("pissa", "olora", "corda", "loftq", "lora_ga")


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.contents is not None  # needs_contents: the rule runs only where the files are at hand
    config = context.contents.config
    if config is None:
        return
    init = config.get("init_lora_weights")
    if isinstance(init, str) and any(init.lower().startswith(kind) for kind in BASE_ALTERING):
        yield context.problem(
            "init_lora_weights",
            f"the adapter was initialised with init_lora_weights={init!r}, which changes the base model's weights, "
            "so it is a delta on that changed base, not on the published one vLLM serves; convert it to a plain "
            "LoRA when saving (PEFT: save_pretrained(..., path_initial_model_for_weight_conversion=<the initial "
            "adapter>)) and publish the converted adapter",
        )


CHECK = AdapterRule(
    id="base-altering-init",
    description="init_lora_weights is not PiSSA/OLoRA/CorDA/LoftQ/LoRA-GA (which change the base weights)",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
