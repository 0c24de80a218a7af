"""Shared fixtures for the construct tests: small stacks built in-process, and (sparingly) the real CDK CLI."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from tests.gate.zoo import AdapterZoo, session_zoo

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = REPO_ROOT / ".venv" / "bin"
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
DIGEST_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32
TAG_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm:v0.31.0"
MODEL_BUCKET = "example-models"
MODEL_PREFIX = "base/tiny-llama/"
ADAPTER_BUCKET_URL = "s3://example-adapters/"
"""The adapter location the small test endpoints declare: every test adapter URL lies under it."""


def cli_environment() -> dict[str, str]:
    """Node 24 from the venv first on PATH (the system's Node 20 is end-of-life for jsii)."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("CDK_DISABLE_VERSION_CHECK", "1")
    return env


def run_cdk(*args: str, cwd: Path = REPO_ROOT, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CDK_CLI), *args, "--no-notices"],
        cwd=cwd,
        env=cli_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def app_context(environment: str | None = None) -> dict[str, Any]:
    """cdk.json's context (environments and feature flags), as ``cdk synth`` passes it to app.py."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    if environment is not None:
        context["env"] = environment
    return context


def app_environments() -> dict[str, Any]:
    """The example app's per-environment settings, as cdk.json has them."""
    return app_context()["environments"]


def new_stack(name: str = "Test-Stack", **kwargs: Any) -> cdk.Stack:
    return cdk.Stack(cdk.App(), name, **kwargs)


def endpoint_props(stack: cdk.Stack, **overrides: Any) -> dict[str, Any]:
    """The smallest valid configuration; tests override what they exercise.

    Components stay in the endpoint's stack so `Template.from_stack` shows them; the nested
    placement (the default) has its own tests in tests/fleet/.
    """
    bucket = stack.node.try_find_child("Models") or s3.Bucket.from_bucket_name(stack, "Models", MODEL_BUCKET)
    props: dict[str, Any] = {
        "model_data": ModelData.from_s3_prefix(bucket, MODEL_PREFIX),
        "image": ContainerImage.from_digest_uri(DIGEST_IMAGE),
        "compute": ComputeRequirements(min_memory_required_in_mb=16384),
        "adapter_locations": [AdapterLocation.from_s3_url(ADAPTER_BUCKET_URL)],
        "placement": FleetPlacement.in_endpoint_stack(),
    }
    props.update(overrides)
    return props


def build_endpoint(stack: cdk.Stack | None = None, id: str = "Serving", **overrides: Any) -> MultiAdapterEndpoint:
    stack = stack or new_stack()
    return MultiAdapterEndpoint(stack, id, **endpoint_props(stack, **overrides))


def real_archives(zoo: AdapterZoo, directory: Path, count: int) -> list[Path]:
    """`count` distinct archives of a real PEFT adapter that passes the gate: the zoo's good adapter,
    each copy with its own ``lora_dropout`` (a training-only setting), packaged as users package."""
    from cdk_adapters.artifacts.packaging import package_adapter

    archives = []
    for index in range(count):
        adapter = zoo.copy("good", directory / f"adapter-{index}")
        config = json.loads((adapter / "adapter_config.json").read_text())
        config["lora_dropout"] = index / 1000
        (adapter / "adapter_config.json").write_text(json.dumps(config))
        archives.append(package_adapter(adapter, directory / f"local-{index}.tar.gz").path)
    return archives


def resources_of(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    return template.find_resources(resource_type)


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> AdapterZoo:
    """Real PEFT adapters (built once per session), for the gate `add_adapter` runs on archives."""
    return session_zoo(tmp_path_factory)


@pytest.fixture
def template_of() -> Callable[[cdk.Stack], Template]:
    return Template.from_stack


@pytest.fixture(scope="session")
def cli_dev_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the example app's default environment, through the real CLI, once per session."""
    outdir = tmp_path_factory.mktemp("cli-dev") / "cdk.out"
    result = run_cdk("synth", "--quiet", "--output", str(outdir))
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
    return outdir


def model_environment(stack) -> dict[str, str]:
    """The model's environment as the container sees it (pseudo parameters resolved)."""
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    return {name: deployed(value) for name, value in environment.items()}


def deployed(value) -> str:
    """`value` as CloudFormation resolves it in account 123456789012 of us-east-1 (env-agnostic stacks)."""
    if isinstance(value, str):
        return value
    resolved = flatten_reference(value)
    for token, literal in (("<AWS::Partition>", "aws"), ("<AWS::Region>", "us-east-1"), ("<AWS::AccountId>", "123456789012")):
        resolved = resolved.replace(token, literal)
    return resolved
