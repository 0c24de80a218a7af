"""Synth time of N adapters through the library, next to hand-written L1 creating the same resources.

Both candidates build a fresh app and synthesize it to a cloud assembly, interleaved in one process
so machine noise hits both alike. The L1 app writes what the library writes, by hand: the role and
its one policy, the model, the endpoint config, the endpoint, the base component, the discovery
parameter, and N adapter components spread over the same nested stacks (placed by the same hash,
each depending on the base), so the ratio is the library's own overhead. Peak memory is measured
once per candidate at the largest N, each in a fresh process (the Python side and jsii's Node
process, whose high-water marks are read from /proc before exit).

    .venv/bin/python -m benchmarks.bench_synth_scale [--sizes 10,100,1000] [--rounds 3]

Targets (issue 7): ratio <= 1.5 at 1,000 adapters, growth t(1000)/t(100) <= 11.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.model_data import ModelData

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32
LOCATION = "s3://bench-adapters/published/"
PREFIX = "bench-0123abcd"


def adapter(index: int) -> tuple[str, str]:
    name = f"tenant-{index:04d}-v1"
    return name, f"{LOCATION}{name}/adapter.tar.gz"


def library_app(count: int, outdir: str) -> None:
    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bench")
    endpoint = MultiAdapterEndpoint(
        stack,
        "Serving",
        model_data=ModelData.from_s3_prefix(s3.Bucket.from_bucket_name(stack, "Models", "bench-models"), "base/"),
        image=ContainerImage.from_digest_uri(IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        adapter_locations=[AdapterLocation.from_s3_url(LOCATION)],
        dashboard=False,  # the L1 app has no dashboard: both create the same resources
    )
    for index in range(count):
        name, url = adapter(index)
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(url))
    app.synth()


def l1_app(count: int, outdir: str) -> None:
    """The same resources with CloudFormation L1 classes only (and the same nested placement)."""
    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bench")
    role = iam.CfnRole(
        stack,
        "Role",
        assume_role_policy_document={
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        },
    )
    policy = iam.CfnPolicy(
        stack,
        "Policy",
        policy_name="bench",
        roles=[role.ref],
        policy_document={
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{LOCATION[5:]}*"},
                {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            ],
        },
    )
    model = sagemaker.CfnModel(
        stack,
        "Model",
        execution_role_arn=role.attr_arn,
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(image=IMAGE),
    )
    config = sagemaker.CfnEndpointConfig(
        stack,
        "Config",
        execution_role_arn=role.attr_arn,
        production_variants=[
            sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name="AllTraffic", instance_type="ml.g6.2xlarge", initial_instance_count=1
            )
        ],
    )
    endpoint = sagemaker.CfnEndpoint(
        stack, "Endpoint", endpoint_name=PREFIX, endpoint_config_name=config.attr_endpoint_config_name
    )
    base = sagemaker.CfnInferenceComponent(
        stack,
        "Base",
        inference_component_name=f"{PREFIX}-base",
        endpoint_name=endpoint.attr_endpoint_name,
        variant_name="AllTraffic",
        specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
            model_name=model.attr_model_name,
            compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                min_memory_required_in_mb=16384, number_of_accelerator_devices_required=1
            ),
        ),
        runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(copy_count=1),
    )
    base.add_resource_dependency(policy)
    ssm.CfnParameter(stack, "Discovery", type="String", name=f"/cdk-adapters/{PREFIX}/inference-components", value="{}")
    placement = FleetPlacement()
    shards: dict[int, cdk.NestedStack] = {}
    for index in range(count):
        name, url = adapter(index)
        number = placement.shard_of(name)
        shard = shards.get(number)
        if shard is None:
            shard = shards[number] = cdk.NestedStack(stack, f"Shard{number}")
            shard.nested_stack_resource.add_resource_dependency(base)
            shard.nested_stack_resource.add_resource_dependency(policy)
        sagemaker.CfnInferenceComponent(
            shard,
            name,
            inference_component_name=f"{PREFIX}-{name}",
            endpoint_name=endpoint.attr_endpoint_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                base_inference_component_name=f"{PREFIX}-base",
                container=sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty(artifact_url=url),
            ),
        )
    app.synth()


CANDIDATES = {"library": library_app, "hand-written L1": l1_app}


def run_once(candidate: str, count: int) -> dict[str, int]:
    """Build and synthesize once; return the peak memory (KiB) of this process and of jsii's Node."""
    with tempfile.TemporaryDirectory() as outdir:
        CANDIDATES[candidate](count, outdir)
    node_peak = 0
    for child in _children(os.getpid()):
        node_peak = max(node_peak, _high_water_mark(child))
    return {"python_kib": _high_water_mark(os.getpid()), "node_kib": node_peak}


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found + [grandchild for child in found for grandchild in _children(child)]


def _high_water_mark(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--once", nargs=2, metavar=("CANDIDATE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps(run_once(args.once[0], int(args.once[1]))))
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as scratch:  # warm-up: jsii loads each module once per process
        for build in CANDIDATES.values():
            build(1, tempfile.mkdtemp(dir=scratch))
    # Every size and candidate in the same rounds, so the growth ratio t(high)/t(low) divides
    # medians taken side by side, not from windows minutes apart.
    with tempfile.TemporaryDirectory() as scratch:
        runs = {
            f"{name} N={count}": (lambda build=build, n=count, d=scratch: build(n, tempfile.mkdtemp(dir=d)))
            for count in sizes
            for name, build in CANDIDATES.items()
        }
        found = interleaved_medians(runs, rounds=args.rounds)
    medians: dict[int, dict[str, float]] = {}
    for count in sizes:
        at_count = {key: value for key, value in found.items() if key.endswith(f" N={count}")}
        print_table(
            f"synth of {count} adapters (median of {args.rounds} rounds, every size interleaved)",
            at_count,
            baseline=f"hand-written L1 N={count}",
        )
        medians[count] = {name: found[f"{name} N={count}"] for name in CANDIDATES}
    if len(sizes) > 1:
        low, high = sizes[-2], sizes[-1]
        print(f"\ngrowth t({high})/t({low}):")
        for name in CANDIDATES:
            print(f"  {name:<44} {medians[high][name] / medians[low][name]:>8.2f}")
    print(f"\npeak memory at N={sizes[-1]} (fresh process each; KiB):")
    for name in CANDIDATES:
        result = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_synth_scale", "--once", name, str(sizes[-1])],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"  {name:<44} python {peaks['python_kib']:>9,}  node {peaks['node_kib']:>9,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
