"""Immutable publishing against moto's S3 (conditional writes, stored checksums, KMS) and botocore's
Stubber (the exact request shapes, ExpectedBucketOwner on every call).

What moto 5.2.5 does and does not do, measured: it honours ``If-None-Match: *`` on PutObject (412);
it stores the ``ChecksumSHA256`` sent with ``ChecksumAlgorithm=SHA256`` and returns it from
HeadObject/GetObjectAttributes with ``ChecksumMode=ENABLED``, but does not verify it against the bytes
(real S3 answers BadDigest); it ignores ``ExpectedBucketOwner``. Those two are pinned with Stubber.
"""

from __future__ import annotations

import base64
import hashlib
import io

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws

from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.artifacts.publish import ProgressBar, adapter_key, publish_archive
from cdk_adapters.problems import ConfigurationError

BUCKET = "adapters-bucket"
REGION = "us-east-1"
OWNER = "123456789012"


@pytest.fixture
def aws(monkeypatch):
    for variable, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield s3


@pytest.fixture
def archives(zoo, tmp_path):
    return {
        "good": package_adapter(zoo.adapter("good"), tmp_path / "good.tar.gz"),
        "good-2": package_adapter(zoo.adapter("good-2"), tmp_path / "good-2.tar.gz"),
    }


def versions(s3, key):
    return s3.list_object_versions(Bucket=BUCKET, Prefix=key).get("Versions", [])


def b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


def test_publish_uploads_once_with_s3s_own_checksum(aws, archives):
    packaged = archives["good"]
    seen = []
    published = publish_archive(
        aws,
        packaged.path,
        name="triage-v1",
        bucket=BUCKET,
        sha256=packaged.sha256,
        expected_bucket_owner=OWNER,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert published.uploaded
    assert published.uri == f"s3://{BUCKET}/adapters/triage-v1/adapter.tar.gz"
    stored = aws.get_object(Bucket=BUCKET, Key=published.key, ChecksumMode="ENABLED")
    body = stored["Body"].read()
    assert body == packaged.path.read_bytes()
    assert hashlib.sha256(body).hexdigest() == packaged.sha256
    assert stored["ChecksumSHA256"] == b64(packaged.sha256)  # S3's own checksum, kept with the object
    assert stored["Metadata"] == {"adapter-name": "triage-v1"}  # no digest in user metadata to be trusted
    assert seen[-1] == (packaged.size, packaged.size)


def test_user_metadata_claiming_the_same_sha256_proves_nothing(aws, archives):
    # Someone wrote other bytes to the key with metadata that claims our digest, and no S3 checksum.
    packaged, other = archives["good"], archives["good-2"]
    key = adapter_key("triage-v1")
    aws.put_object(Bucket=BUCKET, Key=key, Body=other.path.read_bytes(), Metadata={"sha256": packaged.sha256})
    with pytest.raises(ConfigurationError) as refused:
        publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    message = refused.value.problems[0].message
    assert "already exists and S3 stores only CRC32 for it, not SHA-256" in message
    assert "cannot be shown to hold these bytes" in message
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == other.path.read_bytes()


def test_same_bytes_without_an_s3_sha256_are_not_taken_as_identical(aws, archives):
    packaged = archives["good"]
    key = adapter_key("triage-v1")
    aws.put_object(Bucket=BUCKET, Key=key, Body=packaged.path.read_bytes())
    with pytest.raises(ConfigurationError, match="S3 stores only CRC32 for it"):
        publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    assert len(versions(aws, key)) == 1


def test_republishing_identical_bytes_uploads_nothing(aws, archives):
    packaged = archives["good"]
    publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    again = publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    assert not again.uploaded
    assert len(versions(aws, again.key)) == 1


def test_overwrite_with_other_content_is_refused_and_nothing_changes(aws, archives):
    first = archives["good"]
    publish_archive(aws, first.path, name="triage-v1", bucket=BUCKET, sha256=first.sha256)
    other = archives["good-2"]
    with pytest.raises(ConfigurationError) as refused:
        publish_archive(aws, other.path, name="triage-v1", bucket=BUCKET, sha256=other.sha256)
    problem = refused.value.problems[0]
    assert (problem.subject, problem.field) == ("adapter 'triage-v1'", "name")
    assert f"already exists with different content (S3's SHA-256 {first.sha256[:12]}..., {first.size} bytes; " in problem.message
    assert "a published name never changes" in problem.message
    key = adapter_key("triage-v1")
    assert len(versions(aws, key)) == 1
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == first.path.read_bytes()


class _RacingClient:
    """The pre-check saw no object (another publisher had not finished); S3 itself must then refuse."""

    def __init__(self, client):
        self._client = client
        self._heads = 0

    def head_object(self, **kwargs):
        self._heads += 1
        if self._heads == 1:
            raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")
        return self._client.head_object(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_conditional_write_refuses_a_racing_overwrite(aws, archives):
    # moto 5.2.5 honours If-None-Match: * on PutObject (412 PreconditionFailed), as S3 does.
    first, other = archives["good"], archives["good-2"]
    publish_archive(aws, first.path, name="triage-v1", bucket=BUCKET, sha256=first.sha256)
    with pytest.raises(ConfigurationError, match="already exists with different content"):
        publish_archive(_RacingClient(aws), other.path, name="triage-v1", bucket=BUCKET, sha256=other.sha256)
    key = adapter_key("triage-v1")
    assert len(versions(aws, key)) == 1
    assert aws.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")["ChecksumSHA256"] == b64(first.sha256)


def test_losing_a_race_to_the_same_bytes_is_a_successful_retry(aws, archives):
    packaged = archives["good"]
    publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    again = publish_archive(_RacingClient(aws), packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    assert not again.uploaded
    assert len(versions(aws, again.key)) == 1


def test_kms_encrypted_bucket(aws, archives):
    kms = boto3.client("kms", region_name=REGION)
    key_id = kms.create_key(Description="adapters")["KeyMetadata"]["KeyId"]
    aws.put_bucket_encryption(
        Bucket=BUCKET,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_id}}]
        },
    )
    packaged = archives["good"]
    published = publish_archive(aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256)
    head = aws.head_object(Bucket=BUCKET, Key=published.key)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert key_id in head["SSEKMSKeyId"]
    explicit = publish_archive(
        aws, archives["good-2"].path, name="billing-v1", bucket=BUCKET, sha256=archives["good-2"].sha256, kms_key_id=key_id
    )
    assert key_id in aws.head_object(Bucket=BUCKET, Key=explicit.key)["SSEKMSKeyId"]


