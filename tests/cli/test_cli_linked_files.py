"""`validate`, `package` and `publish` refuse an adapter directory holding a link, with the gate's
rule id, and write or upload nothing (S3 on moto)."""

from __future__ import annotations

import os

import pytest

from tests.cli.test_cli_commands import bucket_keys, manifest, run, s3  # noqa: F401 (fixtures)
from tests.manifest.builders import ADAPTER_BUCKET


@pytest.fixture
def linked_adapter(zoo, tmp_path):
    outside = tmp_path / "outside-tokenizer.json"
    outside.write_text("{}")
    adapter = zoo.copy("good", tmp_path / "triage")
    os.symlink(outside, adapter / "tokenizer.json")
    return adapter, outside


def test_validate_names_the_link_and_the_rule(linked_adapter, manifest):
    adapter, outside = linked_adapter
    status, _, err = run("validate", str(adapter), "--manifest", str(manifest))
    assert status == 1
    assert f"source: 'tokenizer.json' is a symbolic link to '{outside}'" in err and "[linked-files]" in err


def test_package_writes_nothing(linked_adapter, manifest, tmp_path):
    adapter, _ = linked_adapter
    output = tmp_path / "triage.tar.gz"
    status, out, err = run("package", str(adapter), "-o", str(output), "--include-tokenizer", "--manifest", str(manifest))
    assert status == 1 and out == ""
    assert "[linked-files]" in err and "nothing was packaged" in err
    assert not output.exists()


def test_publish_uploads_nothing(s3, linked_adapter, manifest):
    adapter, _ = linked_adapter
    status, out, err = run(
        "publish", str(adapter), "--name", "triage-v2", "--bucket", ADAPTER_BUCKET, "--manifest", str(manifest)
    )
    assert status == 1 and out == ""
    assert "[linked-files]" in err
    assert bucket_keys(s3) == []
    assert not manifest.with_name("adapters.lock.json").exists()
