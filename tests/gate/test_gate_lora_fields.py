"""Issue 27 point 13: every LoraConfig option that changes the computation is served by vLLM or refused.

Adapters are built by the real PEFT (the zoo); options PEFT cannot build on the tiny Llama (QA-LoRA
needs a GPTQ base, the other variants their own training setups) are written into a real adapter's
config as PEFT saves them. The table of fields is in docs/manifest.md ("Every LoraConfig field").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_adapters.gate import Reference, check_adapter_dir
from cdk_adapters.gate.safetensors_header import read_safetensors_header


def check(zoo, path: Path):
    return check_adapter_dir("tenant-v1", path, Reference(zoo.base_facts, 16))


def edit_config(path: Path, **changes) -> None:
    config_file = path / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config.update(changes)
    config_file.write_text(json.dumps(config))


def test_a_real_lora_bias_adapter_is_refused(zoo):
    adapter = zoo.adapter("lora-bias")
    config = json.loads((adapter / "adapter_config.json").read_text())
    # Why the old rule let it through: PEFT leaves `bias` at "none"; the bias is a lora_B.bias tensor.
    assert config["bias"] == "none" and config["lora_bias"] is True
    assert any(name.endswith("lora_B.bias") for name in read_safetensors_header(adapter / "adapter_model.safetensors").tensors)
    problems = check(zoo, adapter)
    assert [(p.rule, p.field) for p in problems] == [("lora-bias", "lora_bias")]
    assert "vLLM ignores" in problems[0].message and "retrain with lora_bias=False" in problems[0].message


def test_lora_bias_tensors_are_refused_even_when_the_config_hides_them(zoo, tmp_path):
    adapter = zoo.copy("lora-bias", tmp_path / "hidden")
    edit_config(adapter, lora_bias=False)
    assert [(p.rule, p.field) for p in check(zoo, adapter)] == [("lora-bias", "lora_bias")]


def test_bias_all_is_refused(zoo):
    assert [(p.rule, p.field) for p in check(zoo, zoo.adapter("bias-all"))] == [("lora-bias", "bias")]


@pytest.mark.parametrize(
    "kind, field",
    [
        ("layer-replication", "layer_replication"),
        ("alora", "alora_invocation_tokens"),
        ("target-parameters", "target_parameters"),
    ],
)
def test_real_peft_variants_vllm_drops_are_refused(zoo, kind, field):
    problems = check(zoo, zoo.adapter(kind))
    assert [(p.rule, p.field) for p in problems] == [("lora-variant", field)]
    assert "vLLM does not implement" in problems[0].message and f"without {field}" in problems[0].message


@pytest.mark.parametrize(
    "field, value",
    [
        ("use_qalora", True),
        ("use_bdlora", {"target_modules_bd_a": ["q_proj"], "nblocks": 2}),
        ("velora_config", {"num_groups": 2}),
        ("monteclora_config", {"num_groups": 2}),
        ("arrow_config", {"top_k": 2}),
        ("kasa_config", {"beta": 0.1}),
    ],
)
def test_variants_written_as_peft_saves_them_are_refused(zoo, tmp_path, field, value):
    adapter = zoo.copy("good", tmp_path / field)
    edit_config(adapter, **{field: value})
    assert [(p.rule, p.field) for p in check(zoo, adapter)] == [("lora-variant", field)]


def test_options_at_their_defaults_are_not_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "defaults")
    edit_config(adapter, use_qalora=False, layer_replication=None, target_parameters=None, alora_invocation_tokens=None)
    assert check(zoo, adapter) == []


def test_a_real_pissa_adapter_is_refused(zoo):
    problems = check(zoo, zoo.adapter("pissa"))
    assert [(p.rule, p.field) for p in problems] == [("base-altering-init", "init_lora_weights")]
    assert "path_initial_model_for_weight_conversion" in problems[0].message


@pytest.mark.parametrize("init", ["olora", "corda", "loftq", "lora_ga", "pissa_niter_4"])
def test_other_base_altering_inits_are_refused(zoo, tmp_path, init):
    adapter = zoo.copy("good", tmp_path / init)
    edit_config(adapter, init_lora_weights=init)
    assert [(p.rule, p.field) for p in check(zoo, adapter)] == [("base-altering-init", "init_lora_weights")]


def test_options_vllm_serves_exactly_pass(zoo):
    # layers_to_transform/layers_pattern/exclude_modules only decide which tensors exist (vLLM reads the
    # tensors); lora_dropout and gaussian init act in training; use_rslora is read by PEFTHelper.
    # fan_in_fan_out (GPT-2's Conv1D) is the gpt2 adapter's, checked in test_gate_adapter_checks.py.
    for kind in ("layers-to-transform", "served-options", "rslora"):
        assert check(zoo, zoo.adapter(kind)) == [], kind