def stubbed_client():
    return boto3.client("s3", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")


def head_params(key):
    return {"Bucket": BUCKET, "Key": key, "ChecksumMode": "ENABLED", "ExpectedBucketOwner": OWNER}


def test_request_shape_is_a_conditional_checksummed_put_to_the_expected_owner(archives):
    packaged = archives["good"]
    client = stubbed_client()
    key = "team/a/triage-v1/adapter.tar.gz"
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "404", http_status_code=404, expected_params=head_params(key))
        stub.add_response(
            "put_object",
            {"ETag": '"etag"', "ChecksumSHA256": b64(packaged.sha256)},
            expected_params={
                "Bucket": BUCKET,
                "Key": key,
                "Body": ANY,
                "ContentLength": packaged.size,
                "ContentType": "application/gzip",
                "ChecksumAlgorithm": "SHA256",
                "ChecksumSHA256": b64(packaged.sha256),
                "IfNoneMatch": "*",
                "ExpectedBucketOwner": OWNER,
                "Metadata": {"adapter-name": "triage-v1"},
                "ServerSideEncryption": "aws:kms",
                "SSEKMSKeyId": "alias/adapters",
            },
        )
        published = publish_archive(
            client,
            packaged.path,
            name="triage-v1",
            bucket=BUCKET,
            prefix="/team/a/",
            sha256=packaged.sha256,
            expected_bucket_owner=OWNER,
            kms_key_id="alias/adapters",
        )
        stub.assert_no_pending_responses()
    assert published.key == key


def test_an_existing_object_is_identical_only_by_s3s_checksum_and_size(archives):
    packaged = archives["good"]
    client = stubbed_client()
    key = adapter_key("triage-v1")
    same = {"ContentLength": packaged.size, "ChecksumSHA256": b64(packaged.sha256), "ChecksumType": "FULL_OBJECT"}
    with Stubber(client) as stub:
        stub.add_response("head_object", same, expected_params=head_params(key))
        again = publish_archive(
            client, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256, expected_bucket_owner=OWNER
        )
        # A multipart upload's SHA-256 is a checksum of checksums: never equal to the file's.
        stub.add_response(
            "head_object",
            {**same, "ChecksumSHA256": b64(packaged.sha256) + "-2", "ChecksumType": "COMPOSITE"},
            expected_params=head_params(key),
        )
        with pytest.raises(ConfigurationError, match="multipart \\(composite\\) SHA-256"):
            publish_archive(
                client, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256, expected_bucket_owner=OWNER
            )
        stub.assert_no_pending_responses()  # and no put_object was made
    assert not again.uploaded


def test_a_bucket_another_account_owns_is_refused_with_a_reason_and_nothing_uploaded(archives):
    packaged = archives["good"]
    client = stubbed_client()
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "403", http_status_code=403, expected_params=head_params(adapter_key("triage-v1")))
        with pytest.raises(ConfigurationError) as refused:
            publish_archive(
                client, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256, expected_bucket_owner=OWNER
            )
        stub.assert_no_pending_responses()
    problem = refused.value.problems[0]
    assert (problem.subject, problem.field) == ("adapter 'triage-v1'", "bucket")
    assert f"bucket '{BUCKET}' is not owned by account {OWNER}" in problem.message


def test_progress_bar_draws_to_one_line():
    stream = io.StringIO()
    bar = ProgressBar("uploading triage-v1", stream)
    for done in (0, 5_000_000, 10_000_000):
        bar(done, 10_000_000)
    lines = stream.getvalue().split("\r")
    assert lines[-1] == "uploading triage-v1 [##############################] 100%  10.0/10.0 MB\n"
    assert "[###############...............]  50%" in stream.getvalue()


def test_a_small_file_is_counted_in_bytes_not_as_0_0_mb():
    stream = io.StringIO()
    bar = ProgressBar("uploading triage-v1", stream)
    bar(0, 2_048)
    bar(2_048, 2_048)
    assert stream.getvalue().split("\r")[-1] == "uploading triage-v1 [##############################] 100%  2,048/2,048 bytes\n"
    assert "0.0/0.0 MB" not in stream.getvalue()
