"""Published adapters stay what the lock says, through the real CLI on moto's S3.

* ``lock --check`` compares each locked adapter's object with the lock using S3's own SHA-256 and
  size, and names every adapter that was replaced, deleted, or has no SHA-256 stored.
* ``publish`` and ``lock`` send ``ExpectedBucketOwner`` on every S3 call: the caller's account (from
  STS) by default, or ``--expected-bucket-owner``. moto 5.2.5 does not enforce the owner, so the
  calls are recorded from botocore's parameter event (each then passes botocore's validation against
  the S3 service model and reaches moto).
"""

from __future__ import annotations

import json

import boto3
import pytest

from cdk_adapters.artifacts.packaging import package_adapter
from tests.cli.test_cli_commands import put_with_sha256, run, s3  # noqa: F401 (s3: the moto fixture)
from tests.manifest.builders import ADAPTER_BUCKET, s3_uri, write_manifest

MOTO_ACCOUNT = "123456789012"
"""The account moto's STS reports for any credentials."""


@pytest.fixture
def calls(s3, monkeypatch):
    """Every AWS call a fresh default session makes: (service, operation, params)."""
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    boto3.setup_default_session()
    seen: list[tuple[str, str, dict]] = []

    def record(params, model, **kwargs):
        seen.append((model.service_model.service_name, model.name, dict(params)))

    boto3.DEFAULT_SESSION.events.register("provide-client-params", record)
    return seen


def key(name: str) -> str:
    return f"adapters/{name}/adapter.tar.gz"


def publish(zoo, manifest, name: str, adapter: str, *extra: str):
    return run(
        "publish",
        str(zoo.adapter(adapter)),
        "--name",
        name,
        "--bucket",
        ADAPTER_BUCKET,
        "--manifest",
        str(manifest),
        "--no-progress",
        *extra,
    )


@pytest.fixture
def published(s3, zoo, tmp_path):
    """Three adapters published by the CLI, with their rows in the manifest and entries in the lock."""
    names = {"triage-v1": "good", "billing-v1": "good-2", "legal-v1": "good"}
    manifest = write_manifest(tmp_path, [{"name": name, "source": s3_uri(name)} for name in names])
    for name, adapter in names.items():
        status, _, err = publish(zoo, manifest, name, adapter)
        assert status == 0, err
    return manifest


def test_lock_check_passes_when_s3_holds_the_locked_bytes(published):
    status, out, err = run("lock", "--check", "--manifest", str(published))
    assert status == 0, err
    assert out.endswith("3 locked adapter(s) match S3 (SHA-256 and size)\n")


def test_lock_check_names_every_adapter_s3_disagrees_on_and_changes_nothing(published, s3, zoo, tmp_path):
    lock_file = published.with_name("adapters.lock.json")
    before = lock_file.read_text()
    locked = json.loads(before)["adapters"]
    # Out of band: triage-v1 replaced with other bytes (S3 checksum and all), billing-v1 deleted,
    # legal-v1 rewritten with its very bytes but no SHA-256 (S3 keeps a CRC32 only).
    other = package_adapter(zoo.adapter("good-2"), tmp_path / "other.tar.gz")
    put_with_sha256(s3, key("triage-v1"), other.path.read_bytes())
    s3.delete_object(Bucket=ADAPTER_BUCKET, Key=key("billing-v1"))
    same = s3.get_object(Bucket=ADAPTER_BUCKET, Key=key("legal-v1"))["Body"].read()
    s3.put_object(Bucket=ADAPTER_BUCKET, Key=key("legal-v1"), Body=same)

    status, out, err = run("lock", "--check", "--manifest", str(published))
    assert status == 1 and out == ""
    assert f"S3 disagrees with {lock_file} (3 problem(s))" in err
    assert (
        f"adapter 'triage-v1': source: {s3_uri('triage-v1')} differs from the lock in sha256 and size: S3 holds sha256 {other.sha256[:12]}..., "
        f"{other.size} bytes; the lock records sha256 {locked['triage-v1']['sha256'][:12]}..., {locked['triage-v1']['size']} bytes. "
        "A published adapter was replaced" in err
    )
    assert f"adapter 'billing-v1': source: {s3_uri('billing-v1')} does not exist (the lock records sha256" in err
    assert (
        f"adapter 'legal-v1': source: {s3_uri('legal-v1')}: S3 stores only CRC32 for it, not SHA-256 "
        "(it was not uploaded with ChecksumAlgorithm=SHA256), so it cannot be checked against the lock" in err
    )
    assert lock_file.read_text() == before


def test_lock_check_reports_rows_the_lock_does_not_cover(s3, tmp_path):
    manifest = write_manifest(tmp_path, [{"name": "triage-v9", "source": s3_uri("triage-v9")}])
    status, _, err = run("lock", "--check", "--manifest", str(manifest))
    assert status == 1
    assert f"adapter 'triage-v9': source: {s3_uri('triage-v9')} has no lock entry; run `cdk-adapters lock`" in err


