"""A vision-language manifest at synth: the base's VLM facts come from `cdk-adapters base-facts`, and the
gate rules that need them (`vlm-engine-traps`, `vision-tower-layout`) refuse at `cdk synth`, before
any endpoint exists, with real PEFT adapters on the tiny LLaVA (tests/support/tiny_vlm.py).

The synth path is the example app's (`app.build`, what ``cdk synth -c manifest=PATH`` runs) and
`endpoint_from_manifest`; neither reads the base model's weights.
"""

from __future__ import annotations

import copy
import io
import shutil
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

import app as example_app
from cdk_adapters.cli import main as cli_main
from cdk_adapters.contract import serving_env, serving_image
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.manifest import endpoint_from_manifest, load_manifest, plan_manifest_file
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import app_context
from tests.manifest.builders import write_manifest
from tests.support import tiny_vlm

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    """Two tiny LLaVA bases (strategy "full" and "default") with a language and a tower adapter each,
    and the "full" base's tower adapter re-keyed to transformers 5's layout."""
    root = tmp_path_factory.mktemp("manifest-vlm")
    made = {}
    for strategy in ("full", "default"):
        base = tiny_vlm.build_vlm(root / f"base-{strategy}", vision_feature_select_strategy=strategy)
        made[strategy] = {
            "base": base,
            "language": tiny_vlm.build_vlm_adapter(base, root / f"language-{strategy}", seed=31),
            "tower": tiny_vlm.build_vlm_adapter(base, root / f"tower-{strategy}", seed=32, target_modules=tiny_vlm.TOWER_TARGETS),
        }
    made["full"]["tower-t5"] = tiny_vlm.transformers5_layout(Path(shutil.copytree(made["full"]["tower"], root / "tower-t5")))
    return made


def printed_base_facts(base_dir: Path) -> dict:
    """What `cdk-adapters base-facts DIR` prints, read back as the YAML it is meant to be pasted as."""
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["base-facts", str(base_dir)], stdout=out, stderr=err) == 0, err.getvalue()
    return yaml.safe_load(out.getvalue())


def vlm_manifest(directory: Path, base_dir: Path, rows: dict[str, Path], *, allow_vision_modules: bool = True, **base) -> Path:
    facts = printed_base_facts(base_dir)
    base_model = {
        "id": tiny_vlm.TINY_VLM_MODEL_ID,
        "revision": tiny_vlm.TINY_VLM_REVISION,
        "artifact": "s3://example-models/base/tiny-llava/",
        **facts,
        "allow_vision_modules": allow_vision_modules,
        **base,
    }
    adapters = [{"name": name, "source": str(source)} for name, source in rows.items()]
    for row in adapters[1:]:  # a tower adapter's targets differ from a language-model adapter's, on purpose
        row["acknowledge"] = {"rule": "identical-target-modules", "reason": "describes images: LoRA on the tower too"}
    directory.mkdir(parents=True, exist_ok=True)
    return write_manifest(directory, adapters, base=base_model, serving={"max_loras": 2, "max_lora_rank": 8})


def synth_app(manifest: Path) -> cdk.Stack:
    """The example app on `manifest`, as ``cdk synth -c manifest=PATH`` builds it."""
    return example_app.build(cdk.App(context={**app_context("dev"), "manifest": str(manifest)}))


def test_base_facts_prints_the_vision_language_facts(vlm):
    facts = printed_base_facts(vlm["default"]["base"])
    assert {
        key: facts[key] for key in ("vision_language", "architecture", "vision_tower_type", "vision_feature_select_strategy")
    } == {
        "vision_language": True,
        "architecture": "LlavaForConditionalGeneration",
        "vision_tower_type": "clip_vision_model",
        "vision_feature_select_strategy": "default",
    }


