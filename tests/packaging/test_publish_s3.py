"""Immutable publishing against moto's S3 (conditional writes, KMS) and botocore's Stubber (request shape)."""

from __future__ import annotations

import base64
import hashlib
import io

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws

from cdk_adapters.packaging import package_adapter
from cdk_adapters.problems import ConfigurationError
from cdk_adapters.publish import ProgressBar, adapter_key, publish_archive

BUCKET = "adapters-bucket"
REGION = "us-east-1"


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


def test_publish_uploads_once_with_checksum_and_metadata(aws, archives):
    packaged = archives["good"]
    seen = []
    published = publish_archive(
        aws, packaged.path, name="triage-v1", bucket=BUCKET, sha256=packaged.sha256, progress=lambda d, t: seen.append((d, t))
    )
    assert published.uploaded
    assert published.uri == f"s3://{BUCKET}/adapters/triage-v1/adapter.tar.gz"
    stored = aws.get_object(Bucket=BUCKET, Key=published.key)
    body = stored["Body"].read()
    assert body == packaged.path.read_bytes()
    assert hashlib.sha256(body).hexdigest() == packaged.sha256
    assert stored["Metadata"] == {"sha256": packaged.sha256, "adapter-name": "triage-v1"}
    # (moto neither stores nor verifies ChecksumSHA256; the Stubber test below pins that we send it.)
    assert seen[-1] == (packaged.size, packaged.size)


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
    assert "already exists with different content; a published name never changes" in problem.message
    key = adapter_key("triage-v1")
    assert len(versions(aws, key)) == 1
    assert aws.get_object(Bucket=BUCKET, Key=key)["Body"].read() == first.path.read_bytes()


class _RacingClient:
    """The pre-check saw no object (another publisher had not finished); S3 itself must then refuse."""

    def __init__(self, client):
        self._client = client

    def head_object(self, **kwargs):
        raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")

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
    assert aws.head_object(Bucket=BUCKET, Key=key)["Metadata"]["sha256"] == first.sha256


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


def test_request_shape_is_a_conditional_checksummed_put(archives):
    packaged = archives["good"]
    client = boto3.client("s3", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    key = "team/a/triage-v1/adapter.tar.gz"
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "404", http_status_code=404, expected_params={"Bucket": BUCKET, "Key": key})
        stub.add_response(
            "put_object",
            {"ETag": '"etag"'},
            expected_params={
                "Bucket": BUCKET,
                "Key": key,
                "Body": ANY,
                "ContentLength": packaged.size,
                "ContentType": "application/gzip",
                "ChecksumSHA256": base64.b64encode(bytes.fromhex(packaged.sha256)).decode(),
                "IfNoneMatch": "*",
                "Metadata": {"sha256": packaged.sha256, "adapter-name": "triage-v1"},
                "ServerSideEncryption": "aws:kms",
                "SSEKMSKeyId": "alias/adapters",
            },
        )
        published = publish_archive(
            client, packaged.path, name="triage-v1", bucket=BUCKET, prefix="/team/a/", sha256=packaged.sha256, kms_key_id="alias/adapters"
        )
        stub.assert_no_pending_responses()
    assert published.key == key


def test_progress_bar_draws_to_one_line():
    stream = io.StringIO()
    bar = ProgressBar("uploading triage-v1", stream)
    for done in (0, 5_000_000, 10_000_000):
        bar(done, 10_000_000)
    lines = stream.getvalue().split("\r")
    assert lines[-1] == "uploading triage-v1 [##############################] 100%  10.0/10.0 MB\n"
    assert "[###############...............]  50%" in stream.getvalue()
