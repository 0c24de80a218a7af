"""`add_adapter` with a local archive runs the compatibility gate at synth: the rules, messages and
rule ids of `cdk-adapters validate` and the manifest, against the endpoint's serving limits and,
when it has them, the base model's facts. Real PEFT archives throughout."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cdk_adapters import BaseModelIdentity
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.cli import main as cli_main
from cdk_adapters.gate import check_adapter_archive
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.support.tiny_models import TINY_BASE_MODEL_ID


def archive_of(zoo, kind: str, directory: Path) -> Path:
    return package_adapter(zoo.adapter(kind), directory / f"{kind}.tar.gz").path


def nested_archive(zoo, directory: Path) -> Path:
    """The good adapter's files under ``adapter/``: what ``tar czf x.tar.gz adapter/`` gives."""
    path = directory / "nested.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for file in sorted(zoo.adapter("good").iterdir()):
            data = file.read_bytes()
            info = tarfile.TarInfo(f"adapter/{file.name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def refusal(endpoint, name: str, archive: Path) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_archive(archive))
    assert name not in endpoint.adapters, "a refused adapter adds nothing"
    return caught.value


@pytest.mark.parametrize(
    ("kind", "field", "rule"),
    [("dora", "use_dora", "dora"), ("rank-64", "r", "rank-limit"), ("nested", "source", "archive-layout")],
)
def test_a_bad_archive_is_refused_naming_adapter_field_and_rule(zoo, tmp_path, kind, field, rule):
    archive = nested_archive(zoo, tmp_path) if kind == "nested" else archive_of(zoo, kind, tmp_path)
    endpoint = build_endpoint(vllm=VllmOptions(max_lora_rank=16))
    error = refusal(endpoint, "support-v1", archive)
    assert [(p.subject, p.field, p.rule) for p in error.problems] == [("adapter 'support-v1'", field, rule)]
    assert f"adapter 'support-v1': {field}: " in str(error) and f"[{rule}]" in str(error)
    assert "MultiAdapterEndpoint 'Test-Stack/Serving'" in str(error)
    # The same gate as everywhere else: exactly what check_adapter_archive says.
    assert list(error.problems) == check_adapter_archive("support-v1", archive, endpoint.compatibility_reference)


def test_rank_64_names_the_endpoint_limit(zoo, tmp_path):
    error = refusal(build_endpoint(vllm=VllmOptions(max_lora_rank=16)), "support-v1", archive_of(zoo, "rank-64", tmp_path))
    assert "rank 64 exceeds max_lora_rank 16" in str(error)
    raised = build_endpoint(vllm=VllmOptions(max_lora_rank=64))
    raised.add_adapter("support-v1", artifact=AdapterArtifact.from_archive(archive_of(zoo, "rank-64", tmp_path)))


def test_unset_max_lora_rank_is_checked_against_vllms_default(zoo, tmp_path):
    endpoint = build_endpoint(vllm=VllmOptions(max_lora_rank=None))
    assert endpoint.compatibility_reference.max_lora_rank == 16
    assert "rank 32 exceeds max_lora_rank 16" in str(refusal(endpoint, "support-v1", archive_of(zoo, "rank-32", tmp_path)))


def test_a_good_archive_passes(zoo, tmp_path):
    endpoint = build_endpoint(base_model=BaseModelIdentity(facts=zoo.base_facts, model_id=TINY_BASE_MODEL_ID))
    endpoint.add_adapter("support-v1", artifact=AdapterArtifact.from_archive(archive_of(zoo, "good", tmp_path)))
    assert list(endpoint.adapters) == ["support-v1"]


def test_messages_equal_cdk_adapters_validate(zoo, tmp_path):
    archive = tmp_path / "support-v1.tar.gz"
    package_adapter(zoo.adapter("dora"), archive)
    out, err = io.StringIO(), io.StringIO()
    status = cli_main(
        ["validate", str(archive), "--base-model-dir", str(zoo.base_dir), "--max-lora-rank", "16"], stdout=out, stderr=err
    )
    assert status != 0
    endpoint = build_endpoint(base_model=BaseModelIdentity(facts=zoo.base_facts))
    (problem,) = refusal(endpoint, "support-v1", archive).problems
    assert str(problem) in out.getvalue() + err.getvalue()


def test_base_rules_run_when_the_endpoint_has_base_facts(zoo, tmp_path):
    """A GPT-2 adapter on the tiny Llama: its modules are not in the base. Without base facts only
    the container would notice; with them synth refuses it, by target-modules-in-base."""
    gpt2 = archive_of(zoo, "gpt2", tmp_path)
    without = build_endpoint()
    assert without.compatibility_reference.base is None
    without.add_adapter("support-v1", artifact=AdapterArtifact.from_archive(gpt2))
    rules = {
        p.rule for p in refusal(build_endpoint(base_model=BaseModelIdentity(facts=zoo.base_facts)), "support-v1", gpt2).problems
    }
    assert "target-modules-in-base" in rules


def test_base_identity_comes_from_base_model_id_when_the_facts_have_none(zoo, tmp_path):
    facts = replace(zoo.base_facts, model_id=None, revision=None)
    endpoint = build_endpoint(base_model=BaseModelIdentity(facts=facts, model_id=TINY_BASE_MODEL_ID))
    assert endpoint.compatibility_reference.base.model_id == TINY_BASE_MODEL_ID
    (problem,) = refusal(endpoint, "support-v1", archive_of(zoo, "other-base", tmp_path)).problems
    assert (problem.field, problem.rule) == ("base_model_name_or_path", "base-identity")


def test_base_facts_that_disagree_with_base_model_id_are_refused(zoo):
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(base_model=BaseModelIdentity(facts=zoo.base_facts, model_id="someone-else/other-model"))
    (problem,) = caught.value.problems
    assert (problem.subject, problem.field) == ("MultiAdapterEndpoint 'Test-Stack/Serving'", "base_model.facts.model_id")
    assert "'someone-else/other-model'" in problem.message


def test_published_archives_are_not_read_at_synth():
    endpoint = build_endpoint()
    endpoint.add_adapter("support-v1", artifact=AdapterArtifact.from_s3_url("s3://example-adapters/support-v1/adapter.tar.gz"))
    assert list(endpoint.adapters) == ["support-v1"]


def test_the_manifest_gives_the_endpoint_its_base_facts(zoo, tmp_path):
    import aws_cdk as cdk

    from cdk_adapters.manifest import plan_manifest_file
    from cdk_adapters.manifest.wiring import endpoint_props

    plan = plan_manifest_file(Path(__file__).resolve().parents[2] / "manifests" / "example.yaml")
    stack = cdk.Stack(cdk.App(), "Test-Stack")
    props = endpoint_props(stack, plan)
    assert props["base_model"].facts == plan.base
    endpoint = build_endpoint(stack, **props)
    assert endpoint.compatibility_reference == plan.reference


def test_docs_name_the_rules_that_need_base_facts():
    from cdk_adapters.gate import ADAPTER_CHECKS

    needing = {check.id for check in ADAPTER_CHECKS if check.needs_base}
    assert needing == {"target-modules-in-base", "base-identity", "vision-tower-layout", "vlm-engine-traps"}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "constructs.md").read_text()
    section = docs.split("## The compatibility gate at synth", 1)[1].split("\n## ", 1)[0]
    needs_base_text = section.split("Without `base_model.facts`", 1)[1].split("Every other rule", 1)[0]
    assert all(f"`{rule}`" in needs_base_text for rule in needing)
    assert all(f"`{rule}`" in section for rule in (check.id for check in ADAPTER_CHECKS))
