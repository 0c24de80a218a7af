"""`cdk-adapters` through `main(argv)` (S3 on moto) and once through the installed entry point."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from cdk_adapters.artifacts.packaging import file_sha256, package_adapter
from cdk_adapters.cli import main
from tests.manifest.builders import ADAPTER_BUCKET, s3_uri, write_manifest

REGION = "us-east-1"
ENTRY_POINT = Path(sys.executable).parent / "cdk-adapters"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def s3(monkeypatch):
    for variable, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=ADAPTER_BUCKET)
        yield client


def put_with_sha256(client, key: str, body: bytes) -> None:
    """An upload S3 keeps its own SHA-256 for (as `aws s3 cp --checksum-algorithm SHA256` does)."""
    client.put_object(Bucket=ADAPTER_BUCKET, Key=key, Body=body, ChecksumAlgorithm="SHA256")


def bucket_keys(client) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=ADAPTER_BUCKET).get("Contents", [])]


@pytest.fixture
def manifest(zoo, tmp_path):
    return write_manifest(tmp_path, [{"name": "triage-v1", "source": str(zoo.adapter("good"))}])


@pytest.mark.parametrize("command", [[], ["validate"], ["package"], ["publish"], ["lock"], ["base-facts"]])
def test_help_on_every_command(command, capsys):
    assert main([*command, "--help"]) == 0
    assert "usage: cdk-adapters" in capsys.readouterr().out


def test_usage_error_exits_2(capsys):
    assert main(["publish", "somewhere"]) == 2
    assert "the following arguments are required: --name, --bucket" in capsys.readouterr().err


def test_validate_manifest(manifest):
    status, out, err = run("validate", str(manifest))
    assert status == 0, err
    assert "ok: adapter 'triage-v1' (rank 8, alpha 16, targets k_proj, o_proj, q_proj, v_proj)" in out
    assert "max_lora_rank 8 (derived)" in out


def test_validate_bad_manifest_lists_every_problem_on_stderr(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [{"name": "triage-v1", "source": str(zoo.adapter("dora"))}, {"name": "legal", "source": str(zoo.adapter("embedding"))}],
    )
    status, out, err = run("validate", str(path))
    assert status == 1 and out == ""
    assert "adapter 'triage-v1': use_dora: vLLM cannot serve DoRA adapters" in err
    assert "adapter 'legal': target_modules: vLLM cannot serve LoRA on embedding or output layers" in err
    assert "adapter 'legal': name: must end with a version suffix" in err


def test_validate_reports_a_schema_error_together_with_the_gate_on_other_rows(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [{"name": "triage-v1", "source": str(zoo.adapter("dora"))}, {"name": "legal-v1", "source": "x", "tag": "typo"}],
    )
    status, out, err = run("validate", str(path))
    assert status == 1 and out == ""
    assert "adapter 'legal-v1': tag: is not a known field" in err
    assert "adapter 'triage-v1': use_dora: vLLM cannot serve DoRA adapters" in err


def test_validate_directories_against_a_model_directory(zoo):
    status, out, _ = run("validate", str(zoo.adapter("good")), str(zoo.adapter("good-2")), "--base-model-dir", str(zoo.base_dir))
    assert status == 0 and out.count("ok: adapter") == 2
    status, _, err = run("validate", str(zoo.adapter("rank-32")), "--base-model-dir", str(zoo.base_dir), "--max-lora-rank", "16")
    assert status == 1
    assert "adapter 'adapter-rank-32': r: rank 32 exceeds max_lora_rank 16" in err


def test_package_writes_the_deterministic_archive(zoo, manifest, tmp_path):
    output = tmp_path / "triage.tar.gz"
    status, out, err = run("package", str(zoo.adapter("good")), "-o", str(output), "--manifest", str(manifest))
    assert status == 0, err
    assert f"sha256 {file_sha256(output)}" in out
    assert output.read_bytes() == package_adapter(zoo.adapter("good"), tmp_path / "ref.tar.gz").path.read_bytes()


def test_package_refuses_a_bad_adapter_and_writes_nothing(zoo, manifest, tmp_path):
    output = tmp_path / "dora.tar.gz"
    status, out, err = run("package", str(zoo.adapter("dora")), "-o", str(output), "--manifest", str(manifest))
    assert status == 1 and out == ""
    assert "use_dora" in err and "nothing was packaged" in err
    assert not output.exists()


def test_publish_uploads_writes_the_lock_and_prints_the_uri(s3, zoo, manifest):
    status, out, err = run(
        "publish", str(zoo.adapter("good")), "--name", "triage-v2", "--bucket", ADAPTER_BUCKET, "--manifest", str(manifest)
    )
    assert status == 0, err
    assert out == f"{s3_uri('triage-v2')}\n"
    assert "uploading triage-v2 [" in err and "100%" in err
    lock = json.loads(manifest.with_name("adapters.lock.json").read_text())
    entry = lock["adapters"]["triage-v2"]
    assert entry["uri"] == s3_uri("triage-v2")
    head = s3.head_object(Bucket=ADAPTER_BUCKET, Key="adapters/triage-v2/adapter.tar.gz", ChecksumMode="ENABLED")
    assert base64.b64decode(head["ChecksumSHA256"]).hex() == entry["sha256"]  # S3's own checksum
    assert entry["size"] == head["ContentLength"]
    facts = entry["facts"]
    assert (facts["rank"], facts["alpha"], facts["target_modules"]) == (8, 16, ["k_proj", "o_proj", "q_proj", "v_proj"])
    assert (facts["base_model_name_or_path"], facts["revision"]) == ("cdk-adapters-tests/tiny-llama", "0" * 39 + "1")
    # The row can now be added and synth needs nothing but the lock.
    manifest.write_text(
        manifest.read_text().replace("adapters:\n", f"adapters:\n- name: triage-v2\n  source: {s3_uri('triage-v2')}\n")
    )
    assert run("validate", str(manifest))[0] == 0


def test_publish_refuses_bad_input_and_uploads_nothing(s3, zoo, manifest):
    lock = manifest.with_name("adapters.lock.json")
    status, out, err = run(
        "publish", str(zoo.adapter("dora")), "--name", "triage", "--bucket", ADAPTER_BUCKET, "--manifest", str(manifest)
    )
    assert status == 1 and out == ""
    assert "adapter 'triage': name: must end with a version suffix" in err
    assert "adapter 'triage': use_dora:" in err
    assert "nothing was packaged or uploaded" in err
    assert bucket_keys(s3) == [] and not lock.exists()


def test_publish_refuses_to_overwrite_a_published_name(s3, zoo, manifest):
    args = ["--name", "triage-v2", "--bucket", ADAPTER_BUCKET, "--manifest", str(manifest), "--no-progress"]
    assert run("publish", str(zoo.adapter("good")), *args)[0] == 0
    status, _, err = run("publish", str(zoo.adapter("good")), *args)  # identical bytes: a safe retry
    assert status == 0 and "already holds these exact bytes; nothing uploaded" in err
    lock_before = manifest.with_name("adapters.lock.json").read_text()
    status, out, err = run("publish", str(zoo.adapter("good-2")), *args)
    assert status == 1 and out == ""
    assert "adapter 'triage-v2': name: s3://example-adapters/adapters/triage-v2/adapter.tar.gz already exists" in err
    assert manifest.with_name("adapters.lock.json").read_text() == lock_before


def test_lock_refreshes_from_s3_and_catches_changed_content(s3, zoo, tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    archive = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    put_with_sha256(s3, "adapters/triage-v3/adapter.tar.gz", archive.path.read_bytes())
    status, out, err = run("lock", "--manifest", str(path))
    assert status == 0, err
    assert "1 entr(y/ies); changed: triage-v3" in out
    lock_file = path.with_name("adapters.lock.json")
    assert json.loads(lock_file.read_text())["adapters"]["triage-v3"]["sha256"] == archive.sha256
    assert run("lock", "--manifest", str(path))[1].endswith("changed: none\n")
    # Someone overwrote the published object out of band: lock refuses and keeps the old entry.
    other = package_adapter(zoo.adapter("good-2"), tmp_path / "b.tar.gz")
    put_with_sha256(s3, "adapters/triage-v3/adapter.tar.gz", other.path.read_bytes())
    before = lock_file.read_text()
    status, _, err = run("lock", "--manifest", str(path))
    assert status == 1
    assert "adapter 'triage-v3': source: s3://example-adapters/adapters/triage-v3/adapter.tar.gz changed content" in err
    assert lock_file.read_text() == before


def test_lock_runs_the_whole_gate_on_the_archive(s3, zoo, tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    archive = package_adapter(zoo.adapter("other-revision"), tmp_path / "a.tar.gz")
    put_with_sha256(s3, "adapters/triage-v3/adapter.tar.gz", archive.path.read_bytes())
    status, _, err = run("lock", "--manifest", str(path))
    assert status == 1 and "adapter 'triage-v3': revision:" in err
    assert not path.with_name("adapters.lock.json").exists()


def test_lock_reports_a_missing_object(s3, tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    status, _, err = run("lock", "--manifest", str(path))
    assert status == 1 and "adapter 'triage-v3': source: cannot read" in err and "NoSuchKey" in err


def test_base_facts_prints_the_manifest_fields(zoo):
    status, out, _ = run("base-facts", str(zoo.base_dir))
    assert status == 0
    assert out.splitlines() == [
        "hidden_size: 64",
        "module_names: [down_proj, embed_tokens, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj]",
        "vision_language: false",
        "module_shapes:",
        "  down_proj: [[64, 128]]",
        "  embed_tokens: [[300, 64]]",
        "  gate_proj: [[128, 64]]",
        "  k_proj: [[64, 64]]",
        "  lm_head: [[300, 64]]",
        "  o_proj: [[64, 64]]",
        "  q_proj: [[64, 64]]",
        "  up_proj: [[128, 64]]",
        "  v_proj: [[64, 64]]",
    ]


def test_installed_entry_point(zoo, tmp_path):
    assert ENTRY_POINT.is_file()
    ok = subprocess.run(
        [
            str(ENTRY_POINT),
            "package",
            str(zoo.adapter("good")),
            "-o",
            str(tmp_path / "a.tar.gz"),
            "--base-model-dir",
            str(zoo.base_dir),
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "a.tar.gz").is_file()
    bad_dir = shutil.copytree(zoo.adapter("good"), tmp_path / "bad")
    (bad_dir / "adapter_model.safetensors").unlink()
    bad = subprocess.run(
        [str(ENTRY_POINT), "validate", str(bad_dir), "--base-model-dir", str(zoo.base_dir)], capture_output=True, text=True
    )
    assert bad.returncode == 1 and bad.stdout == ""
    assert "adapter 'bad': adapter_model.safetensors: the weights file adapter_model.safetensors is missing" in bad.stderr
