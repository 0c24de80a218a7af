"""vLLM scales every module by one factor, so per-module ``rank_pattern``/``alpha_pattern`` scaling is lost.

PEFT scales module m by ``alpha(m) / rank(m)`` (``/ sqrt(rank(m))`` with rsLoRA), where
``alpha_pattern`` and ``rank_pattern`` may override the global ``lora_alpha`` and ``r``. vLLM 0.31
(``vllm/lora/peft_helper.py``) reads neither pattern and applies ``lora_alpha / r`` to every module.
An adapter whose patterned modules have another factor loads fine and answers differently from
PEFT, so it is refused; patterns that keep the factor unchanged are served correctly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TypeGuard

from cdk_adapters.gate.adapter_facts import generalise, lora_pairs, pattern_alpha, pattern_rank, patterns
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, examples
from cdk_adapters.problems import Problem


def _scaling(alpha: float, rank: float, rslora: bool) -> float:
    return alpha / math.sqrt(rank) if rslora else alpha / rank


def _positive_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.contents is not None  # needs_contents: the rule runs only where the files are at hand
    config = context.contents.config
    header = context.contents.weights_header
    if config is None or header is None:
        return
    if not patterns(config, "rank_pattern") and not patterns(config, "alpha_pattern"):
        return
    rslora = bool(config.get("use_rslora"))
    global_rank, global_alpha = config.get("r"), config.get("lora_alpha")
    if not _positive_number(global_rank) or not _positive_number(global_alpha):
        return  # the adapter-config check reports a bad r

    served = _scaling(global_alpha, global_rank, rslora)
    differing: dict[str, str] = {}
    for pair in lora_pairs(header.tensors):
        rank, alpha = pattern_rank(config, pair.module_path), pattern_alpha(config, pair.module_path)
        if not rank or rank <= 0 or alpha is None:
            continue
        trained = _scaling(alpha, rank, rslora)
        if not math.isclose(trained, served, rel_tol=1e-6):
            differing.setdefault(generalise(pair.module_path), f"alpha {alpha:g} / rank {rank} = {trained:g}")
    if differing:
        formula = "lora_alpha / sqrt(r)" if rslora else "lora_alpha / r"
        yield context.problem(
            "rank_pattern" if patterns(config, "rank_pattern") else "alpha_pattern",
            f"vLLM ignores rank_pattern and alpha_pattern and scales every module by {formula} = {served:g}, "
            f"but PEFT trained these modules with another scale ({examples(differing)}), "
            "so vLLM would answer differently from the trained adapter; retrain without rank_pattern/alpha_pattern, "
            "or set alpha_pattern so that alpha / rank equals lora_alpha / r for every patterned module",
        )


CHECK = AdapterRule(
    id="pattern-scaling",
    description="rank_pattern/alpha_pattern keep every module's alpha/rank equal to lora_alpha/r (vLLM uses one scale)",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
