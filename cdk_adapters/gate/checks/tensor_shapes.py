"""LoRA matrices must agree with the config's rank and with the base model's layer shapes.

A pair adapting a ``[out, in]`` layer is ``A: [r, in]`` and ``B: [out, r]``. When the base facts
carry per-module shapes, ``(out, in)`` must be one of the base's shapes for that module (either
orientation: GPT-2-style ``Conv1D`` stores weights as ``[in, out]``). Without them the check can
only ask that one side equals the hidden size, which every decoder projection reads or writes;
that misses, for example, a ``k_proj`` from a model with another number of key/value heads.
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.adapter_contents import ADAPTER_WEIGHTS
from cdk_adapters.gate.adapter_facts import generalise, lora_pairs, pattern_rank
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, examples
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    header = contents.weights_header
    if header is None or contents.config is None:
        return
    incomplete: dict[str, str] = {}
    malformed: dict[str, str] = {}
    rank_mismatch: dict[str, str] = {}
    width_mismatch: dict[str, str] = {}
    base = context.reference.base  # None: only completeness and rank are checked, not the layer widths
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
        if pair.embedding or base is None:
            continue
        adapted = (pair.b.shape[0], pair.a.shape[1])
        base_shapes = base.shapes_of(pair.leaf)
        if base_shapes:
            if adapted not in base_shapes and adapted[::-1] not in base_shapes:
                width_mismatch.setdefault(
                    where,
                    f"A {list(pair.a.shape)}, B {list(pair.b.shape)} adapt a {adapted[0]}x{adapted[1]} layer but the "
                    f"base's {pair.leaf} is {' or '.join(f'{o}x{i}' for o, i in sorted(base_shapes))} (out x in)",
                )
        elif base_shapes is None and not pair.is_vision and base.hidden_size not in adapted:
            width_mismatch.setdefault(
                where, f"A {list(pair.a.shape)}, B {list(pair.b.shape)}: neither side is the hidden size {base.hidden_size}"
            )
    if incomplete:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"LoRA pairs are incomplete ({examples({k: f'missing {v}' for k, v in incomplete.items()})}); "
            "the file is damaged or was edited: re-save the adapter",
        )
    if malformed:
        yield context.problem(ADAPTER_WEIGHTS, f"LoRA tensors are not matrices ({examples(malformed)}); re-save the adapter")
    if rank_mismatch:
        yield context.problem(
            "r",
            f"tensor shapes disagree with the rank in adapter_config.json (r / rank_pattern): "
            f"{examples(rank_mismatch)}; the config does not belong to these weights: re-save them together",
        )
    if width_mismatch:
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"tensor shapes do not fit the base model's layers: {examples(width_mismatch)}; "
            "the adapter was trained on a different model: retrain on the pinned base",
        )


CHECK = AdapterRule(
    id="tensor-shapes",
    description="each LoRA pair is complete, 2-D, has the configured rank and fits the base layer it adapts",
    run=_run,
    needs_contents=True,
)