def test_lock_refresh_refuses_an_object_without_s3s_sha256(s3, zoo, tmp_path):
    manifest = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    archive = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    s3.put_object(Bucket=ADAPTER_BUCKET, Key=key("triage-v3"), Body=archive.path.read_bytes())
    status, _, err = run("lock", "--manifest", str(manifest))
    assert status == 1
    assert "adapter 'triage-v3': source: " in err and "S3 stores only CRC32 for it, not SHA-256" in err
    assert "`cdk-adapters lock --check` could not verify it later" in err
    assert not manifest.with_name("adapters.lock.json").exists()


def test_lock_refresh_refuses_a_stored_sha256_that_is_not_the_bytes(s3, zoo, tmp_path):
    # moto stores a ChecksumSHA256 without verifying it (real S3 would refuse this upload):
    # the downloaded bytes must still match it.
    manifest = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    archive = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    wrong = package_adapter(zoo.adapter("good-2"), tmp_path / "b.tar.gz")
    from cdk_adapters.artifacts.s3_checksum import sha256_b64

    s3.put_object(
        Bucket=ADAPTER_BUCKET,
        Key=key("triage-v3"),
        Body=archive.path.read_bytes(),
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=sha256_b64(wrong.sha256),
    )
    status, _, err = run("lock", "--manifest", str(manifest))
    assert status == 1 and "adapter 'triage-v3': source:" in err
    assert not manifest.with_name("adapters.lock.json").exists()


def test_every_s3_call_names_the_callers_account_as_bucket_owner(published, base_model, calls, zoo):
    assert publish(zoo, published, "triage-v2", "good")[0] == 0
    assert run("lock", "--base-model", "--manifest", str(published))[0] == 0
    assert run("lock", "--check", "--manifest", str(published))[0] == 0
    s3_calls = [(operation, params) for service, operation, params in calls if service == "s3"]
    assert {operation for operation, _ in s3_calls} == {"HeadObject", "PutObject", "GetObject", "ListObjectsV2"}
    assert [params.get("ExpectedBucketOwner") for _, params in s3_calls] == [MOTO_ACCOUNT] * len(s3_calls)
    assert [operation for service, operation, _ in calls if service == "sts"] == ["GetCallerIdentity"] * 3


def test_expected_bucket_owner_option_overrides_the_callers_account(s3, calls, zoo, tmp_path):
    manifest = write_manifest(tmp_path, [])
    status, _, err = publish(zoo, manifest, "triage-v1", "good", "--expected-bucket-owner", "111122223333")
    assert status == 0, err
    assert [service for service, _, _ in calls] == ["s3", "s3"]  # no STS lookup
    assert [params["ExpectedBucketOwner"] for _, _, params in calls] == ["111122223333"] * 2


@pytest.mark.parametrize("command", ["publish", "lock", "lock --check"])
def test_a_malformed_bucket_owner_is_refused_before_anything_is_read_or_uploaded(command, s3, calls, zoo, tmp_path):
    manifest = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    if command == "publish":
        status, out, err = publish(zoo, manifest, "triage-v1", "good", "--expected-bucket-owner", "acme")
    else:
        status, out, err = run(*command.split(), "--manifest", str(manifest), "--expected-bucket-owner", "acme")
    assert status == 1 and out == ""
    assert "cdk-adapters: --expected-bucket-owner: 'acme' is not a 12-digit AWS account id" in err
    assert calls == []
    assert s3.list_objects_v2(Bucket=ADAPTER_BUCKET).get("KeyCount") == 0
    assert not manifest.with_name("adapters.lock.json").exists()


# --- the base model's pin -------------------------------------------------------------------

MODEL_BUCKET = "example-models"
BASE_PREFIX = "base/tiny-llama/"  # the test manifests' base_model.artifact


@pytest.fixture
def base_model(s3):
    """The base model's files under its prefix: one uploaded with SHA-256, one with the SDK's default CRC32."""
    s3.create_bucket(Bucket=MODEL_BUCKET)
    s3.put_object(Bucket=MODEL_BUCKET, Key=BASE_PREFIX + "config.json", Body=b'{"hidden_size": 64}', ChecksumAlgorithm="SHA256")
    s3.put_object(Bucket=MODEL_BUCKET, Key=BASE_PREFIX + "model.safetensors", Body=b"weights" * 100)
    return s3


