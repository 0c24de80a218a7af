"""One test per kind of bad adapter, on real PEFT output; each asserts the adapter, field and advice."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from cdk_adapters.gate import ADAPTER_CHECKS, BaseModelFacts, Reference, check_adapter_dir
from cdk_adapters.problems import Problem
from tests.support import tiny_models as tm


def check(zoo, path: Path, *, name: str = "tenant-v1", max_lora_rank: int = 16, base=None, **options) -> list[Problem]:
    return check_adapter_dir(name, path, Reference(base or zoo.base_facts, max_lora_rank, **options))


def only(problems: list[Problem], field: str) -> Problem:
    matching = [p for p in problems if p.field == field]
    assert len(matching) == 1, problems
    return matching[0]


def edit_config(path: Path, **changes) -> None:
    config_file = path / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config.update(changes)
    config_file.write_text(json.dumps(config))


def test_good_adapters_pass_every_check(zoo):
    for kind in ("good", "good-2", "q-v-only", "mlp"):
        assert check(zoo, zoo.adapter(kind)) == [], kind


def test_base_facts_come_from_the_model_directory(zoo):
    facts = zoo.base_facts
    assert facts.hidden_size == 64
    assert facts.module_names == frozenset(
        {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens", "lm_head"}
    )
    assert facts.vision_language is False
    assert (facts.model_id, facts.revision) == (tm.TINY_BASE_MODEL_ID, tm.TINY_BASE_REVISION)


def test_base_facts_read_a_sharded_checkpoint(zoo, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(zoo.base_dir)
    model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    sharded = BaseModelFacts.from_model_dir(tmp_path)
    assert sharded.module_names == zoo.base_facts.module_names
    assert sharded.hidden_size == 64


def test_base_facts_of_a_vision_language_model(zoo):
    facts = BaseModelFacts.from_model_dir(zoo.vlm_dir)
    assert facts.vision_language is True
    assert facts.hidden_size == 64  # the language model's, from text_config
    assert {"q_proj", "linear_1", "fc1"} <= facts.module_names


def test_rank_above_max_lora_rank(zoo):
    problem = only(check(zoo, zoo.adapter("rank-32")), "r")
    assert problem.subject == "adapter 'tenant-v1'"
    assert "rank 32 exceeds max_lora_rank 16" in problem.message
    assert "retrain with rank <= 16 or raise max_lora_rank" in problem.message
    assert check(zoo, zoo.adapter("rank-32"), max_lora_rank=32) == []


def test_one_rank_over_the_limit_is_refused_and_the_limit_itself_passes(zoo, tmp_path):
    """The boundary: a real rank-17 adapter against max_lora_rank 16, and a rank-16 one."""
    over = tm.build_lora_adapter(zoo.base_dir, tmp_path / "r17", seed=7, rank=17, alpha=34)
    problem = only(check(zoo, over), "r")
    assert "rank 17 exceeds max_lora_rank 16" in problem.message
    exact = tm.build_lora_adapter(zoo.base_dir, tmp_path / "r16", seed=7, rank=16, alpha=32)
    assert check(zoo, exact) == []


def test_rank_pattern_is_honoured(zoo):
    # r is 8, but rank_pattern gives q_proj rank 32: vLLM would need max_lora_rank >= 32.
    problem = only(check(zoo, zoo.adapter("rank-pattern-32")), "rank_pattern")
    assert "rank 32 exceeds max_lora_rank 16" in problem.message
    assert check(zoo, zoo.adapter("rank-pattern-32"), max_lora_rank=32) == []


def test_dora_is_refused_with_what_to_do(zoo):
    problem = only(check(zoo, zoo.adapter("dora")), "use_dora")
    assert problem.message == (
        "vLLM cannot serve DoRA adapters (use_dora=true); retrain without DoRA or merge it into the base model"
    )


def test_modules_to_save_is_refused(zoo):
    problems = check(zoo, zoo.adapter("modules-to-save"))
    problem = only(problems, "modules_to_save")
    assert "vLLM cannot serve adapters with modules_to_save (lm_head)" in problem.message
    assert "retrain with modules_to_save=None" in problem.message
    # The saved full lm_head is explained by modules_to_save, not reported again as a merged model.
    assert [p.field for p in problems] == ["modules_to_save"]


def test_embedding_and_lm_head_targets_are_refused(zoo):
    problem = only(check(zoo, zoo.adapter("embedding")), "target_modules")
    assert "vLLM cannot serve LoRA on embedding or output layers (embed_tokens, lm_head)" in problem.message


def test_trainable_tokens_are_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, trainable_token_indices=[5, 6])
    assert "trainable_token_indices" in only(check(zoo, adapter), "trainable_token_indices").message


def test_trained_bias_is_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, bias="lora_only")
    assert "retrain with bias='none'" in only(check(zoo, adapter), "bias").message


def test_vision_modules_refused_unless_enabled(zoo):
    vlm = BaseModelFacts.from_model_dir(zoo.vlm_dir, model_id=tm.TINY_VLM_MODEL_ID, revision=tm.TINY_BASE_REVISION)
    problem = only(check(zoo, zoo.adapter("vision"), base=vlm), "target_modules")
    assert "vision tower/connector modules" in problem.message
    assert "model.multi_modal_projector.linear_1" in problem.message
    assert "model.vision_tower.vision_model.encoder.layers.*.self_attn.q_proj" in problem.message
    assert "allow_vision_modules: true" in problem.message
    assert check(zoo, zoo.adapter("vision"), base=vlm, allow_vision_modules=True) == []
    assert check(zoo, zoo.adapter("vision-text-only"), base=vlm) == []


def test_every_target_missing_from_the_base(zoo):
    problems = check(zoo, zoo.adapter("gpt2"))
    problem = only(problems, "target_modules")
    assert "c_attn not found in cdk-adapters-tests/tiny-llama" in problem.message
    assert "trained for a different architecture" in problem.message


def test_one_target_the_base_lacks_is_refused_even_when_the_others_exist(zoo):
    """The rule fires on any missing target, not only when every target is foreign: the zoo's good
    adapter (q_proj, k_proj, v_proj, o_proj) against a base without v_proj."""
    good = json.loads((zoo.adapter("good") / "adapter_config.json").read_text())["target_modules"]
    assert {"q_proj", "v_proj"} <= set(good)
    base = replace(zoo.base_facts, module_names=zoo.base_facts.module_names - {"v_proj"})
    problem = only(check(zoo, zoo.adapter("good"), base=base), "target_modules")
    assert problem.message.startswith("v_proj not found in cdk-adapters-tests/tiny-llama")
    assert problem.rule == "target-modules-in-base"


def test_other_base_model(zoo):
    problem = only(check(zoo, zoo.adapter("other-base")), "base_model_name_or_path")
    assert "trained on 'someone-else/other-model' but the pinned base is 'cdk-adapters-tests/tiny-llama'" in problem.message


def test_local_path_recorded_as_base_says_so(zoo):
    problem = only(check(zoo, zoo.adapter("local-path-base")), "base_model_name_or_path")
    assert "PEFT recorded the local path it loaded from" in problem.message
    assert "set base_model_name_or_path to 'cdk-adapters-tests/tiny-llama'" in problem.message


def test_other_revision(zoo):
    problem = only(check(zoo, zoo.adapter("other-revision")), "revision")
    assert "revision 'ffffffffffffffffffffffffffffffffffffffff'" in problem.message
    assert "pinned base revision is '0000000000000000000000000000000000000001'" in problem.message


def test_unrecorded_revision_is_accepted_and_unpinned_base_skips_identity(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, revision=None)
    assert check(zoo, adapter) == []
    unpinned = replace(zoo.base_facts, model_id=None, revision=None)
    assert check(zoo, zoo.adapter("other-base"), base=unpinned) == []


def test_missing_config(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    (adapter / "adapter_config.json").unlink()
    problem = only(check(zoo, adapter), "adapter_config.json")
    assert "adapter_config.json is missing" in problem.message


def test_config_not_json(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    (adapter / "adapter_config.json").write_text("{not json")
    assert "is not valid JSON" in only(check(zoo, adapter), "adapter_config.json").message


def test_not_a_lora_adapter(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, peft_type="IA3")
    assert "vLLM serves only LoRA adapters" in only(check(zoo, adapter), "peft_type").message


def test_weights_missing(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    (adapter / "adapter_model.safetensors").unlink()
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "the weights file adapter_model.safetensors is missing" in problem.message


def test_weights_pickled_not_safetensors(zoo, tmp_path):
    adapter = tm.resave_adapter_as_pickle(zoo.copy("good", tmp_path / "a"))
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "pickle format (adapter_model.bin)" in problem.message
    assert "safe_serialization=True" in problem.message


def test_weights_file_is_not_safetensors(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    (adapter / "adapter_model.safetensors").write_bytes(b"PK\x03\x04 this is a zip, not safetensors")
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "is not a valid safetensors file" in problem.message


def test_weights_without_lora_tensors(zoo, tmp_path):
    from safetensors.torch import save_file

    adapter = zoo.copy("good", tmp_path / "a")
    save_file({"base_model.model.model.norm.weight": torch.ones(64)}, adapter / "adapter_model.safetensors")
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "holds no LoRA tensors" in problem.message


def test_config_rank_disagrees_with_tensor_shapes(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    edit_config(adapter, r=4)
    problem = only(check(zoo, adapter), "r")
    assert "tensor shapes disagree with the rank in adapter_config.json" in problem.message
    assert "model.layers.*.self_attn.k_proj: A [8, 64], B [64, 8], config rank 4" in problem.message


def test_full_model_weights_in_the_folder(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    (adapter / "model.safetensors").write_bytes((zoo.base_dir / "model.safetensors").read_bytes())
    problem = only(check(zoo, adapter), "source")
    assert "full-model weights found beside the adapter (model.safetensors)" in problem.message


def test_merged_tensor_inside_the_adapter(zoo, tmp_path):
    adapter = tm.add_tensors_to_adapter(
        zoo.copy("good", tmp_path / "a"),
        {"base_model.model.model.layers.0.mlp.down_proj.weight": torch.zeros(64, 128)},
    )
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "holds 1 full-size non-LoRA tensor(s) (base_model.model.model.layers.0.mlp.down_proj.weight)" in problem.message


def test_bytes_after_the_declared_tensors(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "a")
    with open(adapter / "adapter_model.safetensors", "ab") as stream:
        stream.write(b"\0" * 4096)
    problem = only(check(zoo, adapter), "adapter_model.safetensors")
    assert "has 4096 bytes after the tensors its header declares" in problem.message


def test_adapter_config_in_a_subdirectory(zoo, tmp_path):
    import shutil

    shutil.copytree(zoo.adapter("good"), tmp_path / "run" / "checkpoint-500")
    problems = check(zoo, tmp_path / "run")
    problem = only(problems, "source")
    assert "nests the adapter under 'checkpoint-500/'" in problem.message
    assert "point the source at checkpoint-500/ instead" in problem.message


def test_every_problem_is_reported_at_once(zoo, tmp_path):
    adapter = zoo.copy("dora", tmp_path / "a")
    edit_config(adapter, r=64, lora_alpha=128, base_model_name_or_path="other/model", modules_to_save=["score"])
    fields = [p.field for p in check(zoo, adapter)]
    assert {"r", "use_dora", "modules_to_save", "base_model_name_or_path"} <= set(fields)
    assert all(p.subject == "adapter 'tenant-v1'" for p in check(zoo, adapter))


def test_checks_have_unique_ids_and_descriptions():
    ids = [c.id for c in ADAPTER_CHECKS]
    assert len(ids) == len(set(ids)) and all(c.description for c in ADAPTER_CHECKS)


def test_the_gate_imports_without_cdk_pydantic_or_torch(tmp_path):
    import subprocess

    probe = (
        "import sys, cdk_adapters.gate as c; "
        "heavy = [m for m in ('aws_cdk', 'pydantic', 'torch', 'yaml', 'boto3') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stdout + result.stderr
