"""vLLM serves no bias term of an adapter: refuse ``bias`` other than ``none`` and ``lora_bias=True``.

Two PEFT options train a bias, and vLLM 0.31 serves neither:

* ``bias="all"`` / ``"lora_only"`` trains the base layers' biases. ``PEFTHelper.validate_legal``
  (``vllm/lora/peft_helper.py``: ``if self.bias != "none": ... "Adapter bias is not supported."``)
  refuses it at load with a 500; we refuse it with advice.
* ``lora_bias=True`` gives ``lora_B`` a bias (saved as ``<module>.lora_B.bias``). ``PEFTHelper``
  has no ``lora_bias`` field (``from_dict`` drops unknown keys), and ``parse_fine_tuned_lora_name``
  (``vllm/lora/utils.py``) maps ``lora_B.bias`` to the same slot as ``lora_B.weight``; the weight,
  read after the bias in the file's key order, overwrites it. The adapter loads and answers as if
  its trained bias were zero. This rule used to read only ``bias`` (which stays ``"none"`` with
  ``lora_bias=True``), so such an adapter passed.

The ``lora_B.bias`` tensors are refused even when the config was edited to say ``lora_bias: false``.
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.adapter_facts import LORA_PARTS
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, examples
from cdk_adapters.gate.safetensors_header import SafetensorsHeader
from cdk_adapters.problems import Problem


def lora_bias_tensors(header: SafetensorsHeader | None) -> list[str]:
    """Names of bias tensors on a LoRA matrix (``...lora_B.bias``) in a safetensors header."""
    if header is None:
        return []
    found: list[str] = []
    for name in header.tensors:
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] == "bias" and parts[-2] in LORA_PARTS:
            found.append(name)
    return sorted(found)


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    if context.facts is not None and context.facts.bias != "none":
        yield context.problem(
            "bias",
            f"vLLM cannot serve adapters with trained biases (bias={context.facts.bias!r}); retrain with bias='none'",
        )
    if context.contents is None:
        return
    config = context.contents.config or {}
    tensors = lora_bias_tensors(context.contents.weights_header)
    if config.get("lora_bias") or tensors:
        found = dict.fromkeys(tensors, "a trained bias")
        where = f" ({examples(found, shown=2)})" if found else ""
        yield context.problem(
            "lora_bias",
            "the adapter trains a bias on lora_B (lora_bias=true)"
            f"{where}, which vLLM ignores: it would answer as if that bias were zero, not as the trained "
            "adapter; retrain with lora_bias=False (PEFT's default), or merge the adapter into the base model",
        )


CHECK = AdapterRule(
    id="lora-bias",
    description="bias is 'none' and lora_bias is off (no lora_B.bias tensors): vLLM serves no adapter bias",
    run=_run,
    needs_facts=False,
)
