"""One case per kind of bad input: the message names the adapter and the field, and nothing is
synthesized, packaged, uploaded or locked: not by synth, `cdk-adapters package` or `cdk-adapters publish`."""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import boto3
import pytest
import torch
from moto import mock_aws

from cdk_adapters.cli import main
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.gate import BaseModelFacts
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.manifest import add_manifest_adapters, endpoint_props, load_manifest, plan_manifest
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import ADAPTER_BUCKET, write_manifest
from tests.support import tiny_models as tm

COMPUTE = ComputeRequirements(min_memory_required_in_mb=16384)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32


def _zoo(kind: str) -> Callable:
    return lambda zoo, tmp: zoo.adapter(kind)


def _without_weights(zoo, tmp):
    adapter = zoo.copy("good", tmp / "no-weights")
    (adapter / "adapter_model.safetensors").unlink()
    return adapter


def _without_lora_tensors(zoo, tmp):
    from safetensors.torch import save_file

    adapter = zoo.copy("good", tmp / "no-lora")
    save_file({"base_model.model.model.norm.weight": torch.ones(64)}, adapter / "adapter_model.safetensors")
    return adapter


def _merged_beside(zoo, tmp):
    adapter = zoo.copy("good", tmp / "merged")
    shutil.copy(zoo.base_dir / "model.safetensors", adapter / "model.safetensors")
    return adapter


def _nested(zoo, tmp):
    shutil.copytree(zoo.adapter("good"), tmp / "run" / "checkpoint-500")
    return tmp / "run"


@dataclass(frozen=True)
class Bad:
    make: Callable
    field: str
    says: str
    name: str = "tenant-v1"
    base: str = "llama"
    fleet_only: bool = False
    """Only wrong next to a co-hosted peer (synth); alone, package/publish accept it."""
    name_only: bool = False
    """Only the name is wrong: `package` (which takes no name) accepts it."""


CASES = {
    "rank-over-limit": Bad(_zoo("rank-32"), "r", "rank 32 exceeds max_lora_rank 16"),
    "rank-pattern-over-limit": Bad(_zoo("rank-pattern-32"), "rank_pattern", "rank 32 exceeds max_lora_rank 16"),
    "rank-pattern-rescales": Bad(_zoo("rank-pattern-rescaled"), "rank_pattern", "vLLM ignores rank_pattern and alpha_pattern"),
    "dora": Bad(_zoo("dora"), "use_dora", "vLLM cannot serve DoRA adapters"),
    "modules-to-save": Bad(_zoo("modules-to-save"), "modules_to_save", "vLLM cannot serve adapters with modules_to_save"),
    "embedding-lm-head": Bad(_zoo("embedding"), "target_modules", "vLLM cannot serve LoRA on embedding or output layers"),
    "vision-tower": Bad(_zoo("vision"), "target_modules", "vision tower/connector modules", base="vlm"),
    "module-missing-from-base": Bad(_zoo("gpt2"), "target_modules", "c_attn not found in"),
    "other-base": Bad(_zoo("other-base"), "base_model_name_or_path", "but the pinned base is"),
    "other-revision": Bad(_zoo("other-revision"), "revision", "pinned base revision is"),
    "weights-missing": Bad(_without_weights, "adapter_model.safetensors", "adapter_model.safetensors is missing"),
    "weights-pickled": Bad(
        lambda zoo, tmp: tm.resave_adapter_as_pickle(zoo.copy("good", tmp / "pickled")),
        "adapter_model.safetensors",
        "pickle format",
    ),
    "no-lora-tensors": Bad(_without_lora_tensors, "adapter_model.safetensors", "holds no LoRA tensors"),
    "shape-mismatch-gqa": Bad(_zoo("gqa"), "adapter_model.safetensors", "but the base's k_proj is 64x64"),
    "merged-model-beside": Bad(_merged_beside, "source", "full-model weights found beside the adapter"),
    "nested-directory": Bad(_nested, "source", "nests the adapter under 'checkpoint-500/'"),
    "target-modules-differ": Bad(_zoo("mlp"), "target_modules", "retrain with the same target_modules", fleet_only=True),
    "name-pattern": Bad(_zoo("good-2"), "name", "must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", name="tenant_one-v1", name_only=True),
    "name-too-long": Bad(
        _zoo("good-2"), "name", "at most 39 fit", name="a-very-long-adapter-name-for-one-tenant-v1", name_only=True
    ),
    "name-without-version": Bad(_zoo("good-2"), "name", "must end with a version suffix -v<N>", name="tenant", name_only=True),
    "name-duplicate": Bad(_zoo("good-2"), "name", "is listed 2 times", name="peer-v1", fleet_only=True),
}


