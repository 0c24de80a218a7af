"""The gate's vision-language rules, each on a real adapter or base directory that shows its trap.

The traps (`cdk_adapters.gate.vlm_traps`) were observed on the pinned vLLM: the served proof that
correctly keyed adapters match PEFT is tests/container/test_vlm_serving.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cdk_adapters.contract import serving_image
from cdk_adapters.gate import BaseModelFacts, vlm_traps
from cdk_adapters.gate.check import check_adapter_dir
from cdk_adapters.gate.checks import RULES
from cdk_adapters.gate.reference import Reference
from tests.support import tiny_vlm


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate-vlm")
    base = tiny_vlm.build_vlm(root / "base")
    tower = tiny_vlm.build_vlm_adapter(base, root / "tower", seed=3, target_modules=tiny_vlm.TOWER_TARGETS)
    language = tiny_vlm.build_vlm_adapter(base, root / "language", seed=4)
    rekeyed = tiny_vlm.transformers5_layout(Path(shutil.copytree(tower, root / "tower-t5")))
    return {"root": root, "base": base, "tower": tower, "language": language, "tower-t5": rekeyed}


def facts(directory) -> BaseModelFacts:
    return BaseModelFacts.from_model_dir(directory, model_id=tiny_vlm.TINY_VLM_MODEL_ID, revision=tiny_vlm.TINY_VLM_REVISION)


def rules(problems) -> set[str]:
    return {problem.rule for problem in problems}


def test_every_trap_names_the_pinned_vllm_and_a_rule():
    # Upgrading the image fails here until each trap is re-checked on the new vLLM: each trap's
    # version is a literal of its own, never the pin itself (that made this test a tautology).
    source = Path(vlm_traps.__file__).read_text()
    assert "VLLM_VERSION" not in source and "import serving_image" not in source
    for trap in vlm_traps.TRAPS:
        assert trap.vllm_version == serving_image.VLLM_VERSION
    for rule in ("vision-tower-layout", "tower-connector-lora", "vlm-engine-traps"):
        assert rule in RULES


def test_base_facts_record_the_vision_tower_and_strategy(vlm):
    base = facts(vlm["base"])
    assert (base.vision_language, base.architecture, base.vision_tower_type, base.vision_feature_select_strategy) == (
        True,
        "LlavaForConditionalGeneration",
        "clip_vision_model",
        "full",
    )


def test_correctly_keyed_adapters_pass_with_tower_lora_on(vlm):
    reference = Reference(facts(vlm["base"]), 8, allow_vision_modules=True, tower_connector_lora=True)
    for kind in ("tower", "language"):
        assert check_adapter_dir("tenant-v1", vlm[kind], reference) == []


def test_a_transformers5_tower_adapter_is_refused_naming_the_modules_and_the_rekeying(vlm):
    reference = Reference(facts(vlm["base"]), 8, allow_vision_modules=True, tower_connector_lora=True)
    [problem] = check_adapter_dir("tenant-v1", vlm["tower-t5"], reference)
    assert problem.rule == "vision-tower-layout"
    assert "model.vision_tower.encoder.layers.*.mlp.fc1" in problem.message
    assert "'vision_tower.' to 'vision_tower.vision_model.'" in problem.message
    assert serving_image.VLLM_VERSION in problem.message and "silently ignore" in problem.message


def test_a_siglip_tower_adapter_in_transformers5_layout_is_refused_too(vlm):
    """The rule covers SigLIP towers as well as CLIP (vLLM 0.31 nests both under vision_model): a
    real tiny LLaVA with a SigLIP tower, a real PEFT adapter on it, re-keyed the transformers 5 way."""
    root = vlm["root"] / "siglip"
    base = tiny_vlm.build_vlm(root / "base", tower="siglip")
    siglip = facts(base)
    assert siglip.vision_tower_type == "siglip_vision_model"
    tower = tiny_vlm.build_vlm_adapter(base, root / "tower", seed=5, target_modules=tiny_vlm.TOWER_TARGETS)
    rekeyed = tiny_vlm.transformers5_layout(Path(shutil.copytree(tower, root / "tower-t5")))
    reference = Reference(siglip, 8, allow_vision_modules=True, tower_connector_lora=True)
    assert check_adapter_dir("tenant-v1", tower, reference) == []
    [problem] = check_adapter_dir("tenant-v1", rekeyed, reference)
    assert problem.rule == "vision-tower-layout"
    assert "model.vision_tower.encoder.layers.*.mlp.fc1" in problem.message


def test_tower_targets_need_tower_connector_lora(vlm):
    reference = Reference(facts(vlm["base"]), 8, allow_vision_modules=True, tower_connector_lora=False)
    [problem] = check_adapter_dir("tenant-v1", vlm["tower"], reference)
    assert problem.rule == "tower-connector-lora" and "enable_tower_connector_lora" in problem.message
    # A language-model adapter needs no flag.
    assert check_adapter_dir("tenant-v1", vlm["language"], reference) == []
    # Unset, the flag follows allow_vision_modules (the construct and local mode turn both on together).
    assert check_adapter_dir("tenant-v1", vlm["tower"], Reference(facts(vlm["base"]), 8, allow_vision_modules=True)) == []


def test_llava_default_strategy_with_tower_lora_is_refused_for_every_adapter(vlm):
    base_dir = Path(shutil.copytree(vlm["base"], vlm["root"] / "base-default"))
    config = json.loads((base_dir / "config.json").read_text())
    config["vision_feature_select_strategy"] = "default"
    (base_dir / "config.json").write_text(json.dumps(config))
    crashing = Reference(facts(base_dir), 8, allow_vision_modules=True, tower_connector_lora=True)
    for kind in ("tower", "language"):  # the engine dies on the first image request whatever the adapter targets
        [problem] = check_adapter_dir("tenant-v1", vlm[kind], crashing)
        assert problem.rule == "vlm-engine-traps"
        assert f"vLLM {serving_image.VLLM_VERSION}" in problem.message and "'default'" in problem.message
    # Without tower LoRA the same base serves language-model adapters.
    safe = Reference(facts(base_dir), 8, allow_vision_modules=False, tower_connector_lora=False)
    assert check_adapter_dir("tenant-v1", vlm["language"], safe) == []


def test_a_vlm_base_directory_missing_what_serving_needs_is_refused_all_at_once(vlm):
    base_dir = Path(shutil.copytree(vlm["base"], vlm["root"] / "base-bare"))
    for name in ("processor_config.json", "tokenizer.json", "chat_template.jinja"):
        (base_dir / name).unlink()
    tokenizer_config = json.loads((base_dir / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (base_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    tiny_vlm.transformers5_layout(base_dir)
    with pytest.raises(ValueError) as refused:
        facts(base_dir)
    message = str(refused.value)
    for expected in (
        "no image processor",
        "no tokenizer",
        "no chat template",
        "transformers 5's layout",
        "vision_tower.vision_model.embeddings",
        serving_image.VLLM_VERSION,
    ):
        assert expected in message


def test_a_vlm_base_with_only_language_model_weights_is_refused(vlm):
    from safetensors.torch import load_file, save_file

    base_dir = Path(shutil.copytree(vlm["base"], vlm["root"] / "base-text-only"))
    weights = base_dir / "model.safetensors"
    save_file(
        {k: v for k, v in load_file(weights).items() if k.startswith("language_model.")}, weights, metadata={"format": "pt"}
    )
    with pytest.raises(ValueError, match="package the whole model"):
        facts(base_dir)
