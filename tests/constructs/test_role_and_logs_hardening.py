"""The execution role's trust and conditions, the endpoint's log groups, and what the acknowledgments say.

Each test reads the synthesized template (in-process) and pins one hardening: the trust is held to
this account's SageMaker resources, the role cannot create log groups (the endpoint creates both,
with retention and an optional key, before SageMaker writes), every S3 grant names the bucket's
owner, KMS decryption for S3 goes through S3 only, the VPC grant names the subnets and security
groups, and each cdk-nag acknowledgment says what is true of the policy it accepts.
"""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_adapters import BaseCopies, Instances, Networking
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.logs import EndpointLogs
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.hosting.rolling_update import RollingUpdate
from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms
from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import MODEL_BUCKET, MODEL_PREFIX, build_endpoint, new_stack
from tests.constructs.test_nag_lint_composition import nag_violations

ADAPTER_URL = "s3://example-adapters/support-en/v1/adapter.tar.gz"
OTHER_ACCOUNT = "111122223333"
ACCOUNT = "<AWS::AccountId>"


def template_of(endpoint) -> Template:
    return Template.from_stack(cdk.Stack.of(endpoint))


def role_statements(template: Template) -> list[dict]:
    return [
        s for p in template.find_resources("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def flat(value) -> str:
    return flatten_reference(value) if not isinstance(value, list) else json.dumps([flatten_reference(v) for v in value])


def acknowledgments(scope) -> dict[str, str]:
    """Rule id -> reason, over every construct under `scope` (a later acknowledgment of the same id wins)."""
    found: dict[str, str] = {}
    for construct in scope.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for key, reason in entry.data.items():
                    found[f"{construct.node.path} {key.split('::', 1)[-1]}"] = reason
    return found


# ---------------------------------------------------------------------------------------- trust


def test_sagemaker_may_assume_the_role_only_for_this_accounts_resources_in_this_region():
    template = template_of(build_endpoint())
    [role] = template.find_resources("AWS::IAM::Role").values()
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    # SageMaker's confused-deputy page, real-time inference: exactly this pattern, the '*' literal.
    assert {key: {k: flat(v) for k, v in value.items()} for key, value in trust["Condition"].items()} == {
        "ArnLike": {"aws:SourceArn": f"arn:<AWS::Partition>:sagemaker:<AWS::Region>:{ACCOUNT}:*"}
    }


def test_an_explicit_environment_puts_its_account_and_region_in_the_trust():
    stack = new_stack(env=cdk.Environment(account="123456789012", region="eu-west-1"))
    template = template_of(build_endpoint(stack))
    [role] = template.find_resources("AWS::IAM::Role").values()
    condition = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]
    assert flat(condition["ArnLike"]["aws:SourceArn"]) == "arn:<AWS::Partition>:sagemaker:eu-west-1:123456789012:*"


# ----------------------------------------------------------------------------------------- logs


def test_the_role_writes_logs_but_cannot_create_log_groups():
    statements = role_statements(template_of(build_endpoint()))
    assert "logs:CreateLogGroup" not in json.dumps(statements)
    [write] = [s for s in statements if s.get("Sid") == "WriteOwnLogs"]
    assert sorted(write["Action"]) == ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]


def endpoint_group_names(endpoint) -> list[str]:
    return sorted(
        [
            f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}",
            f"/aws/sagemaker/InferenceComponents/{endpoint.base_component_name}",
            f"/cdk-adapters/capture/{endpoint.endpoint_name}",
        ]
    )


def logs_key_statement(template: Template, key_logical_id: str) -> dict:
    [for_logs] = [
        s
        for s in template.to_json()["Resources"][key_logical_id]["Properties"]["KeyPolicy"]["Statement"]
        if "Service" in s["Principal"]
    ]
    return for_logs