def _manifest(zoo, directory: Path, case: Bad, source: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if case.base == "vlm":
        facts = BaseModelFacts.from_model_dir(zoo.vlm_dir)
        base = {
            "id": tm.TINY_VLM_MODEL_ID,
            "module_names": sorted(facts.module_names),
            "vision_language": True,
            "architecture": facts.architecture,
            "vision_feature_select_strategy": facts.vision_feature_select_strategy,
        }
        peer = zoo.adapter("vision-text-only")
    else:
        # The shapes `cdk-adapters base-facts` prints, so the exact (GQA-aware) shape check runs at synth.
        shapes = {leaf: [list(shape) for shape in sorted(zoo.base_facts.shapes_of(leaf))] for leaf in zoo.base_facts.module_names}
        base, peer = {"module_shapes": shapes}, zoo.adapter("good")
    rows = [{"name": "peer-v1", "source": str(peer)}, {"name": case.name, "source": str(source)}]
    return write_manifest(directory, rows, base=base, serving={"max_lora_rank": 16})


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture
def s3(monkeypatch):
    for variable, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(variable, value)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=ADAPTER_BUCKET)
        yield client


@pytest.mark.parametrize("kind", list(CASES))
def test_bad_input_is_named_and_stops_synth_package_and_publish(kind, zoo, tmp_path, s3):
    case = CASES[kind]
    source = case.make(zoo, tmp_path)
    manifest = _manifest(zoo, tmp_path / "manifest", case, source)
    expected = f"adapter '{case.name}': {case.field}: "

    # synth: the gate raises before the first construct; nothing is packaged or synthesized.
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(app, "Bad-Input")
    packages = tmp_path / "packages"
    with pytest.raises(ConfigurationError) as caught:
        plan = plan_manifest(load_manifest(manifest))
        endpoint = MultiAdapterEndpoint(
            stack, "Serving", **endpoint_props(stack, plan), image=ContainerImage.from_digest_uri(IMAGE), compute=COMPUTE
        )
        add_manifest_adapters(endpoint, plan, package_dir=packages)
    assert any(str(p).startswith(expected) and case.says in p.message for p in caught.value.problems), caught.value.problems
    assert stack.node.children == [] and not packages.exists()
    # Nothing anywhere in the app. (Synthesizing the empty stack to show it would write a template
    # CloudFormation refuses: "Resources section must exist", the warning this used to print.)
    assert [construct.node.path for construct in app.node.find_all()] == ["", "Bad-Input"]

    if case.fleet_only:
        return
    # cdk-adapters package: exit 1, the message on stderr, no archive.
    archive = tmp_path / "out" / "adapter.tar.gz"
    if not case.name_only:
        status, out, err = _cli("package", str(source), "-o", str(archive), "--manifest", str(manifest))
        assert status == 1 and out == ""
        assert f": {case.field}: " in err and case.says in err and "nothing was packaged" in err, err
        assert not archive.parent.exists()

    # cdk-adapters publish: exit 1, the message on stderr, nothing uploaded, no lock written.
    status, out, err = _cli(
        "publish", str(source), "--name", case.name, "--bucket", ADAPTER_BUCKET, "--manifest", str(manifest), "--no-progress"
    )
    assert status == 1 and out == ""
    assert expected in err and case.says in err and "nothing was packaged or uploaded" in err, err
    assert s3.list_objects_v2(Bucket=ADAPTER_BUCKET).get("KeyCount") == 0
    assert not manifest.with_name("adapters.lock.json").exists()
