"""Bad input to demo-model, local and invoke: a clear message naming the subject and field, and
nothing written or started. (The working commands are tested against a real server in tests/local/.)"""

from __future__ import annotations

import io

import yaml

from cdk_adapters.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_demo_model_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    status, _, err = run("demo-model", str(tmp_path))
    assert status == 1 and "DIR:" in err and "is not an empty directory" in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def demo_like_manifest(directory, zoo, aliases):
    """Two adapter rows (real directories) and the given aliases, in the demo's shape."""
    manifest = directory / "manifest.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "base_model": {
                    "id": "cdk-adapters-tests/tiny-llama",
                    "revision": "0" * 39 + "1",
                    "artifact": "s3://demo/base/",
                    "hidden_size": 64,
                    "module_names": ["q_proj", "k_proj", "v_proj", "o_proj"],
                },
                "adapters": [
                    {"name": "support-en-v1", "source": str(zoo.adapter("good"))},
                    {"name": "support-en-v2", "source": str(zoo.adapter("good-2"))},
                ],
                "aliases": aliases,
            }
        )
    )
    return manifest


def test_local_reports_every_bad_alias_and_starts_nothing(tmp_path, zoo):
    manifest = demo_like_manifest(
        tmp_path,
        zoo,
        {
            "support-en": {"support-en-v1": 90, "support-en-v2": 20},
            "support-fr": "support-fr-v1",
            "support-en-v1": "support-en-v2",
        },
    )
    work = tmp_path / "work"
    status, out, err = run(
        "local", "--manifest", str(manifest), "--base-model-dir", str(tmp_path / "no-base"), "--work-dir", str(work)
    )
    assert status == 1 and out == ""
    assert "alias 'support-en': aliases.support-en: weights must sum to 100, got 110" in err
    assert "alias 'support-fr': aliases.support-fr: targets 'support-fr-v1', which is not an adapter" in err
    assert "alias 'support-en-v1': aliases.support-en-v1: shadows the adapter" in err
    assert "--base-model-dir:" in err and "nothing was started" in err
    assert not work.exists()


def test_local_refuses_an_adapter_source_that_is_not_a_directory_or_archive(tmp_path, zoo):
    manifest = demo_like_manifest(tmp_path, zoo, {})
    stray = tmp_path / "notes.txt"
    stray.write_text("not an adapter")
    status, _, err = run(
        "local",
        "--manifest",
        str(manifest),
        "--base-model-dir",
        str(tmp_path),
        "--adapter",
        f"support-en-v3={stray}",
        "--work-dir",
        str(tmp_path / "work"),
    )
    assert status == 1 and "adapter 'support-en-v3': source:" in err and "neither a directory nor a .tar.gz" in err
    status, _, err = run("local", "--manifest", str(manifest), "--base-model-dir", str(tmp_path), "--adapter", "no-path")
    assert status == 2 and "--adapter" in err and "is not NAME=PATH" in err


def test_invoke_without_local_mode_running_says_where_it_looked(tmp_path):
    status, out, err = run("invoke", "--local", "http://127.0.0.1:9", "support-en-v1", "Hello")
    assert status == 1 and out == ""
    assert (
        "adapter 'support-en-v1': invoke:" in err
        and "cannot read the discovery record of local mode at http://127.0.0.1:9" in err
    )


def test_invoke_wants_an_adapter_and_a_prompt():
    status, _, err = run("invoke", "--local", "http://127.0.0.1:9", "just-a-prompt")
    assert status == 2 and "expected ADAPTER PROMPT, got 1 word(s)" in err


def test_demo_model_without_the_serving_stack_says_what_to_install(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    out, err = io.StringIO(), io.StringIO()
    assert main(["demo-model", str(tmp_path / "demo")], stdout=out, stderr=err) == 1
    assert "needs the serving stack (torch is missing): run `make serve-stack`" in err.getvalue()
    assert "requirements-serve.txt" not in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_local_applies_the_one_case_insensitive_name_rule_to_adapter_overrides(tmp_path, zoo):
    """--adapter SUPPORT-EN-V1=... replaces the row support-en-v1 (not a second adapter that would
    shadow it); the override's bad source is then reported under the row's own name."""
    manifest = demo_like_manifest(tmp_path, zoo, {})
    stray = tmp_path / "notes.txt"
    stray.write_text("not an adapter")
    status, _, err = run(
        "local",
        "--manifest",
        str(manifest),
        "--base-model-dir",
        str(tmp_path),
        "--adapter",
        f"SUPPORT-EN-V1={stray}",
        "--work-dir",
        str(tmp_path / "work"),
    )
    assert status == 1
    assert "adapter 'support-en-v1': source:" in err and "neither a directory nor a .tar.gz" in err
    assert "listed 2 times" not in err