def test_every_log_group_exists_with_a_year_of_retention_a_rotated_customer_key_and_is_kept_on_delete():
    """By default the endpoint creates the groups' key (CKV_AWS_158, HIPAA's and NIST's encryption rules)."""
    stack = new_stack()
    endpoint = build_endpoint(stack)
    template = template_of(endpoint)
    groups = template.find_resources("AWS::Logs::LogGroup")
    by_name = {g["Properties"]["LogGroupName"]: g for g in groups.values()}
    assert sorted(by_name) == endpoint_group_names(endpoint)
    key_id = stack.get_logical_id(endpoint.log_settings.encryption_key.node.default_child)
    key = template.to_json()["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
    for group in by_name.values():
        assert group["Properties"]["RetentionInDays"] == 365
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert group["DeletionPolicy"] == "Retain" and group["UpdateReplacePolicy"] == "Retain"
    # CloudWatch Logs may use the created key for these groups only.
    context = logs_key_statement(template, key_id)["Condition"]["ArnEquals"]["kms:EncryptionContext:aws:logs:arn"]
    assert sorted(flatten_reference(arn).rsplit(":log-group:", 1)[1] for arn in context) == endpoint_group_names(endpoint)
    assert nag_violations(stack) == []


def test_a_destroyed_log_setup_destroys_its_created_key_too():
    endpoint = build_endpoint(logs=EndpointLogs(removal_policy=cdk.RemovalPolicy.DESTROY))
    template = template_of(endpoint)
    [key] = [r for r in template.find_resources("AWS::KMS::Key").values() if "log groups" in r["Properties"]["Description"]]
    assert key["DeletionPolicy"] == "Delete"


def test_service_managed_keys_are_an_explicit_choice_and_exclude_a_given_key():
    stack = new_stack()
    endpoint = build_endpoint(stack, logs=EndpointLogs(service_managed_key=True))
    template = template_of(endpoint)
    for group in template.find_resources("AWS::Logs::LogGroup").values():
        assert "KmsKeyId" not in group["Properties"]
    assert not [r for r in template.find_resources("AWS::KMS::Key").values() if "log" in r["Properties"]["Description"]]
    with pytest.raises(ConfigurationError, match=re.escape("logs.service_managed_key")):
        build_endpoint(logs=EndpointLogs(service_managed_key=True, encryption_key=kms.Key(new_stack("K"), "K")))


def test_the_groups_are_named_where_the_role_may_write():
    """The log group names and the role's log resources come from one rule: they cannot drift apart."""
    endpoint = build_endpoint()
    template = template_of(endpoint)
    names = {g["Properties"]["LogGroupName"] for g in template.find_resources("AWS::Logs::LogGroup").values()}
    [write] = [s for s in role_statements(template) if s.get("Sid") == "WriteOwnLogs"]
    prefix = f"arn:<AWS::Partition>:logs:<AWS::Region>:{ACCOUNT}:log-group:"
    assert sorted(flatten_reference(r) for r in write["Resource"]) == sorted(
        prefix + name + suffix for name in names for suffix in ("", ":*")
    )


def test_endpoint_and_base_component_wait_for_the_log_groups():
    template = template_of(build_endpoint())
    groups = set(template.find_resources("AWS::Logs::LogGroup"))
    [endpoint] = template.find_resources("AWS::SageMaker::Endpoint").values()
    components = template.find_resources("AWS::SageMaker::InferenceComponent")
    [base] = [c for c in components.values() if "BaseInferenceComponentName" not in c["Properties"]["Specification"]]
    assert groups <= set(endpoint["DependsOn"])
    assert groups <= set(base["DependsOn"])


def test_retention_key_and_removal_policy_are_the_callers_to_choose():
    stack = new_stack()
    key = kms.Key(stack, "LogKey", enable_key_rotation=True)
    endpoint = build_endpoint(
        stack,
        logs=EndpointLogs(retention=logs.RetentionDays.TEN_YEARS, encryption_key=key, removal_policy=cdk.RemovalPolicy.DESTROY),
    )
    template = template_of(endpoint)
    groups = template.find_resources("AWS::Logs::LogGroup").values()
    assert len(groups) == 3
    for group in groups:
        assert group["Properties"]["RetentionInDays"] == 3653
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
        assert group["DeletionPolicy"] == "Delete"
    # CloudWatch Logs may use the key for these groups only; no second key is created.
    assert len(template.find_resources("AWS::KMS::Key")) == 1
    for_logs = logs_key_statement(template, stack.get_logical_id(key.node.default_child))
    assert flat(for_logs["Principal"]["Service"]) == "logs.<AWS::Region>.amazonaws.com"
    assert "kms:*" not in json.dumps(for_logs["Action"])
    context = for_logs["Condition"]["ArnEquals"]["kms:EncryptionContext:aws:logs:arn"]
    assert sorted(flatten_reference(arn).rsplit(":log-group:", 1)[1] for arn in context) == endpoint_group_names(endpoint)
    assert nag_violations(stack) == []


def test_an_imported_log_key_warns_that_its_policy_must_allow_cloudwatch_logs():
    stack = new_stack(env=cdk.Environment(account="123456789012", region="us-east-1"))
    key = kms.Key.from_key_arn(stack, "Imported", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    build_endpoint(stack, logs=EndpointLogs(encryption_key=key))
    warnings = cdk.assertions.Annotations.from_stack(stack).find_warning(
        "*", cdk.assertions.Match.string_like_regexp("logs.encryption_key is imported")
    )
    assert len(warnings) == 1


def test_bad_log_settings_are_refused_with_every_field_named():
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(logs=EndpointLogs(retention=365, encryption_key="alias/logs", removal_policy=cdk.RemovalPolicy.SNAPSHOT))  # type: ignore[arg-type]
    message = str(caught.value)
    for field in ("logs.retention", "logs.encryption_key", "logs.removal_policy"):
        assert field in message


def test_only_a_chosen_service_managed_key_is_acknowledged_as_encrypted_by_cloudwatch_logs():
    stack = new_stack()
    build_endpoint(stack, logs=EndpointLogs(service_managed_key=True))
    found = acknowledgments(stack)
    reasons = {k: v for k, v in found.items() if "CloudWatchLogGroupEncrypted" in k}
    assert len(reasons) == 6  # three groups x (HIPAA, NIST)
    assert set(reasons.values()) == {nag.REASON_LOG_GROUP_SERVICE_KEY}
    for stack_id, settings in (("Default", None), ("With-Key", "given")):
        other = new_stack(stack_id)
        logs_settings = EndpointLogs(encryption_key=kms.Key(other, "K", enable_key_rotation=True)) if settings else None
        build_endpoint(other, logs=logs_settings)
        assert not [k for k in acknowledgments(other) if "CloudWatchLogGroupEncrypted" in k]


# ------------------------------------------------------------------------------ bucket ownership


def s3_statements(template: Template) -> list[dict]:
    return [s for s in role_statements(template) if json.dumps(s["Action"]).count("s3:")]


def test_every_s3_grant_is_held_to_the_stacks_account_by_default():
    template = template_of(build_endpoint())
    found = s3_statements(template)
    assert {json.dumps(s["Action"]) for s in found} == {'"s3:GetObject"', '"s3:ListBucket"'}
    for statement in found:
        assert flat(statement["Condition"]["StringEquals"]["s3:ResourceAccount"]) == ACCOUNT, statement
    [listing] = [s for s in found if s["Action"] == "s3:ListBucket"]
    assert listing["Condition"]["StringLike"] == {"s3:prefix": [f"{MODEL_PREFIX}*"]}


def test_bucket_owners_can_be_named_per_location_and_for_the_model():
    stack = new_stack()
    models = s3.Bucket.from_bucket_attributes(stack, "SharedModels", bucket_name="shared-models", account=OTHER_ACCOUNT)
    adapters = s3.Bucket.from_bucket_name(stack, "Adapters", "team-adapters")
    endpoint = build_endpoint(
        stack,
        model_data=ModelData.from_s3_prefix(models, MODEL_PREFIX),
        adapter_locations=[
            AdapterLocation.from_s3_url("s3://example-adapters/", bucket_owner="444455556666"),
            AdapterLocation.from_bucket(adapters, "published/"),
        ],
    )
    owners = {}
    for statement in s3_statements(template_of(endpoint)):
        for resource in statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]:
            owners[flatten_reference(resource).split(":::", 1)[1]] = flat(
                statement["Condition"]["StringEquals"]["s3:ResourceAccount"]
            )
    assert owners == {
        "example-adapters/*": "444455556666",
        "team-adapters/published/*": ACCOUNT,
        f"shared-models/{MODEL_PREFIX}*": OTHER_ACCOUNT,
        "shared-models": OTHER_ACCOUNT,
    }


def test_a_malformed_bucket_owner_is_refused_naming_the_field():
    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Models", MODEL_BUCKET)
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(
            stack,
            model_data=ModelData.from_s3_archive(bucket, "base/model.tar.gz", bucket_owner="12345"),
            adapter_locations=[AdapterLocation.from_s3_url("s3://example-adapters/", bucket_owner="owner")],
        )
    message = str(caught.value)
    assert "model_data.bucket_owner" in message and "adapter_locations[0].bucket_owner" in message
    assert "12-digit" in message


def test_local_archives_are_read_only_from_the_stacks_own_bootstrap_bucket(tmp_path, zoo):
    from tests.constructs.conftest import real_archives

    (archive,) = real_archives(zoo, tmp_path, 1)  # a real adapter: local archives pass the gate at synth
    endpoint = build_endpoint()
    endpoint.add_adapter("local-one-v1", artifact=AdapterArtifact.from_archive(str(archive)))
    [local] = [s for s in role_statements(template_of(endpoint)) if s.get("Sid") == "ReadLocalAdapterArchives"]
    assert flat(local["Condition"]["StringEquals"]["s3:ResourceAccount"]) == ACCOUNT


# ------------------------------------------------------------------------------------------ KMS


def test_s3_decryption_keys_may_be_used_through_s3_only():
    stack = new_stack()
    model_key = kms.Key(stack, "ModelKey", enable_key_rotation=True)
    adapter_key = kms.Key(stack, "AdapterKey", enable_key_rotation=True)
    models = s3.Bucket(stack, "Models", encryption_key=model_key, enforce_ssl=True, server_access_logs_prefix="logs/")
    endpoint = build_endpoint(
        stack,
        model_data=ModelData.from_s3_prefix(models, MODEL_PREFIX),
        adapter_locations=[AdapterLocation.from_s3_url("s3://example-adapters/", encryption_key=adapter_key)],
    )
    decrypts = [s for s in role_statements(template_of(endpoint)) if s["Action"] == "kms:Decrypt"]
    keys = {stack.get_logical_id(k.node.default_child) for k in (model_key, adapter_key)}
    assert {s["Resource"]["Fn::GetAtt"][0] for s in decrypts} == keys
    for statement in decrypts:
        assert flat(statement["Condition"]["StringEquals"]["kms:ViaService"]) == "s3.<AWS::Region>.amazonaws.com"


def test_the_volume_key_grant_is_limited_to_aws_resources():
    template = template_of(build_endpoint(instances=Instances(instance_type="ml.p3.2xlarge")))
    statements = {s.get("Sid"): s for s in role_statements(template)}
    assert statements["GrantVolumeKeyToEbs"]["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    [config] = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    assert config["Properties"]["KmsKeyId"] == statements["UseVolumeKey"]["Resource"]


# ------------------------------------------------------------------------------------------ VPC


def test_network_interfaces_are_created_only_in_the_endpoints_subnets_and_groups():
    stack = new_stack()
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-12345678",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-aaaa1111", "subnet-bbbb2222"],
    )
    group = ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef0")
    endpoint = build_endpoint(stack, networking=Networking(vpc=vpc, security_groups=[group]))
    statements = {s.get("Sid"): s for s in role_statements(template_of(endpoint))}
    arn = f"arn:<AWS::Partition>:ec2:<AWS::Region>:{ACCOUNT}:"
    create = statements["CreateInterfacesInOwnSubnets"]
    assert create["Action"] == "ec2:CreateNetworkInterface"
    assert sorted(flatten_reference(r) for r in create["Resource"]) == sorted(
        [
            arn + "network-interface/*",
            arn + "subnet/subnet-aaaa1111",
            arn + "subnet/subnet-bbbb2222",
            arn + "security-group/sg-0123456789abcdef0",
        ]
    )
    manage = statements["ManageInterfacesInOwnVpc"]
    assert flatten_reference(manage["Resource"]) == arn + "network-interface/*"
    assert flat(manage["Condition"]["ArnEquals"]["ec2:Vpc"]) == arn + "vpc/vpc-12345678"
    assert "ec2:CreateNetworkInterface" not in manage["Action"]
    star = [s for s in statements.values() if s["Resource"] == "*"]
    vpc_star = [s for s in star if "ec2:" in json.dumps(s["Action"])]
    assert [s.get("Sid") for s in vpc_star] == ["DescribeVpc"]
    assert all(action.startswith("ec2:Describe") for action in vpc_star[0]["Action"])
    assert "ec2:DescribeVpcEndpoints" in vpc_star[0]["Action"]
    assert nag_violations(stack) == []


