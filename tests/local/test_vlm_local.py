"""`cdk-adapters local` serving a vision-language manifest, called with `AdapterClient(images=...)`.

One more local-mode start (the tiny LLaVA, about 30-60 s here) for this file. The reference is
transformers + PEFT on the saved processor's output, with the parts in the order the client sends
them (text, then image).
"""

from __future__ import annotations

import sys

import pytest

from cdk_adapters.client import AdapterClient
from cdk_adapters.compat import BaseModelFacts
from cdk_adapters.local.serving import free_port
from tests.support import tiny_vlm
from tests.support.local_mode import start_local_mode, stop_local_mode
from tests.support.vlm_reference import greedy_token_ids

pytestmark = pytest.mark.vllm

TEXT = "Describe the image:"
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def vlm_local(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm-local")
    base = tiny_vlm.build_vlm(root / "base")
    adapters = {
        "language-v1": tiny_vlm.build_vlm_adapter(base, root / "language", seed=21),
        "tower-v1": tiny_vlm.build_vlm_adapter(base, root / "tower", seed=22, target_modules=tiny_vlm.TOWER_TARGETS),
    }
    facts = BaseModelFacts.from_model_dir(base)
    rows = "".join(f"  - name: {name}\n    source: {path}\n" for name, path in adapters.items())
    manifest = root / "manifest.yaml"
    manifest.write_text(
        "version: 1\nbase_model:\n"
        f"  id: {tiny_vlm.TINY_VLM_MODEL_ID}\n  revision: \"{tiny_vlm.TINY_VLM_REVISION}\"\n"
        "  artifact: s3://unused-bucket/tiny-llava/\n"
        f"  hidden_size: {facts.hidden_size}\n  module_names: [{', '.join(sorted(facts.module_names))}]\n"
        "  vision_language: true\n  allow_vision_modules: true\n"
        f"  architecture: {facts.architecture}\n  vision_tower_type: {facts.vision_tower_type}\n"
        f"  vision_feature_select_strategy: {facts.vision_feature_select_strategy}\n"
        "serving:\n  max_loras: 2\n  max_lora_rank: 8\n"
        f"adapters:\n{rows}"
    )
    port = free_port()
    process, seconds = start_local_mode(
        ["--manifest", str(manifest), "--base-model-dir", str(base), "--work-dir", str(root / "work"),
         "--max-model-len", "256", "--dtype", "float32"],
        port, root / "local.out",
    )
    print(f"\ncdk-adapters local (tiny LLaVA) serving after {seconds:.1f} s", file=sys.stderr)
    try:
        yield f"http://127.0.0.1:{port}", base, adapters
    finally:
        stop_local_mode(process)


def test_the_client_sends_images_and_each_adapter_answers_as_peft_computes(vlm_local, tmp_path):
    url, base, adapters = vlm_local
    client = AdapterClient.from_local(url)
    path = tmp_path / "image-2.png"
    path.write_bytes(tiny_vlm.png(2))
    answers = {}
    for name, directory in adapters.items():
        for image_name, image in (("bytes", tiny_vlm.png(1)), ("path", path)):
            raw = image if isinstance(image, bytes) else image.read_bytes()
            parameters = dict(max_tokens=NEW_TOKENS, temperature=0, ignore_eos=True, return_token_ids=True)
            whole = client.invoke(name, TEXT, images=[image], **parameters).body["choices"][0]["token_ids"]
            streamed = [t for chunk in client.stream(name, TEXT, images=[image], **parameters)
                        for choice in chunk.get("choices", []) for t in choice.get("token_ids") or []]
            _, expected = greedy_token_ids(base, directory, raw, TEXT, NEW_TOKENS, image_first=False)
            assert whole == expected and streamed == expected, f"{name} on {image_name}: {whole} / {streamed} != {expected}"
            answers[name, image_name] = whole
    assert answers["tower-v1", "bytes"] != answers["tower-v1", "path"]
    assert answers["language-v1", "bytes"] != answers["tower-v1", "bytes"]
