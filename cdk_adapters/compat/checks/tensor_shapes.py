"""LoRA matrices must agree with the config's rank and with the base model's hidden size.

A pair adapting a ``[out, in]`` layer is ``A: [r, in]`` and ``B: [out, r]``; every decoder
projection reads or writes the hidden size, so one of ``in``/``out`` must equal it.
"""

from __future__ import annotations

from cdk_adapters.compat.adapter_contents import ADAPTER_WEIGHTS
from cdk_adapters.compat.adapter_facts import generalise, lora_pairs, pattern_rank
from cdk_adapters.compat.checks.base import AdapterCheck, AdapterCheckContext

_SHOWN = 4


def _run(context: AdapterCheckContext):
    contents = context.contents
    header = contents.weights_header
    if header is None or contents.config is None:
        return
    incomplete, malformed, rank_mismatch, width_mismatch = {}, {}, {}, {}
    hidden = context.base.hidden_size
    for pair in lora_pairs(header.tensors):
        where = generalise(pair.module_path)
        if pair.a is None or pair.b is None:
            incomplete.setdefault(where, "lora_A" if pair.b is not None else "lora_B")
            continue
        if len(pair.a.shape) != 2 or len(pair.b.shape) != 2:
            malformed.setdefault(where, f"{list(pair.a.shape)} / {list(pair.b.shape)}")
            continue
        rank_a, rank_b = pair.a.shape[0], pair.b.shape[1]
        expected = pattern_rank(contents.config, pair.module_path)
        if rank_a != rank_b or (expected is not None and rank_a != expected):
            rank_mismatch.setdefault(where, f"A {list(pair.a.shape)}, B {list(pair.b.shape)}, config rank {expected}")
        if not pair.embedding and not pair.is_vision and hidden not in (pair.a.shape[1], pair.b.shape[0]):
            width_mismatch.setdefault(where, f"A {list(pair.a.shape)}, B {list(pair.b.shape)}")
    if incomplete:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"LoRA pairs are incomplete ({_examples({k: f'missing {v}' for k, v in incomplete.items()})}); "
            "the file is damaged or was edited: re-save the adapter",
        )
    if malformed:
        yield context.problem(
            ADAPTER_WEIGHTS, f"LoRA tensors are not matrices ({_examples(malformed)}); re-save the adapter"
        )
    if rank_mismatch:
        yield context.problem(
            "r",
            f"tensor shapes disagree with the rank in adapter_config.json (r / rank_pattern): "
            f"{_examples(rank_mismatch)}; the config does not belong to these weights: re-save them together",
        )
    if width_mismatch:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"tensor shapes do not fit the base model's hidden size {hidden}: {_examples(width_mismatch)}; "
            "the adapter was trained on a different model: retrain on the pinned base",
        )


def _examples(found: dict[str, str]) -> str:
    shown = [f"{where}: {detail}" for where, detail in list(found.items())[:_SHOWN]]
    more = len(found) - _SHOWN
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


CHECK = AdapterCheck(
    id="tensor-shapes",
    description="each LoRA pair is complete, 2-D, has the configured rank and fits the hidden size",
    run=_run,
    needs_contents=True,
)
