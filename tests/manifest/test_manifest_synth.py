"""A manifest wired into a real `MultiAdapterEndpoint`, synthesized in-process."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.manifest import add_manifest_adapters, endpoint_from_manifest, endpoint_props, load_manifest, plan_manifest
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import lock_adapters, s3_uri, write_manifest

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32
IN_STACK = FleetPlacement.in_endpoint_stack()
"""Components in the endpoint's stack, so `Template.from_stack` shows them (nested: tests/fleet/)."""


def synth(manifest_path, package_dir, outdir):
    """What app.py does: gate first, then the endpoint, then one component per row."""
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Adapters-Test")
    plan = plan_manifest(load_manifest(manifest_path))
    endpoint = MultiAdapterEndpoint(
        stack,
        "Serving",
        **endpoint_props(stack, plan),
        image=ContainerImage.from_digest_uri(IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        placement=IN_STACK,
    )
    add_manifest_adapters(endpoint, plan, package_dir=package_dir)
    return endpoint, Template.from_stack(stack)


@pytest.fixture
def manifest(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v3", "source": s3_uri("triage-v3")},
            {"name": "legal-v1", "source": str(zoo.adapter("good-2"))},
        ],
        serving={"max_loras": 2, "max_cpu_loras": 4},
    )
    lock_adapters(path, {"triage-v3": zoo.adapter("good")}, tmp_path)
    return path


def adapter_components(template):
    return {
        body["Properties"]["InferenceComponentName"]: body["Properties"]["Specification"]
        for body in template.find_resources("AWS::SageMaker::InferenceComponent").values()
        if "BaseInferenceComponentName" in body["Properties"]["Specification"]
    }


def test_manifest_rows_become_adapter_components(manifest, zoo, tmp_path):
    endpoint, template = synth(manifest, tmp_path / "packages", tmp_path / "out")
    stack = cdk.Stack.of(endpoint)
    components = adapter_components(template)
    names = endpoint.adapter_component_names()
    assert list(names) == ["triage-v3", "legal-v1"]  # manifest order
    assert sorted(components) == sorted(names.values())
    by_adapter = {adapter: components[component] for adapter, component in names.items()}
    assert by_adapter["triage-v3"]["Container"]["ArtifactUrl"] == s3_uri("triage-v3")
    # The local directory became a content-addressed asset of the deterministic archive.
    expected = package_adapter(zoo.adapter("good-2"), tmp_path / "expected.tar.gz")
    packaged = list((tmp_path / "packages").glob("*.tar.gz"))
    assert [p.name for p in packaged] == [f"legal-v1-{expected.sha256[:16]}.tar.gz"]
    assert packaged[0].read_bytes() == expected.path.read_bytes()
    artifact_url = stack.resolve(by_adapter["legal-v1"]["Container"]["ArtifactUrl"])["Fn::Sub"]
    assert artifact_url.startswith("s3://cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}/")
    asset_hash = artifact_url.rsplit("/", 1)[1].removesuffix(".tar.gz")
    files = json.loads((tmp_path / "out" / "Adapters-Test.assets.json").read_text())["files"]
    staged = [entry for entry in files.values() if entry["source"]["path"].startswith(f"asset.{asset_hash}")]
    assert len(staged) == 1, files
    assert [d["objectKey"] for d in staged[0]["destinations"].values()] == [f"{asset_hash}.tar.gz"]
    assert (tmp_path / "out" / staged[0]["source"]["path"]).read_bytes() == expected.path.read_bytes()
    environment = next(iter(template.find_resources("AWS::SageMaker::Model").values()))["Properties"]
    variables = environment["PrimaryContainer"]["Environment"]
    assert variables["CDK_ADAPTERS_VLLM_MAX_LORAS"] == "2"
    assert variables["CDK_ADAPTERS_VLLM_MAX_CPU_LORAS"] == "4"
    assert variables["CDK_ADAPTERS_VLLM_MAX_LORA_RANK"] == "8"  # derived: both adapters are rank 8
    assert variables["CDK_ADAPTERS_BASE_MODEL_ID"] == "cdk-adapters-tests/tiny-llama"


def test_synth_twice_gives_the_same_template(manifest, tmp_path):
    _, first = synth(manifest, tmp_path / "p1", tmp_path / "o1")
    _, second = synth(manifest, tmp_path / "p2", tmp_path / "o2")
    assert first.to_json() == second.to_json()


def test_a_bad_manifest_synthesizes_and_packages_nothing(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v1", "source": str(zoo.adapter("good"))},
            {"name": "legal-v1", "source": str(zoo.adapter("dora"))},
        ],
    )
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Adapters-Test")
    with pytest.raises(ConfigurationError) as caught:
        plan = plan_manifest(load_manifest(path))
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack, plan), image=ContainerImage.from_digest_uri(IMAGE))
    assert [(p.subject, p.field) for p in caught.value.problems] == [("adapter 'legal-v1'", "use_dora")]
    assert stack.node.children == []
    assert Template.from_stack(stack).to_json().get("Resources", {}) == {}
    assert not (tmp_path / "packages").exists()


def test_from_manifest_builds_what_the_explicit_wiring_builds(manifest, tmp_path):
    _, explicit = synth(manifest, tmp_path / "packages", tmp_path / "out")
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out2")), "Adapters-Test")
    endpoint = endpoint_from_manifest(
        stack,
        "Serving",
        manifest=manifest,
        image=ContainerImage.from_digest_uri(IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        placement=IN_STACK,
    )
    assert sorted(endpoint.adapters) == ["legal-v1", "triage-v3"]
    assert Template.from_stack(stack).to_json() == explicit.to_json()


def test_two_manifests_make_two_endpoints_in_one_stack(manifest, zoo, tmp_path):
    other = write_manifest(tmp_path, [{"name": "billing-v1", "source": str(zoo.adapter("good"))}], name="other.yaml")
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Adapters-Test")
    common = {
        "image": ContainerImage.from_digest_uri(IMAGE),
        "compute": ComputeRequirements(min_memory_required_in_mb=16384),
        "placement": IN_STACK,
    }
    support = endpoint_from_manifest(stack, "Support", manifest=manifest, **common)
    billing = endpoint_from_manifest(stack, "Billing", manifest=other, **common)
    names = set(adapter_components(Template.from_stack(stack)))
    assert names == {
        f"{support.prefix}-triage-v3",
        f"{support.prefix}-legal-v1",
        f"{billing.prefix}-billing-v1",
    }
    assert support.prefix != billing.prefix


def test_from_manifest_with_a_bad_row_adds_nothing_to_the_stack(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [{"name": "triage-v1", "source": str(zoo.adapter("good"))}, {"name": "legal-v1", "source": str(zoo.adapter("dora"))}],
    )
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Adapters-Test")
    with pytest.raises(ConfigurationError) as caught:
        endpoint_from_manifest(stack, "Serving", manifest=path, image=ContainerImage.from_digest_uri(IMAGE))
    assert [(p.subject, p.field) for p in caught.value.problems] == [("adapter 'legal-v1'", "use_dora")]
    assert stack.node.children == []
