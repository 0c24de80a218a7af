"""The small pieces behind the endpoint: names, vLLM options, instance storage, image URIs, summary."""

from __future__ import annotations

import json

import pytest

from cdk_adapters.cli.synth_summary import main as summary_main
from cdk_adapters.contract import serving_env
from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_MAX_LENGTH, SAGEMAKER_NAME_PATTERN, adapter_component_name
from cdk_adapters.endpoint.names import MAX_ADAPTER_NAME_LENGTH, component_prefix, validate_adapter_name
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.instance_storage import has_local_instance_storage
from cdk_adapters.hosting.vllm_options import VllmOptions


def test_longest_allowed_adapter_name_fits_63_characters_for_any_stack():
    prefix = component_prefix("S" * 128, "S/" + "x" * 200)
    name = adapter_component_name(prefix, "a" * MAX_ADAPTER_NAME_LENGTH)
    assert len(name) == SAGEMAKER_NAME_MAX_LENGTH
    assert SAGEMAKER_NAME_PATTERN.match(name)
    assert validate_adapter_name("a" * MAX_ADAPTER_NAME_LENGTH) == []


def test_prefix_depends_on_stack_and_path_only():
    assert component_prefix("Adapters-dev", "Adapters-dev/Serving") == component_prefix("Adapters-dev", "Adapters-dev/Serving")
    assert component_prefix("Adapters-dev", "Adapters-dev/Serving") != component_prefix("Adapters-dev", "Adapters-dev/Other")
    assert component_prefix("Adapters-dev", "X") != component_prefix("Adapters-prod", "X")
    assert component_prefix("--weird__Name--", "p").startswith("weird-name-")


def test_validate_adapter_name_reports_each_rule():
    assert [p.field for p in validate_adapter_name("x" * 80 + "_")] == ["name", "name"]
    assert validate_adapter_name(None)[0].message == "must be a non-empty string"


def test_vllm_options_render_only_what_is_set():
    env = VllmOptions(max_loras=None, max_lora_rank=None).environment()
    assert env == {serving_env.RUNTIME_LORA_UPDATING: "true"}
    env = VllmOptions(quantization="awq", tensor_parallel_size=2, enforce_eager=True).environment()
    assert env["CDK_ADAPTERS_VLLM_QUANTIZATION"] == "awq"
    assert env["CDK_ADAPTERS_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    assert env["CDK_ADAPTERS_VLLM_ENFORCE_EAGER"] == "true"
    assert json.loads(VllmOptions(extra_args=("--seed", "7")).environment()[serving_env.EXTRA_ARGS]) == ["--seed", "7"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (VllmOptions(max_loras=0), "vllm.max_loras"),
        (VllmOptions(gpu_memory_utilization=1.5), "vllm.gpu_memory_utilization"),
        (VllmOptions(limit_mm_per_prompt={"image": -1}), "vllm.limit_mm_per_prompt"),
        (VllmOptions(dtype=""), "vllm.dtype"),
        (VllmOptions(extra_args="--seed 7"), "vllm.extra_args"),  # type: ignore[arg-type]
    ],
)
def test_vllm_option_problems_name_the_field(options, field):
    assert [p.field for p in options.problems("E")] == [field]


@pytest.mark.parametrize(
    ("instance_type", "local"),
    [
        ("ml.g6.2xlarge", True),
        ("ml.g5.12xlarge", True),
        ("ml.p4d.24xlarge", True),
        ("ml.m5d.large", True),
        ("ml.p3.2xlarge", False),
        ("ml.inf2.xlarge", False),
        ("ml.m5.xlarge", False),
    ],
)
def test_local_instance_storage(instance_type, local):
    assert has_local_instance_storage(instance_type) is local


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        (ContainerImage.from_digest_uri("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/vllm@sha256:" + "0" * 64), True),
        (ContainerImage.from_uri("123456789012.dkr.ecr.eu-west-1.amazonaws.com/vllm:v1@sha256:" + "0" * 64), True),
        (ContainerImage.from_uri("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/vllm:v1", allow_floating_tag=True), True),
        (ContainerImage.from_uri("123456789012.dkr.ecr.eu-west-1.amazonaws.com/vllm:latest"), False),
        (ContainerImage.from_uri("docker.io/vllm/vllm-openai:v0.31.0", allow_floating_tag=True), False),
    ],
)
def test_image_uri_rules(image, ok):
    assert (image.problems("E") == []) is ok


@pytest.mark.parametrize(("shards", "text"), [(1, "(1 nested stack)"), (2, "(2 nested stacks)")])
def test_summary_counts_nested_stacks_in_words(shards, text):
    from collections import Counter

    from cdk_adapters.cli.synth_summary import AssemblySummary, StackSummary, render

    nested = {f"S/Serving/Adapters/Shard{i}": 3 for i in range(shards)}
    rendered = render(AssemblySummary([StackSummary("S", 10, Counter(), nested=nested)], [], []))
    assert f"  adapter shards {text}: " in rendered


def test_summary_fails_without_an_assembly(tmp_path, capsys):
    assert summary_main([str(tmp_path)]) == 1
    assert "manifest.json not found" in capsys.readouterr().out


def test_summary_fails_on_unacknowledged_findings(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(
        json.dumps({"artifacts": {"S": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "S.template.json"}}}})
    )
    (tmp_path / "S.template.json").write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}))
    (tmp_path / "validation-report.json").write_text(
        json.dumps(
            {
                "pluginReports": [
                    {
                        "pluginName": "AwsSolutions",
                        "conclusion": "failure",
                        "violations": [
                            {
                                "ruleName": "AwsSolutions-S1",
                                "severity": "error",
                                "description": "logs off",
                                "violatingConstructs": [{"constructPath": "S/B/Resource"}],
                            }
                        ],
                    }
                ]
            }
        )
    )
    assert summary_main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "1 unacknowledged finding(s)" in out and "AwsSolutions-S1 at S/B/Resource" in out


def test_every_top_level_export_resolves():
    import cdk_adapters

    missing = [name for name in cdk_adapters.__all__ if getattr(cdk_adapters, name, None) is None]
    assert missing == []
    assert {"AdapterLocation", "FleetPlacement", "ScalableCopyCount", "RollingUpdate", "RequestMetrics"} <= set(
        cdk_adapters.__all__
    )
