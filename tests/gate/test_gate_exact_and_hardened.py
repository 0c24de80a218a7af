"""Checks that a hand-edited or unusual adapter cannot slip past, and exact shapes for GQA/MLP layers."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cdk_adapters.gate import AdapterContents, AdapterFacts, BaseModelFacts, Reference, check_adapter_dir
from cdk_adapters.problems import Problem
from tests.support import tiny_models as tm


def check(zoo, path: Path, *, max_lora_rank: int = 16, base=None) -> list[Problem]:
    return check_adapter_dir("tenant-v1", path, Reference(base or zoo.base_facts, max_lora_rank))


def edit_config(path: Path, **changes) -> None:
    config_file = path / "adapter_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), **changes}))


def facts_of(path: Path) -> AdapterFacts:
    return AdapterFacts.from_contents(AdapterContents.from_dir(path))


def gqa_facts(zoo) -> BaseModelFacts:
    return BaseModelFacts.from_model_dir(zoo.gqa_base_dir, model_id=tm.TINY_BASE_MODEL_ID, revision=tm.TINY_BASE_REVISION)


# --------------------------------------------------------------------------- exact layer shapes


def test_base_facts_carry_each_modules_shape_including_gqa(zoo):
    assert zoo.base_facts.shapes_of("k_proj") == {(64, 64)}
    assert zoo.base_facts.shapes_of("down_proj") == {(64, 128)}  # MLP: out hidden, in intermediate
    assert zoo.base_facts.shapes_of("up_proj") == {(128, 64)}
    gqa = gqa_facts(zoo)
    assert gqa.hidden_size == 64 and gqa.shapes_of("k_proj") == gqa.shapes_of("v_proj") == {(32, 64)}
    assert gqa.shapes_of("q_proj") == {(64, 64)}


def test_gqa_adapter_fits_its_own_base(zoo):
    assert check(zoo, zoo.adapter("gqa"), base=gqa_facts(zoo)) == []


def test_gqa_adapter_on_a_full_attention_base_is_refused_naming_the_layer(zoo):
    problems = check(zoo, zoo.adapter("gqa"))
    assert [(p.subject, p.field) for p in problems] == [("adapter 'tenant-v1'", "adapter_model.safetensors")]
    message = problems[0].message
    assert "model.layers.*.self_attn.k_proj: A [8, 64], B [32, 8] adapt a 32x64 layer but the base's k_proj is 64x64" in message
    assert "model.layers.*.self_attn.v_proj" in message
    assert "retrain on the pinned base" in message
    # The hidden-size-only fallback cannot see this: k_proj still reads the hidden size.
    assert check(zoo, zoo.adapter("gqa"), base=replace(zoo.base_facts, module_shapes=None)) == []


def test_full_attention_adapter_on_a_gqa_base_is_refused(zoo):
    problems = check(zoo, zoo.adapter("good"), base=gqa_facts(zoo))
    assert [p.field for p in problems] == ["adapter_model.safetensors"]
    assert "adapt a 64x64 layer but the base's k_proj is 32x64" in problems[0].message


def test_mlp_width_is_checked_against_intermediate_size(zoo):
    wider_mlp = {
        (
            leaf,
            256 if (leaf, out) == ("up_proj", 128) or (leaf, out) == ("gate_proj", 128) else out,
            256 if leaf == "down_proj" else in_,
        )
        for leaf, out, in_ in zoo.base_facts.module_shapes
    }
    base = replace(zoo.base_facts, module_shapes=frozenset(wider_mlp))
    problems = check(zoo, zoo.adapter("mlp"), base=base)
    assert [p.field for p in problems] == ["adapter_model.safetensors"]
    assert (
        "model.layers.*.mlp.down_proj: A [8, 128], B [64, 8] adapt a 64x128 layer but the base's down_proj is 64x256"
        in problems[0].message
    )
    assert check(zoo, zoo.adapter("mlp")) == []


def test_hidden_size_fallback_without_shapes(zoo):
    wider = replace(zoo.base_facts, hidden_size=128, module_shapes=None)
    problems = check(zoo, zoo.adapter("good"), base=wider)
    assert [p.field for p in problems] == ["adapter_model.safetensors"]
    assert "neither side is the hidden size 128" in problems[0].message


# --------------------------------------------------------------------------- rank_pattern / alpha_pattern


def test_rank_pattern_that_changes_the_scale_is_refused(zoo):
    # r 8, alpha 16, q_proj rank 32: PEFT scales q_proj by 16/32, vLLM by 16/8.
    problems = check(zoo, zoo.adapter("rank-pattern-rescaled"), max_lora_rank=32)
    assert [(p.subject, p.field) for p in problems] == [("adapter 'tenant-v1'", "rank_pattern")]
    message = problems[0].message
    assert "vLLM ignores rank_pattern and alpha_pattern and scales every module by lora_alpha / r = 2" in message
    assert "model.layers.*.self_attn.q_proj: alpha 16 / rank 32 = 0.5" in message
    assert "set alpha_pattern so that alpha / rank equals lora_alpha / r" in message


def test_rank_pattern_with_a_matching_alpha_pattern_is_served(zoo):
    assert check(zoo, zoo.adapter("rank-pattern-32"), max_lora_rank=32) == []
    assert facts_of(zoo.adapter("rank-pattern-32")).max_rank == 32


def test_rank_counts_the_tensors_not_the_pattern_keys(zoo, tmp_path):
    # A rank_pattern key edited so that it matches nothing cannot hide a rank-32 tensor.
    adapter = zoo.copy("rank-pattern-32", tmp_path / "a")
    edit_config(adapter, rank_pattern={"no_such_module": 32}, alpha_pattern={})
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["rank_pattern", "r"]
    assert "rank 32 exceeds max_lora_rank 16" in problems[0].message
    assert "model.layers.*.self_attn.q_proj: A [32, 64], B [64, 32], config rank 8" in problems[1].message


def test_malformed_patterns_are_reported_not_crashed_on(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, rank_pattern={"q_proj[": 16}, alpha_pattern=["q_proj", 32])
    problems = check(zoo, adapter)
    fields = {(p.field, p.message.split(";")[0]) for p in problems}
    assert (
        "rank_pattern",
        "key 'q_proj[' is not a valid regular expression (unterminated character set at position 6)",
    ) in fields
    assert ("alpha_pattern", "must map module-name patterns to a alpha (got ['q_proj', 32])") in fields


def test_malformed_target_modules_are_reported(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, target_modules=[1, 2])
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["target_modules"]
    assert "must be a list of module names or one regular expression (got [1, 2])" in problems[0].message


# --------------------------------------------------------------------------- targets from the tensors


def test_all_linear_targets_are_read_from_the_tensors(zoo):
    facts = facts_of(zoo.adapter("all-linear"))
    assert facts.target_modules == ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")
    assert check(zoo, zoo.adapter("all-linear")) == []


def test_regex_target_modules_are_read_from_the_tensors(zoo):
    assert (
        json.loads((zoo.adapter("regex-targets") / "adapter_config.json").read_text())["target_modules"] == r".*\.(q_proj|v_proj)"
    )
    assert facts_of(zoo.adapter("regex-targets")).target_modules == ("q_proj", "v_proj")
    assert check(zoo, zoo.adapter("regex-targets")) == []


def test_a_regex_is_not_mistaken_for_a_module_name_when_weights_are_missing(zoo, tmp_path):
    adapter = zoo.copy("regex-targets", tmp_path / "a")
    (adapter / "adapter_model.safetensors").unlink()
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["adapter_model.safetensors"]
    assert "is missing" in problems[0].message


def test_dora_hidden_by_a_config_edit_is_still_refused(zoo, tmp_path):
    adapter = zoo.copy("dora", tmp_path / "a")
    edit_config(adapter, use_dora=False)
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["use_dora"]
    assert "vLLM cannot serve DoRA adapters" in problems[0].message


def test_modules_to_save_as_a_bare_string(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, modules_to_save="lm_head")
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["modules_to_save"]
    assert "modules_to_save (lm_head)" in problems[0].message


def test_fields_vllm_requires_must_be_present(zoo, tmp_path):
    # vLLM's PEFTHelper.from_dict refuses a config without r, lora_alpha or target_modules (a 500 at registration).
    adapter = zoo.copy("good", tmp_path / "a")
    config = json.loads((adapter / "adapter_config.json").read_text())
    del config["lora_alpha"], config["target_modules"]
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    problems = check(zoo, adapter)
    assert [p.field for p in problems] == ["lora_alpha", "target_modules"]
    assert "must be a positive number (got None); vLLM requires it" in problems[0].message
    assert "set the lora_alpha the adapter was trained with" in problems[0].message
    assert "is missing; vLLM requires it" in problems[1].message
