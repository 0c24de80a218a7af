"""Tiny models and real PEFT LoRA adapters for the tests, built offline in seconds.

The tiny Llama and its adapters come from `cdk_adapters.local.demo_model` (the recipe
``cdk-adapters demo-model`` uses too); the other architectures and damaged forms the gate's
tests need are built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# The recipe lives in the package, where `cdk-adapters demo-model` uses it too.
from cdk_adapters.local.demo_model import (  # noqa: F401  (re-exported for the tests)
    DEFAULT_TARGET_MODULES,
    TINY_BASE_MODEL_ID,
    TINY_BASE_REVISION,
    build_base_model,
    build_lora_adapter,
    build_tokenizer,
    set_base_identity,
)

# --- Added for the compatibility gate's tests (issue 3): other architectures and damaged forms. ---
from tests.support.tiny_vlm import build_vlm, vllm_layout

TINY_VLM_MODEL_ID = "cdk-adapters-tests/tiny-llava"


def build_vision_language_model(out_dir: Path, *, seed: int = 0) -> Path:
    """The tiny LLaVA vLLM serves (`tests.support.tiny_vlm`), with its processor, tokenizer and template."""
    return build_vlm(Path(out_dir), seed=seed)


def build_vision_language_lora_adapter(
    base_dir: Path,
    out_dir: Path,
    *,
    seed: int,
    target_modules: Sequence[str] | str = ("q_proj", "v_proj", "linear_1"),
    rank: int = 8,
) -> Path:
    """A PEFT LoRA on the tiny LLaVA; the default targets reach into the vision tower and projector.

    A string `target_modules` is a regular expression over full module paths (PEFT's meaning)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlavaForConditionalGeneration

    torch.manual_seed(seed)
    base = LlavaForConditionalGeneration.from_pretrained(base_dir, dtype=torch.float32)
    targets = target_modules if isinstance(target_modules, str) else list(target_modules)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(Path(out_dir), safe_serialization=True)
    vllm_layout(Path(out_dir))  # the tower keys vLLM maps (tiny_vlm's docstring says why)
    set_base_identity(Path(out_dir), TINY_VLM_MODEL_ID, TINY_BASE_REVISION)
    return Path(out_dir)


def build_gpt2_lora_adapter(out_dir: Path, *, seed: int, rank: int = 8) -> Path:
    """A LoRA on a tiny random GPT-2 (modules c_attn/c_proj): an adapter for another architecture."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(
        GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=300, n_positions=128, bos_token_id=0, eos_token_id=1)
    )
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(Path(out_dir), safe_serialization=True)
    set_base_identity(Path(out_dir), TINY_BASE_MODEL_ID, TINY_BASE_REVISION)
    return Path(out_dir)


def resave_adapter_as_pickle(adapter_dir: Path) -> Path:
    """Replace adapter_model.safetensors with the pickle form PEFT writes when safe_serialization=False."""
    import torch
    from safetensors.torch import load_file

    adapter_dir = Path(adapter_dir)
    weights = adapter_dir / "adapter_model.safetensors"
    torch.save(load_file(weights), adapter_dir / "adapter_model.bin")
    weights.unlink()
    return adapter_dir


def add_tensors_to_adapter(adapter_dir: Path, tensors: dict) -> Path:
    """Rewrite adapter_model.safetensors with extra named tensors (e.g. a merged full-size weight)."""
    from safetensors.torch import load_file, save_file

    weights = Path(adapter_dir) / "adapter_model.safetensors"
    merged = {**load_file(weights), **tensors}
    save_file(merged, weights, metadata={"format": "pt"})
    return Path(adapter_dir)


# --- Added for issue 27 point 13: adapters with any LoraConfig option, for the gate's field rules. ---


def build_lora_adapter_with(base_dir: Path, out_dir: Path, *, seed: int, **lora_options) -> Path:
    """A real PEFT LoRA adapter of the tiny Llama built with arbitrary `LoraConfig` options.

    Same recipe as `build_lora_adapter` (non-zero B, attention targets, the published base id);
    `lora_options` (``lora_bias=True``, ``layer_replication=[...]``, ...) go to `LoraConfig` as is.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    options = {"r": 8, "lora_alpha": 16, "target_modules": list(DEFAULT_TARGET_MODULES), "init_lora_weights": False}
    options.update(lora_options)
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", **options))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(0.1).mul_(20.0)  # lora_B.bias too: a trained, non-zero bias
    model.save_pretrained(out_dir, safe_serialization=True)
    set_base_identity(out_dir, TINY_BASE_MODEL_ID, TINY_BASE_REVISION)
    return out_dir
