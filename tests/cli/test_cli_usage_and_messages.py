"""What a new user hit with the CLI: usage errors exit 2, messages say what is wrong and what to
pass, `lock` writes nothing it need not, and `validate` lists acknowledged findings apart."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from cdk_adapters.cli import main
from tests.manifest.builders import write_manifest

REASON = "style adapter adapts the MLP only; latency measured equal"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def manifest(zoo, tmp_path):
    (tmp_path / "m").mkdir()
    return write_manifest(tmp_path / "m", [{"name": "triage-v1", "source": str(zoo.adapter("good"))}])


def test_manifest_and_base_model_dir_together_is_a_usage_error(zoo, manifest, capsys):
    status, out, _ = run("validate", str(zoo.adapter("good")), "--manifest", str(manifest), "--base-model-dir", str(zoo.base_dir))
    assert status == 2 and out == ""
    err = capsys.readouterr().err
    assert "usage: cdk-adapters validate" in err and "argument --base-model-dir: not allowed with argument --manifest" in err


def test_package_to_a_zip_is_a_usage_error_and_writes_nothing(zoo, manifest, tmp_path, capsys):
    status, out, _ = run("package", str(zoo.adapter("good")), "-o", str(tmp_path / "out.zip"), "--manifest", str(manifest))
    assert status == 2 and out == ""
    err = capsys.readouterr().err
    assert "usage: cdk-adapters package" in err and "must end with .tar.gz" in err
    assert not (tmp_path / "out.zip").exists()


def test_a_manifest_together_with_adapter_directories_is_a_usage_error(zoo, manifest):
    status, out, err = run("validate", str(manifest), str(zoo.adapter("good")))
    assert status == 2 and out == ""
    assert "cdk-adapters: usage error (see 'cdk-adapters validate --help')" in err
    assert "give either one manifest or adapter directories/archives, not both" in err


def test_a_non_integer_rank_is_quoted_as_written(zoo, tmp_path, manifest):
    adapter = zoo.copy("good", tmp_path / "eight-v1")
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**config, "r": "eight"}))
    status, _, err = run("validate", str(adapter), "--manifest", str(manifest))
    assert status == 1
    assert "adapter 'eight-v1': r: r must be a positive integer (got 'eight'); fix adapter_config.json [adapter-config]" in err
    assert "got None" not in err


def test_outside_the_repository_the_missing_default_manifest_says_what_to_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["validate"], ["lock"], ["validate", "some-adapter-dir"]):
        status, out, err = run(*argv)
        assert status == 1 and out == "", argv
        assert f"manifest 'manifests/example.yaml': --manifest: not found in {tmp_path}" in err, err
        assert "pass your manifest with --manifest PATH" in err


def test_base_facts_of_a_missing_directory_says_it_does_not_exist(tmp_path):
    status, out, err = run("base-facts", str(tmp_path / "no-such-model"))
    assert status == 1 and out == ""
    assert f"{tmp_path / 'no-such-model'} does not exist" in err and "config.json" not in err


def test_lock_without_published_adapters_writes_no_lock_file(manifest):
    status, out, err = run("lock", "--manifest", str(manifest))
    assert status == 0 and err == ""
    assert "has no s3:// adapters" in out and "was not written" in out
    assert not list(manifest.parent.glob("*.lock.json"))


def test_adapter_directories_whose_names_differ_only_in_case_are_refused(zoo, tmp_path, manifest):
    first = shutil.copytree(zoo.adapter("good"), tmp_path / "a" / "Tenant-v1")
    second = shutil.copytree(zoo.adapter("good-2"), tmp_path / "b" / "tenant-v1")
    status, out, err = run("validate", str(first), str(second), "--manifest", str(manifest))
    assert status == 1 and out == ""
    assert "adapter 'Tenant-v1': name: is listed 2 times as 'Tenant-v1', 'tenant-v1'" in err


def test_validate_lists_acknowledged_findings_apart_and_warns_of_the_deprecated_field(zoo, tmp_path):
    rows = [
        {"name": "triage-v1", "source": str(zoo.adapter("good"))},
        {"name": "billing-v1", "source": str(zoo.adapter("good-2"))},
        {
            "name": "style-v1",
            "source": str(zoo.adapter("mlp")),
            "acknowledge": {"rule": "identical-target-modules", "reason": REASON},
        },
        {
            "name": "summary",
            "source": str(zoo.adapter("good")),
            "acknowledge": {"rule": "version-suffix", "reason": "name fixed by the tenant's contract"},
        },
    ]
    status, out, err = run("validate", str(write_manifest(tmp_path, rows)))
    assert status == 0, err
    ok_lines = [line for line in out.splitlines() if line.startswith("ok: adapter")]
    assert len(ok_lines) == 4
    listing = out.split("acknowledged: 2 finding(s), not failed:\n", 1)[1].splitlines()
    assert listing[0].startswith("  - adapter 'summary': name: must end with a version suffix")
    assert listing[0].endswith("[version-suffix] (acknowledged: name fixed by the tenant's contract)")
    assert listing[1].startswith("  - adapter 'style-v1': target_modules: targets down_proj, gate_proj, up_proj")
    assert listing[1].endswith(f"[identical-target-modules] (acknowledged: {REASON})")
    assert err == ""

    rows[2] = {**rows[2], "target_modules_differ_reason": REASON}
    del rows[2]["acknowledge"]
    status, out, err = run("validate", str(write_manifest(tmp_path, rows)))
    assert status == 0
    assert "deprecated: manifest '" in err and "adapter 'style-v1': target_modules_differ_reason: is deprecated" in err
    assert "acknowledged: 2 finding(s)" in out
