"""Tiny Llama base models and real PEFT LoRA adapters, built offline in seconds.

Nothing is downloaded: the tokenizer is trained on a few sentences, the model has random weights
(hidden 64, 2 layers, 2 heads of size 32, a size vLLM's CPU attention supports), and adapters are
made by PEFT with `init_lora_weights=False` so that each one really changes the output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

TINY_BASE_MODEL_ID = "cdk-adapters-tests/tiny-llama"
TINY_BASE_REVISION = "0000000000000000000000000000000000000001"

_CORPUS = [
    "The support team triages tickets by urgency and product area.",
    "Invoices are due thirty days after the billing date.",
    "Bonjour, merci de votre message. Nous revenons vers vous rapidement.",
    "Route the request to the adapter that was fine-tuned for this tenant.",
    "Summaries should be short, factual and polite.",
    "user assistant system: 0123456789 ?!.,;:-()[]{}'\"",
]

_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")


def build_tokenizer():
    """A byte-level BPE tokenizer of about 300 tokens with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def build_base_model(out_dir: Path, *, seed: int = 0, num_key_value_heads: int = 2) -> Path:
    """Write a random tiny Llama (config, safetensors, tokenizer) to `out_dir` and return it.

    ``num_key_value_heads=1`` gives grouped-query attention: k_proj/v_proj then write 32 features,
    not the hidden size 64."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=num_key_value_heads,
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def build_lora_adapter(
    base_dir: Path,
    out_dir: Path,
    *,
    seed: int,
    rank: int = 8,
    alpha: int = 16,
    target_modules: Sequence[str] | str = DEFAULT_TARGET_MODULES,
    base_model_name_or_path: str = TINY_BASE_MODEL_ID,
    revision: str | None = TINY_BASE_REVISION,
    use_dora: bool = False,
    modules_to_save: Iterable[str] | None = None,
    rank_pattern: dict[str, int] | None = None,
    save_embedding_layers: bool = False,
    alpha_pattern: dict[str, int] | None = None,
) -> Path:
    """Train-free PEFT LoRA adapter with non-zero weights (different per `seed`), saved to `out_dir`.

    A string `target_modules` keeps PEFT's meaning: a regular expression over module paths, or
    ``"all-linear"``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=target_modules if isinstance(target_modules, str) else list(target_modules),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=False,
        use_dora=use_dora,
        modules_to_save=list(modules_to_save) if modules_to_save else None,
        rank_pattern=dict(rank_pattern or {}),
        alpha_pattern=dict(alpha_pattern or {}),
    )
    model = get_peft_model(base, config)
    # PEFT's random init is small; scale B up so each adapter visibly changes greedy output.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    model.save_pretrained(out_dir, safe_serialization=True, save_embedding_layers=save_embedding_layers)
    _set_base_identity(out_dir, base_model_name_or_path, revision)
    return out_dir


def _set_base_identity(adapter_dir: Path, base_id: str, revision: str | None) -> None:
    """PEFT records the local path it loaded from; record the published base id instead."""
    config_path = adapter_dir / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = base_id
    config["revision"] = revision
    # PEFT stores target_modules from a set, so its order follows PYTHONHASHSEED; sort it so the
    # same seed gives the same bytes in every session (snapshots and content hashes rely on it).
    if isinstance(config.get("target_modules"), list):
        config["target_modules"] = sorted(config["target_modules"])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))


# --- Added for the compatibility gate's tests (issue 3): other architectures and damaged forms. ---

TINY_VLM_MODEL_ID = "cdk-adapters-tests/tiny-llava"


def build_vision_language_model(out_dir: Path, *, seed: int = 0) -> Path:
    """A random tiny LLaVA (CLIP vision tower, projector, 1-layer Llama) saved as safetensors."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(seed)
    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=32, patch_size=16, projection_dim=32,
    )
    text = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, vocab_size=300, max_position_embeddings=128,
    )
    model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text, image_token_index=299))
    model.save_pretrained(Path(out_dir), safe_serialization=True)
    return Path(out_dir)


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
    _set_base_identity(Path(out_dir), TINY_VLM_MODEL_ID, TINY_BASE_REVISION)
    return Path(out_dir)


def build_gpt2_lora_adapter(out_dir: Path, *, seed: int, rank: int = 8) -> Path:
    """A LoRA on a tiny random GPT-2 (modules c_attn/c_proj): an adapter for another architecture."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=300, n_positions=128, bos_token_id=0, eos_token_id=1))
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(Path(out_dir), safe_serialization=True)
    _set_base_identity(Path(out_dir), TINY_BASE_MODEL_ID, TINY_BASE_REVISION)
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
