"""`AdapterBucket`: the bucket's own policy refuses overwrites and deletes under the adapter prefixes.

Checked on the template (the statements and their conditions), with the three cdk-nag packs and
cfn-lint. The conditional-write semantics (``s3:if-none-match`` absent → denied) are S3's; what
`publish` sends to satisfy them is pinned by tests/packaging/test_publish_s3.py (Stubber).
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

import cdk_adapters.artifacts.bucket as adapter_bucket_module
from cdk_adapters.artifacts.bucket import LOGGING_RULES, REPLICATION_RULES, AdapterBucket
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to


def objects_under(prefix: str) -> dict:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [Match.string_like_regexp("AdaptersBucket"), "Arn"]}, f"/{prefix}*"]]}


def statements(template: Template) -> dict[str, dict]:
    (policy,) = template.find_resources("AWS::S3::BucketPolicy").values()
    return {s.get("Sid", "TLS"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_policy_denies_unconditional_writes_and_deletes_under_the_adapter_prefix():
    stack = cdk.Stack(cdk.App(), "Bucket")
    AdapterBucket(stack, "Adapters")
    template = Template.from_stack(stack)
    found = statements(template)
    put = found["DenyWritesThatCouldOverwrite"]
    assert (put["Effect"], put["Principal"], put["Action"]) == ("Deny", {"AWS": "*"}, "s3:PutObject")
    assert put["Condition"] == {"Null": {"s3:if-none-match": "true"}}
    assert put["Resource"]["Fn::Join"][1][1] == "/adapters/*"
    delete = found["DenyDeletingPublishedAdapters"]
    assert (delete["Effect"], delete["Principal"]) == ("Deny", {"AWS": "*"})
    assert delete["Action"] == ["s3:DeleteObject", "s3:DeleteObjectVersion"] and "Condition" not in delete
    assert delete["Resource"]["Fn::Join"][1][1] == "/adapters/*"
    assert found["TLS"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "DeletionPolicy": "Retain",
            "Properties": {
                "VersioningConfiguration": {"Status": "Enabled"},
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {
                            "BucketKeyEnabled": True,
                            "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": Match.any_value()},
                        }
                    ]
                },
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
                "ObjectLockEnabled": Match.absent(),
            },
        },
    )
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_several_prefixes_the_whole_bucket_and_object_lock():
    stack = cdk.Stack(cdk.App(), "Bucket")
    AdapterBucket(stack, "Adapters", prefixes=["team-a/adapters", "team-b/"], object_lock_retention=cdk.Duration.days(400))
    template = Template.from_stack(stack)
    resources = statements(template)["DenyWritesThatCouldOverwrite"]["Resource"]
    assert [r["Fn::Join"][1][1] for r in resources] == ["/team-a/adapters/*", "/team-b/*"]
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "ObjectLockEnabled": True,
            "ObjectLockConfiguration": {
                "ObjectLockEnabled": "Enabled",
                "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 400}},
            },
        },
    )
    whole = cdk.Stack(cdk.App(), "Whole")
    AdapterBucket(whole, "Adapters", prefixes=[""])
    assert statements(Template.from_stack(whole))["DenyDeletingPublishedAdapters"]["Resource"]["Fn::Join"][1][1] == "/*"


def test_bad_prefixes_are_all_named():
    stack = cdk.Stack(cdk.App(), "Bucket")
    with pytest.raises(ConfigurationError) as error:
        AdapterBucket(stack, "Adapters", prefixes=["/adapters/", "a/*/b"])
    assert [str(p) for p in error.value.problems] == [
        "AdapterBucket: prefixes: '/adapters/' must be a key prefix like 'adapters/' (no leading '/', no '*')",
        "AdapterBucket: prefixes: 'a/*/b' must be a key prefix like 'adapters/' (no leading '/', no '*')",
    ]
    with pytest.raises(ConfigurationError, match="must name at least one prefix"):
        AdapterBucket(cdk.Stack(cdk.App(), "Empty"), "Adapters", prefixes=[])


def test_an_endpoint_reads_adapters_from_its_location():
    stack = cdk.Stack(cdk.App(), "Serving")
    adapters = AdapterBucket(stack, "Adapters")
    build_endpoint(stack, adapter_locations=[adapters.location()])
    template = Template.from_stack(stack)
    policies = [
        s for p in template.find_resources("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in policies if s["Action"] == "s3:GetObject" or "s3:GetObject" in s["Action"]]
    assert any("/adapters/*" in str(s["Resource"]) and "AdaptersBucket" in str(s["Resource"]) for s in reads)
    assert any("kms:Decrypt" in s["Action"] and "AdaptersKey" in str(s["Resource"]) for s in policies)


@pytest.mark.parametrize("logged", [False, True])
def test_three_nag_packs_are_clean_and_acknowledgments_cover_exactly_the_findings(logged, monkeypatch, tmp_path):
    def stack_with_bucket(name: str, app: cdk.App | None = None) -> cdk.Stack:
        stack = cdk.Stack(app or cdk.App(), name)
        logs = s3.Bucket.from_bucket_name(stack, "Logs", "example-access-logs") if logged else None
        lock = cdk.Duration.days(730) if logged else None  # the fully hardened form: logs and Object Lock
        AdapterBucket(stack, "Adapters", server_access_logs_bucket=logs, object_lock_retention=lock)
        return stack

    app = cdk.App(outdir=str(tmp_path))
    assert nag_violations(stack_with_bucket("Nag-Bucket", app)) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr
    # Without its acknowledgments the bucket shows exactly the findings they name.
    monkeypatch.setattr(adapter_bucket_module, "acknowledge", lambda construct, acknowledgments: list(acknowledgments))
    found = sorted(nag_violations(stack_with_bucket("Nag-Bare")))
    expected = set(REPLICATION_RULES) | (set() if logged else set(LOGGING_RULES))
    assert found == sorted(f"{rule} at ['Nag-Bare/Adapters/Bucket/Resource']" for rule in expected)