def test_a_tower_adapter_on_a_llava_default_base_fails_cdk_synth_naming_adapter_field_and_vllm(vlm, tmp_path):
    made = vlm["default"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"], "describe-v1": made["tower"]})
    with pytest.raises(ConfigurationError) as refused:
        synth_app(manifest)
    problems = {(p.subject, p.field, p.rule) for p in refused.value.problems}
    # The engine dies on the first image request with tower LoRA on, whatever the adapter targets.
    assert problems == {
        (f"adapter '{name}'", "base_model.vision_feature_select_strategy", "vlm-engine-traps")
        for name in ("tables-v1", "describe-v1")
    }
    text = str(refused.value)
    assert f"crashes vLLM {serving_image.VLLM_VERSION}" in text and "'default'" in text


def test_the_same_base_without_tower_lora_synthesizes_its_language_adapter(vlm, tmp_path):
    made = vlm["default"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"]}, allow_vision_modules=False)
    stack = synth_app(manifest)
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    assert env[serving_env.ALLOW_VISION_MODULES] == "false"
    assert serving_env.VLLM_FLAG_PREFIX + "ENABLE_TOWER_CONNECTOR_LORA" not in env


def test_a_full_strategy_base_synthesizes_both_adapters_with_tower_lora_on(vlm, tmp_path):
    made = vlm["full"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"], "describe-v1": made["tower"]})
    stack = synth_app(manifest)
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    assert env[serving_env.VLLM_FLAG_PREFIX + "ENABLE_TOWER_CONNECTOR_LORA"] == "true"
    assert sorted(stack.endpoint.adapter_component_names()) == ["describe-v1", "tables-v1"]


def test_a_transformers5_tower_adapter_fails_synth_naming_the_modules(vlm, tmp_path):
    made = vlm["full"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"], "describe-v1": made["tower-t5"]})
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Vlm-Test")
    with pytest.raises(ConfigurationError) as refused:
        endpoint_from_manifest(
            stack,
            "Vlm",
            manifest=manifest,
            image=ContainerImage.from_digest_uri(IMAGE),
            compute=ComputeRequirements(min_memory_required_in_mb=16384),
            placement=FleetPlacement.in_endpoint_stack(),
        )
    [problem] = refused.value.problems
    assert (problem.subject, problem.rule) == ("adapter 'describe-v1'", "vision-tower-layout")
    assert "model.vision_tower.encoder.layers.*.mlp.fc1" in problem.message and serving_image.VLLM_VERSION in problem.message
    assert stack.node.children == []  # nothing was added


def test_a_vlm_manifest_without_its_facts_is_refused_naming_each(vlm, tmp_path):
    """Without them the rules above would have nothing to compare with at synth."""
    made = vlm["default"]
    manifest = vlm_manifest(tmp_path, made["base"], {"describe-v1": made["tower"]})
    document = yaml.safe_load(manifest.read_text())
    for key in ("architecture", "vision_tower_type", "vision_feature_select_strategy"):
        del document["base_model"][key]
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(ConfigurationError) as refused:
        load_manifest(manifest)
    fields = {problem.field: problem.message for problem in refused.value.problems}
    assert sorted(fields) == ["base_model.architecture", "base_model.vision_tower_type"]
    assert "required with vision_language: true" in fields["base_model.architecture"]
    assert "required with allow_vision_modules: true" in fields["base_model.vision_tower_type"]
    assert all("cdk-adapters base-facts DIR" in message for message in fields.values())


@pytest.mark.parametrize(
    ("base", "field", "text"),
    [
        (
            {"vision_feature_select_strategy": None},
            "base_model.vision_feature_select_strategy",
            "required for a LlavaForConditionalGeneration base",
        ),
        ({"vision_feature_select_strategy": "cls"}, "base_model.vision_feature_select_strategy", "must be 'default' or 'full'"),
        (
            {"vision_language": False, "allow_vision_modules": False},
            "base_model.architecture",
            "describes a vision-language base",
        ),
    ],
    ids=["strategy-missing", "strategy-unknown", "facts-on-a-text-base"],
)
def test_bad_vlm_facts_are_refused_naming_the_field(vlm, tmp_path, base, field, text):
    manifest = vlm_manifest(tmp_path, vlm["full"]["base"], {"tables-v1": vlm["full"]["language"]})
    document = yaml.safe_load(manifest.read_text())
    for key, value in base.items():
        if value is None:
            del document["base_model"][key]
        else:
            document["base_model"][key] = value
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(ConfigurationError) as refused:
        load_manifest(manifest)
    messages = {problem.field: problem.message for problem in refused.value.problems}
    assert field in messages and text in messages[field], messages


def endpoint_for(tmp_path, manifest, **props):
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Vlm-Test")
    endpoint = endpoint_from_manifest(
        stack,
        "Vlm",
        manifest=manifest,
        image=ContainerImage.from_digest_uri(IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        placement=FleetPlacement.in_endpoint_stack(),
        **props,
    )
    return stack, endpoint


def test_the_gate_judges_the_endpoints_tower_lora_setting_not_the_vision_flag(vlm, tmp_path):
    """allow_vision_modules: true with tower LoRA turned off in VllmOptions serves language-only rows
    on a LLaVA "default" base (nothing crashes without the flag); with the default it refuses them."""
    made = vlm["default"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"]})
    with pytest.raises(ConfigurationError) as refused:
        endpoint_for(tmp_path / "default", manifest)
    assert {(p.subject, p.rule) for p in refused.value.problems} == {("adapter 'tables-v1'", "vlm-engine-traps")}

    stack, endpoint = endpoint_for(tmp_path / "off", manifest, vllm=VllmOptions(enable_tower_connector_lora=False))
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    assert env[serving_env.ALLOW_VISION_MODULES] == "true"
    assert env.get(serving_env.VLLM_FLAG_PREFIX + "ENABLE_TOWER_CONNECTOR_LORA") in (None, "false")
    assert sorted(endpoint.adapter_component_names()) == ["tables-v1"]

    # A plan made for one setting is gated again for the endpoint's.
    plan = plan_manifest_file(manifest, tower_connector_lora=False)
    assert plan.reference.serves_tower_lora is False
    with pytest.raises(ConfigurationError, match=r"\[vlm-engine-traps\]"):
        endpoint_for(tmp_path / "plan", plan)

    # The example app reads the setting from its "vllm" context, as `cdk synth` does.
    context = copy.deepcopy(app_context("dev"))
    context["environments"]["dev"]["vllm"]["enable_tower_connector_lora"] = False
    stack = example_app.build(cdk.App(context={**context, "manifest": str(manifest)}))
    assert sorted(stack.endpoint.adapter_component_names()) == ["tables-v1"]


def test_with_tower_lora_off_a_tower_adapter_is_refused_for_the_flag_not_the_crash(vlm, tmp_path):
    made = vlm["default"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"], "describe-v1": made["tower"]})
    with pytest.raises(ConfigurationError) as refused:
        endpoint_for(tmp_path, manifest, vllm=VllmOptions(enable_tower_connector_lora=False))
    [problem] = refused.value.problems
    assert (problem.subject, problem.field, problem.rule) == ("adapter 'describe-v1'", "target_modules", "tower-connector-lora")
    assert "without --enable-tower-connector-lora" in problem.message and serving_image.VLLM_VERSION in problem.message


def test_tower_lora_turned_on_explicitly_on_a_full_base_serves_the_tower_adapter(vlm, tmp_path):
    made = vlm["full"]
    manifest = vlm_manifest(tmp_path, made["base"], {"tables-v1": made["language"], "describe-v1": made["tower"]})
    stack, endpoint = endpoint_for(tmp_path, manifest, vllm=VllmOptions(enable_tower_connector_lora=True))
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    assert (
        model["Properties"]["PrimaryContainer"]["Environment"][serving_env.VLLM_FLAG_PREFIX + "ENABLE_TOWER_CONNECTOR_LORA"]
        == "true"
    )
    assert sorted(endpoint.adapter_component_names()) == ["describe-v1", "tables-v1"]
