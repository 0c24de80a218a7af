"""`cdk-adapters fix-torchvision` on a copy of PyPI's torchvision 0.28.0 wheel, unpacked into a
temporary folder that comes first on PYTHONPATH: broken as shipped beside torch 2.13.0+cpu,
working (real CPU kernels) after the fix, unchanged by a second run. `make serve-stack` keeps the
unmodified wheel in .venv/wheels/ for this; the fix itself takes about a second."""

from __future__ import annotations

import ctypes  # noqa: F401  (used in the child process below; imported here to fail early if absent)
import importlib.util
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cdk_adapters.local.torchvision_fix import BROKEN_MESSAGE, TORCHVISION_VERSION, Layout, check, missing_libraries

REPO_ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path(sys.prefix) / "wheels"


@pytest.fixture
def unpacked(tmp_path) -> tuple[Layout, dict[str, str]]:
    """PyPI's wheel unpacked into tmp_path/site, and an environment that imports it from there."""
    wheels = sorted(WHEELS.glob(f"torchvision-{TORCHVISION_VERSION}-*.whl"))
    assert wheels, f"no torchvision {TORCHVISION_VERSION} wheel in {WHEELS}: run `make serve-stack`"
    site = tmp_path / "site"
    with zipfile.ZipFile(wheels[0]) as wheel:
        for member in wheel.infolist():
            if member.filename.startswith(("torchvision/", "torchvision.libs/")):
                wheel.extract(member, site)
    torch_lib = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "lib"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    return Layout(site / "torchvision", torch_lib), env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cdk_adapters.cli", *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300
    )


VISION_AT_WORK = """
import torch, torchvision
from torchvision.io import decode_image, encode_png
from torchvision.ops import nms, roi_align
from torchvision.transforms import v2
print(torchvision.__file__)
assert nms(torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1.0]]), torch.tensor([0.9, 0.8]), 0.5).tolist() == [0]
assert roi_align(torch.ones(1, 1, 4, 4), [torch.tensor([[0, 0, 2, 2.0]])], 1).item() == 1.0
image = (torch.arange(48) % 255).to(torch.uint8).reshape(3, 4, 4)
assert torch.equal(decode_image(encode_png(image)), image)
assert v2.Resize(2)(torch.ones(1, 3, 4, 4)).shape == (1, 3, 2, 2)
assert not torch.cuda.is_available()
"""


def test_pypi_torchvision_is_broken_beside_cpu_torch_and_the_fix_makes_it_work(unpacked):
    layout, env = unpacked
    before = check(env=env)
    assert not before.ok and BROKEN_MESSAGE in before.detail
    assert {
        "_C.so: libc10_cuda.so",
        "_C.so: libtorch_cuda.so",
        "_C.so: libcudart.so.13",
        "image.so: libc10_cuda.so",
        "image.so: libtorch_cuda.so",
    } == set(missing_libraries(layout))

    fixed = cli(env, "fix-torchvision")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == f"torchvision {TORCHVISION_VERSION}+cu130: torchvision.ops.nms runs on the CPU (fixed)\n"
    assert "libc10_cuda.so (16 symbols)" in fixed.stderr and "libtorch_cuda.so (1 symbols)" in fixed.stderr
    assert missing_libraries(layout) == []

    working = subprocess.run([sys.executable, "-c", VISION_AT_WORK], capture_output=True, text=True, env=env, timeout=300)
    assert working.returncode == 0, working.stderr
    assert working.stdout.strip() == str(layout.package_dir / "__init__.py")  # the copy, not an installed one

    files = [*sorted(layout.libs_dir.iterdir()), layout.package_dir / "_C.so", layout.package_dir / "image.so"]
    stamps = {path: path.stat().st_mtime_ns for path in files}
    again = cli(env, "fix-torchvision")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.endswith("(already works, nothing changed)\n")
    assert {path: path.stat().st_mtime_ns for path in files} == stamps


def test_a_stub_stops_loudly_if_anything_ever_calls_cuda(unpacked):
    layout, env = unpacked
    assert cli(env, "fix-torchvision").returncode == 0
    call = f"import ctypes; ctypes.CDLL({str(layout.libs_dir / 'libc10_cuda.so')!r})._ZN3c104cuda12device_countEv()"
    done = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGABRT
    assert (
        "torchvision called _ZN3c104cuda12device_countEv from the libc10_cuda.so stub, but this torch has no CUDA" in done.stderr
    )


def test_demo_model_and_local_with_the_broken_torchvision_name_the_fix(unpacked, demo_dir, tmp_path):
    _, env = unpacked
    demo = cli(env, "demo-model", str(tmp_path / "demo"))
    assert demo.returncode == 1 and demo.stdout == ""
    assert (
        "demo-model: torchvision cannot load beside this CPU-only torch (operator torchvision::nms does not exist): "
        "run `cdk-adapters fix-torchvision`"
    ) in demo.stderr
    assert "make serve-stack" not in demo.stderr and "requirements-serve" not in demo.stderr  # not back to the install
    assert not (tmp_path / "demo").exists()

    local = cli(
        env,
        "local",
        "--manifest",
        str(demo_dir / "manifest.yaml"),
        "--base-model-dir",
        str(demo_dir / "base"),
        "--work-dir",
        str(tmp_path / "work"),
    )
    assert local.returncode == 1 and local.stdout == ""
    assert "serving stack: torchvision cannot load beside this CPU-only torch" in local.stderr
    assert "`cdk-adapters fix-torchvision`" in local.stderr and "nothing was started" in local.stderr
    assert not (tmp_path / "work").exists()