def test_lock_pins_the_base_model_and_check_catches_a_replaced_or_added_file(base_model, tmp_path):
    manifest = write_manifest(tmp_path, [])
    status, out, err = run("lock", "--base-model", "--manifest", str(manifest))
    assert status == 0, err
    assert out.endswith("0 entr(y/ies); changed: base model\n")
    lock_file = manifest.with_name("adapters.lock.json")
    pin = json.loads(lock_file.read_text())["base_model"]
    assert pin["uri"] == f"s3://{MODEL_BUCKET}/{BASE_PREFIX}"
    assert sorted(pin["objects"]) == ["config.json", "model.safetensors"]
    assert pin["objects"]["config.json"]["checksum"].startswith("SHA256:")
    assert pin["objects"]["model.safetensors"] == {"size": 700, "checksum": pin["objects"]["model.safetensors"]["checksum"]}
    assert pin["objects"]["model.safetensors"]["checksum"].startswith("CRC32:")
    status, out, _ = run("lock", "--check", "--manifest", str(manifest))
    assert status == 0 and out.endswith("the base model's 2 object(s) match their pin\n")

    # In place: the weights replaced, and a file added that the standards library would import.
    base_model.put_object(Bucket=MODEL_BUCKET, Key=BASE_PREFIX + "model.safetensors", Body=b"poisoned" * 100)
    base_model.put_object(Bucket=MODEL_BUCKET, Key=BASE_PREFIX + "model.py", Body=b"import os")
    before = lock_file.read_text()
    status, _, err = run("lock", "--check", "--manifest", str(manifest))
    assert status == 1
    assert f"base model: artifact: s3://{MODEL_BUCKET}/{BASE_PREFIX} differs from its pin in the lock: " in err
    assert (
        "model.py was added; model.safetensors changed (CRC32:" in err and ", 700 bytes -> CRC32:" in err and "800 bytes)" in err
    )
    status, _, err = run("lock", "--manifest", str(manifest))  # a refresh refuses the change too
    assert status == 1 and "changed since it was pinned: model.py was added" in err
    assert lock_file.read_text() == before


def test_an_archive_base_is_pinned_and_a_new_artifact_is_a_new_pin(base_model, tmp_path):
    archive = "base/tiny-llama.tar.gz"
    base_model.put_object(Bucket=MODEL_BUCKET, Key=archive, Body=b"archive", ChecksumAlgorithm="SHA256")
    manifest = write_manifest(tmp_path, [], base={"artifact": f"s3://{MODEL_BUCKET}/{archive}"})
    assert run("lock", "--base-model", "--manifest", str(manifest))[0] == 0
    lock_file = manifest.with_name("adapters.lock.json")
    assert list(json.loads(lock_file.read_text())["base_model"]["objects"]) == [archive]
    # The manifest moves to another artifact (a base upgrade): check says so, lock re-pins.
    write_manifest(tmp_path, [])
    status, _, err = run("lock", "--check", "--manifest", str(manifest))
    assert (
        status == 1
        and f"the manifest says s3://{MODEL_BUCKET}/{BASE_PREFIX} but the lock pins s3://{MODEL_BUCKET}/{archive}" in err
    )
    assert run("lock", "--manifest", str(manifest))[0] == 0  # a pin, once there, is kept up to date
    assert sorted(json.loads(lock_file.read_text())["base_model"]["objects"]) == ["config.json", "model.safetensors"]


def test_a_base_object_without_any_checksum_cannot_be_pinned(s3, tmp_path):
    from botocore.config import Config

    s3.create_bucket(Bucket=MODEL_BUCKET)
    bare = boto3.client("s3", region_name="us-east-1", config=Config(request_checksum_calculation="when_required"))
    bare.put_object(Bucket=MODEL_BUCKET, Key=BASE_PREFIX + "model.safetensors", Body=b"weights")
    manifest = write_manifest(tmp_path, [])
    status, _, err = run("lock", "--base-model", "--manifest", str(manifest))
    assert status == 1
    assert f"base model: artifact: S3 stores no checksum for model.safetensors under s3://{MODEL_BUCKET}/{BASE_PREFIX}" in err
    assert not manifest.with_name("adapters.lock.json").exists()


def test_lock_check_request_shape_and_a_bucket_another_account_owns(zoo, tmp_path):
    """Stubber: exactly one HeadObject per locked adapter, with ChecksumMode and ExpectedBucketOwner; a 403 is explained."""
    from botocore.stub import Stubber

    from cdk_adapters.manifest import load_manifest
    from cdk_adapters.manifest.lock_check import check_lock_against_s3
    from tests.manifest.builders import lock_adapters

    manifest = write_manifest(tmp_path, [{"name": "triage-v1", "source": s3_uri("triage-v1")}])
    lock_adapters(manifest, {"triage-v1": zoo.adapter("good")}, tmp_path)
    loaded = load_manifest(manifest)
    entry = loaded.lock.adapters["triage-v1"]
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    head = {"Bucket": ADAPTER_BUCKET, "Key": key("triage-v1"), "ChecksumMode": "ENABLED", "ExpectedBucketOwner": "111122223333"}
    from cdk_adapters.artifacts.s3_checksum import sha256_b64

    with Stubber(client) as stub:
        stub.add_response("head_object", {"ContentLength": entry.size, "ChecksumSHA256": sha256_b64(entry.sha256)}, head)
        assert check_lock_against_s3(loaded, client, expected_bucket_owner="111122223333") == []
        stub.add_client_error("head_object", "403", http_status_code=403, expected_params=head)
        (problem,) = check_lock_against_s3(loaded, client, expected_bucket_owner="111122223333")
        stub.assert_no_pending_responses()
    assert str(problem).startswith(
        f"adapter 'triage-v1': source: cannot read {s3_uri('triage-v1')}: access denied (403): "
        f"bucket '{ADAPTER_BUCKET}' is not owned by account 111122223333"
    )
