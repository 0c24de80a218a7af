"""What a vision-language adapter served by vLLM must equal: transformers + PEFT on the processor's output.

float32, greedy, one token at a time from the same prompt (chat template applied, ``<image>``
expanded by the saved processor) and the same pixel values. An adapter on disk is in vLLM's
tower layout (``vision_tower.vision_model.*``); PEFT on transformers 5 wants the other one, so the
reference loads a re-keyed copy and checks that every tensor of the file was applied.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from tests.support import tiny_vlm


def processor_inputs(base_dir: Path, image: bytes, text: str, *, image_first: bool = True) -> dict:
    """``input_ids`` and ``pixel_values`` the saved processor makes of one user turn (image and text,
    in that order unless `image_first` is False: `AdapterClient` sends the text first)."""
    from PIL import Image

    processor = _processor(str(base_dir))
    parts = [{"type": "image"}, {"type": "text", "text": text}]
    messages = [{"role": "user", "content": parts if image_first else parts[::-1]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor(images=Image.open(io.BytesIO(image)).convert("RGB"), text=prompt, return_tensors="pt")


def greedy_token_ids(
    base_dir: Path, adapter_dir: Path | None, image: bytes, text: str, count: int, *, image_first: bool = True
) -> tuple[list[int], list[int]]:
    """``(prompt ids, greedy new ids)`` for the base model (`adapter_dir` None) or base + adapter."""
    import torch

    inputs = processor_inputs(base_dir, image, text, image_first=image_first)
    model = _model(str(base_dir), None if adapter_dir is None else str(adapter_dir))
    ids = inputs["input_ids"]
    generated: list[int] = []
    with torch.no_grad():
        for _ in range(count):
            next_id = int(model(input_ids=ids, pixel_values=inputs["pixel_values"]).logits[0, -1].argmax())
            generated.append(next_id)
            ids = torch.cat([ids, torch.tensor([[next_id]])], dim=1)
    return inputs["input_ids"][0].tolist(), generated


@lru_cache(maxsize=2)
def _processor(base_dir: str):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(base_dir)


@lru_cache(maxsize=4)
def _model(base_dir: str, adapter_dir: str | None):
    import torch
    from peft import PeftModel, get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import LlavaForConditionalGeneration

    model = LlavaForConditionalGeneration.from_pretrained(base_dir, dtype=torch.float32).eval()
    if adapter_dir is None:
        return model
    copy = Path(tempfile.mkdtemp(prefix="peft-reference-")) / "adapter"
    shutil.copytree(adapter_dir, copy)
    tiny_vlm.transformers5_layout(copy)
    peft_model = PeftModel.from_pretrained(model, str(copy)).eval()
    on_disk = load_file(copy / "adapter_model.safetensors")
    loaded = get_peft_model_state_dict(peft_model)
    assert set(loaded) == set(on_disk), f"PEFT did not load every tensor: {sorted(set(on_disk) ^ set(loaded))[:4]}"
    assert all(torch.equal(loaded[key], value) for key, value in on_disk.items()), "PEFT loaded other values"
    return peft_model