def test_without_a_vpc_the_role_has_no_ec2_permissions():
    assert '"ec2:' not in json.dumps(role_statements(template_of(build_endpoint())))


# --------------------------------------------------------------------------- acknowledgment reasons


def test_the_star_acknowledgment_names_every_statement_that_needs_star():
    stack = new_stack()
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-12345678", availability_zones=["us-east-1a"], private_subnet_ids=["subnet-aaaa1111"]
    )
    build_endpoint(stack, networking=Networking(vpc=vpc))
    [reason] = [v for k, v in acknowledgments(stack).items() if k.endswith("AwsSolutions-IAM5[Resource::*]")]
    for part in (nag.REASON_ECR_TOKEN, nag.REASON_METRICS, nag.REASON_VPC_DESCRIBE):
        assert part in reason


def test_the_ecr_reason_says_an_asset_repository_holds_every_asset_image():
    assert "bootstrap asset repository" in nag.REASON_ECR_TOKEN and "every container asset image" in nag.REASON_ECR_TOKEN
    assert "limited to the one serving-image repository" not in nag.REASON_ECR_TOKEN
    stack = new_stack()
    build_endpoint(stack, image=ContainerImage.from_asset())
    [pull] = [s for s in role_statements(Template.from_stack(stack)) if s.get("Sid") == "PullServingImage"]
    assert "container-assets" in json.dumps(pull["Resource"])


