"""A tiny demo base model and real PEFT LoRA adapters, built offline in seconds, to try local mode.

Nothing is downloaded: the tokenizer is trained on a few sentences, the model has random weights
(a Llama with hidden size 64, 2 layers, 2 heads of size 32, a size vLLM's CPU attention supports),
and adapters are made by PEFT with `init_lora_weights=False` so that each one really changes the
output. The tests build their models with the same recipe (tests/support/tiny_models.py).
`write_demo` is what ``cdk-adapters demo-model DIR`` runs: a base model, two versions of one
adapter, and a manifest with a canary alias over them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

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


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of about 300 tokens with a chat template."""
    return train_tokenizer(_CORPUS, vocab_size=300, chat_template=_CHAT_TEMPLATE)


def train_tokenizer(
    corpus: Sequence[str], *, vocab_size: int, chat_template: str, extra_special: Mapping[str, str] | None = None
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained offline on `corpus` (``<s>``, ``</s>``, ``<pad>`` and
    `extra_special`'s tokens special), with `chat_template`: the demo and test models' recipe."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    extra = dict(extra_special or {})
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>", *extra.values()],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    options = {"extra_special_tokens": extra} if extra else {}
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers leaves its __init__ unannotated
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", **options
    )
    fast.chat_template = chat_template
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
    # transformers leaves __init__ unannotated, and types its @wraps'd to() as unbound (self first)
    model = LlamaForCausalLM(config).to(torch.float32)  # type: ignore[no-untyped-call, arg-type]  # transformers: unannotated __init__, to() typed unbound
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
    use_rslora: bool = False,
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
        use_rslora=use_rslora,
    )
    model = get_peft_model(base, config)
    # PEFT's random init is small; scale B up so each adapter visibly changes greedy output.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    # PEFT annotates save_directory as str, but takes any path (os.path / os.makedirs)
    model.save_pretrained(out_dir, safe_serialization=True, save_embedding_layers=save_embedding_layers)  # type: ignore[arg-type]  # PEFT annotates str, takes any path
    set_base_identity(out_dir, base_model_name_or_path, revision)
    return out_dir


def set_base_identity(adapter_dir: Path, base_id: str, revision: str | None) -> None:
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


DEMO_ADAPTERS = ("support-en-v1", "support-en-v2")
DEMO_ALIAS = "support-en"
DEMO_ARTIFACT = "s3://cdk-adapters-demo/base/tiny-llama/"
"""Never read: local mode serves the base model from the directory; the manifest schema asks for one."""


def write_demo(out_dir: Path) -> Path:
    """A base model in ``<out_dir>/base``, two adapter versions in ``<out_dir>/adapters/``, and
    ``<out_dir>/manifest.yaml`` (alias ``support-en``: 90% v1, 10% v2); returns the manifest."""
    out_dir = Path(out_dir)
    base_dir = build_base_model(out_dir / "base")
    for seed, name in enumerate(DEMO_ADAPTERS, start=1):
        build_lora_adapter(base_dir, out_dir / "adapters" / name, seed=seed)
    rows = "".join(f"  - name: {name}\n    source: adapters/{name}\n" for name in DEMO_ADAPTERS)
    manifest = out_dir / "manifest.yaml"
    manifest.write_text(
        "# Written by `cdk-adapters demo-model`: a tiny random model, for trying local mode only.\n"
        "version: 1\n"
        "base_model:\n"
        f"  id: {TINY_BASE_MODEL_ID}\n"
        f'  revision: "{TINY_BASE_REVISION}"\n'  # quoted: YAML reads the digits as a number
        f"  artifact: {DEMO_ARTIFACT}\n"
        "  hidden_size: 64\n"
        "  module_names: [down_proj, embed_tokens, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj]\n"
        "serving:\n"
        "  max_loras: 2\n"
        "  max_cpu_loras: 4\n"
        "  max_lora_rank: 16\n"
        f"adapters:\n{rows}"
        "aliases:\n"
        f"  {DEMO_ALIAS}: {{{DEMO_ADAPTERS[0]}: 90, {DEMO_ADAPTERS[1]}: 10}}\n"
    )
    return manifest
