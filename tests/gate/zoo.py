"""Real PEFT adapters for the gate's tests, each built once per test session and shared.

Every directory's conftest exposes the same `zoo` through a module-level singleton, so the tiny
base model and each adapter are built at most once however many test folders ask for them.
Tests that damage an adapter call `zoo.copy(kind, dest)` and change the copy.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from cdk_adapters.gate import BaseModelFacts
from tests.support import tiny_models as tm

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


class AdapterZoo:
    """Lazily built base models and adapters under one session directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._paths: dict[str, Path] = {}

    def _once(self, key: str, build: Callable[[Path], Path]) -> Path:
        if key not in self._paths:
            self._paths[key] = build(self.root / key)
        return self._paths[key]

    @property
    def base_dir(self) -> Path:
        return self._once("base", lambda out: tm.build_base_model(out))

    @property
    def gqa_base_dir(self) -> Path:
        """The tiny Llama with one key/value head (grouped-query attention): k_proj/v_proj are 32x64."""
        return self._once("gqa-base", lambda out: tm.build_base_model(out, num_key_value_heads=1))

    @property
    def vlm_dir(self) -> Path:
        return self._once("vlm-base", lambda out: tm.build_vision_language_model(out))

    @property
    def base_facts(self) -> BaseModelFacts:
        return BaseModelFacts.from_model_dir(self.base_dir, model_id=tm.TINY_BASE_MODEL_ID, revision=tm.TINY_BASE_REVISION)

    def adapter(self, kind: str) -> Path:
        """A built adapter directory; `kind` is one of `KINDS`."""
        builder = KINDS[kind]
        return self._once(f"adapter-{kind}", lambda out: builder(self, out))

    def copy(self, kind: str, dest: Path) -> Path:
        """A private copy of an adapter to damage."""
        return Path(shutil.copytree(self.adapter(kind), dest))


def _lora(**options):
    def build(zoo: AdapterZoo, out: Path) -> Path:
        return tm.build_lora_adapter(zoo.base_dir, out, **options)

    return build


KINDS: dict[str, Callable[[AdapterZoo, Path], Path]] = {
    "good": _lora(seed=1),
    "good-2": _lora(seed=2),
    "rank-32": _lora(seed=3, rank=32, alpha=64),
    "rank-64": _lora(seed=20, rank=64, alpha=128),
    # alpha/rank stays 16/8 = 64/32 on every module, so the gate admits it (vLLM uses one scale). Rank 32 is
    # above the test server's limit; "rank-pattern-16" is the same shape that tests/container serves.
    "rank-pattern-32": _lora(seed=4, rank_pattern={"q_proj": 32}, alpha_pattern={"q_proj": 64}),
    "rank-pattern-16": _lora(seed=21, rank_pattern={"q_proj": 16}, alpha_pattern={"q_proj": 32}),
    "rank-16": _lora(seed=20, rank=16, alpha=32),  # at the test server's --max-lora-rank
    "rslora": _lora(seed=22, use_rslora=True),  # scale lora_alpha / sqrt(r) instead of lora_alpha / r
    "rank-pattern-rescaled": _lora(seed=16, rank_pattern={"q_proj": 32}),
    "all-linear": _lora(seed=17, target_modules="all-linear"),
    "regex-targets": _lora(seed=18, target_modules=r".*\.(q_proj|v_proj)"),
    "gqa": lambda zoo, out: tm.build_lora_adapter(zoo.gqa_base_dir, out, seed=19),
    "gqa-all-linear": lambda zoo, out: tm.build_lora_adapter(zoo.gqa_base_dir, out, seed=23, target_modules="all-linear"),
    "gqa-k-v-only": lambda zoo, out: tm.build_lora_adapter(zoo.gqa_base_dir, out, seed=24, target_modules=("k_proj", "v_proj")),
    "dora": _lora(seed=5, use_dora=True),
    # Issue 27 point 13: LoraConfig options vLLM's PEFTHelper drops (built by real PEFT, any option).
    "lora-bias": lambda zoo, out: tm.build_lora_adapter_with(zoo.base_dir, out, seed=30, lora_bias=True),
    "bias-all": lambda zoo, out: tm.build_lora_adapter_with(zoo.base_dir, out, seed=31, bias="all"),
    "layer-replication": lambda zoo, out: tm.build_lora_adapter_with(
        zoo.base_dir, out, seed=32, layer_replication=[[0, 2], [1, 2]]
    ),
    "alora": lambda zoo, out: tm.build_lora_adapter_with(zoo.base_dir, out, seed=33, alora_invocation_tokens=[5, 6]),
    "pissa": lambda zoo, out: tm.build_lora_adapter_with(zoo.base_dir, out, seed=34, init_lora_weights="pissa"),
    "target-parameters": lambda zoo, out: tm.build_lora_adapter_with(
        zoo.base_dir, out, seed=35, target_modules=[], target_parameters=["mlp.down_proj.weight"]
    ),
    "layers-to-transform": lambda zoo, out: tm.build_lora_adapter_with(
        zoo.base_dir, out, seed=36, layers_to_transform=[1], layers_pattern="layers"
    ),
    "served-options": lambda zoo, out: tm.build_lora_adapter_with(
        zoo.base_dir, out, seed=37, lora_dropout=0.1, exclude_modules=["o_proj"], init_lora_weights="gaussian", use_rslora=True
    ),
    "modules-to-save": _lora(seed=6, modules_to_save=["lm_head"]),
    "embedding": _lora(seed=7, target_modules=("q_proj", "embed_tokens", "lm_head")),
    "q-v-only": _lora(seed=8, target_modules=("q_proj", "v_proj")),
    "mlp": _lora(seed=9, target_modules=("gate_proj", "up_proj", "down_proj")),
    "other-base": _lora(seed=10, base_model_name_or_path="someone-else/other-model"),
    "local-path-base": _lora(seed=11, base_model_name_or_path="/home/me/models/tiny-llama"),
    "other-revision": _lora(seed=12, revision="ffffffffffffffffffffffffffffffffffffffff"),
    "gpt2": lambda zoo, out: tm.build_gpt2_lora_adapter(out, seed=13),
    "vision": lambda zoo, out: tm.build_vision_language_lora_adapter(zoo.vlm_dir, out, seed=14),
    "vision-text-only": lambda zoo, out: tm.build_vision_language_lora_adapter(
        zoo.vlm_dir, out, seed=15, target_modules=r".*language_model.*\.(q_proj|v_proj)"
    ),
}

_ZOO: AdapterZoo | None = None


def session_zoo(tmp_path_factory) -> AdapterZoo:
    """The one zoo of this test session."""
    global _ZOO
    if _ZOO is None:
        _ZOO = AdapterZoo(tmp_path_factory.mktemp("adapter-zoo"))
    return _ZOO