def test_the_adapter_location_reason_claims_no_immutability():
    reason = nag.REASON_ADAPTER_LOCATION
    assert "immutable" not in reason
    assert "cannot stop other writers" in reason and "s3:ResourceAccount" in reason


def alarm_reasons(stack) -> dict[str, str]:
    return {k.split(" ")[0]: v for k, v in acknowledgments(stack).items() if "CloudWatchAlarmAction" in k}


def test_only_alarms_a_rollback_names_are_said_to_be_acted_on():
    stack = new_stack()
    endpoint = build_endpoint(
        stack,
        alarms=MonitoringAlarms(endpoint=AlarmThresholds(), adapters=AlarmThresholds()),
        deployment=RollingUpdate(rollback_on_endpoint_alarms=("error_rate",)),
        instances=Instances(instance_type="ml.g6.12xlarge", initial_count=2, max_count=2),
        base_copies=BaseCopies(count=2),
    )
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    endpoint.add_adapter_alarms("tenant-a-v1")
    reasons = alarm_reasons(stack)
    rollback = nag.alarm_without_topic_reason(drives_rollback=True, on_dashboard=True)
    idle = nag.alarm_without_topic_reason(drives_rollback=False, on_dashboard=True)
    idle_adapter = nag.alarm_without_topic_reason(drives_rollback=False, on_dashboard=False)
    endpoint_alarms = {path: reason for path, reason in reasons.items() if "/Serving/Alarms/" in path}
    adapter_alarms = {path: reason for path, reason in reasons.items() if "/Adapters/" in path}
    assert endpoint_alarms and adapter_alarms
    assert {path.rsplit("/", 1)[1]: reason for path, reason in endpoint_alarms.items()} == {
        "ErrorRate": rollback,
        "LatencyP95": idle,
        "ColdStartShare": idle,
    }
    assert set(adapter_alarms.values()) == {idle_adapter}
    assert "rolls the update back" in rollback and "no rollback watches it" in idle
    assert "dashboard" not in idle_adapter
    assert nag_violations(stack) == []
