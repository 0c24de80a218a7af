"""Full-model weights beside or inside an adapter usually mean a merged model was saved by accident."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath

from cdk_adapters.gate.adapter_contents import ADAPTER_WEIGHTS
from cdk_adapters.gate.adapter_facts import module_path_of
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem

FULL_MODEL_FILES = re.compile(
    r"^(model(-\d+-of-\d+)?\.safetensors|model\.safetensors\.index\.json|pytorch_model(-\d+-of-\d+)?\.bin"
    r"|pytorch_model\.bin\.index\.json|consolidated(\.\d+)?\.(pth|safetensors)|.*\.gguf)$"
)
_SHOWN = 4


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    full_model_files = [name for name in contents.files if FULL_MODEL_FILES.match(PurePosixPath(name).name)]
    if full_model_files:
        yield context.problem(
            "source",
            f"full-model weights found beside the adapter ({listed(full_model_files)}); this looks like a "
            "merged model saved by accident: save only the PEFT adapter (model.save_pretrained on the PeftModel) "
            "or point the source at the adapter folder",
        )
    header = contents.weights_header
    if header is None:
        return
    saved_modules = set(context.facts.modules_to_save) if context.facts else set()
    full_tensors = []
    for name, info in header.tensors.items():
        if module_path_of(name) is not None or name.endswith("lora_magnitude_vector"):
            continue
        if any(f".{module}." in f".{name}" for module in saved_modules):
            continue  # reported by the modules_to_save check
        if len(info.shape) >= 2:
            full_tensors.append(name)
    if full_tensors:
        shown = sorted(full_tensors)[:_SHOWN]
        more = len(full_tensors) - len(shown)
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"{ADAPTER_WEIGHTS} holds {len(full_tensors)} full-size non-LoRA tensor(s) "
            f"({', '.join(shown)}{f' and {more} more' if more > 0 else ''}); the adapter looks merged with its "
            "base: save the unmerged PEFT adapter",
        )


CHECK = AdapterRule(
    id="merged-weights",
    description="no full-model weight files beside the adapter and no full-size tensors inside it",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
