"""What MultiAdapterEndpoint synthesizes, property by property (in-process, no CLI)."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_adapters import BaseCopies, BaseModelIdentity, Instances, Networking
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.contract import adapter_identity, request_metrics, serving_env
from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_PATTERN
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.serving_image import INFERENCE_AMI_VERSION
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE, build_endpoint, new_stack, real_archives

ADAPTER_URL = "s3://example-adapters/support-en/v1/adapter.tar.gz"


def only(resources: dict) -> dict:
    assert len(resources) == 1, resources.keys()
    return next(iter(resources.values()))


def only_statement(policy: dict) -> dict:
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert len(statements) == 1, statements
    return statements[0]


def test_endpoint_config_can_host_inference_components():
    endpoint = build_endpoint()
    template = Template.from_stack(cdk.Stack.of(endpoint))
    config = only(template.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    variant = config["ProductionVariants"][0]
    assert "ModelName" not in variant
    assert "ExecutionRoleArn" in config
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert variant["InferenceAmiVersion"] == INFERENCE_AMI_VERSION
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1200
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 1200
    assert "EndpointConfigName" not in config, "create-only resource must keep a generated name"
    model = only(template.find_resources("AWS::SageMaker::Model"))["Properties"]
    assert "ModelName" not in model


def test_scaling_and_instance_settings_are_rendered():
    endpoint = build_endpoint(instances=Instances(instance_type="ml.g6.12xlarge", initial_count=2, min_count=1, max_count=4))
    variant = only(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::EndpointConfig"))["Properties"][
        "ProductionVariants"
    ][0]
    assert variant["InstanceType"] == "ml.g6.12xlarge"
    assert variant["InitialInstanceCount"] == 2
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 4}


def volume_keys(template: Template) -> dict:
    """The keys other than the log groups' (which every endpoint creates unless given one)."""
    return {
        k: r
        for k, r in template.find_resources("AWS::KMS::Key").items()
        if "log groups" not in r["Properties"].get("Description", "")
    }


def test_local_nvme_instance_gets_no_kms_key_but_ebs_instance_gets_a_rotating_key():
    nvme = Template.from_stack(cdk.Stack.of(build_endpoint(instances=Instances(instance_type="ml.g6.2xlarge"))))
    assert "KmsKeyId" not in only(nvme.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    assert volume_keys(nvme) == {}

    ebs = Template.from_stack(
        cdk.Stack.of(build_endpoint(instances=Instances(instance_type="ml.p3.2xlarge", volume_size_in_gb=200)))
    )
    config = only(ebs.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    [(key_logical_id, key)] = volume_keys(ebs).items()
    assert config["KmsKeyId"] == {"Fn::GetAtt": [key_logical_id, "Arn"]}
    assert config["ProductionVariants"][0]["VolumeSizeInGB"] == 200
    assert key["Properties"]["EnableKeyRotation"] is True


def test_given_volume_key_is_used_instead_of_creating_one():
    stack = new_stack()
    key = kms.Key(stack, "OwnKey", enable_key_rotation=True)
    build_endpoint(stack, instances=Instances(instance_type="ml.p3.2xlarge", volume_key=key))
    template = Template.from_stack(stack)
    assert list(volume_keys(template)) == [stack.get_logical_id(key.node.default_child)]
    config = only(template.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    assert config["KmsKeyId"]["Fn::GetAtt"][0].startswith("OwnKey")


def test_model_container_environment_follows_the_serving_contract():
    endpoint = build_endpoint(
        vllm=VllmOptions(
            max_loras=3,
            max_cpu_loras=6,
            max_lora_rank=32,
            max_model_len=4096,
            gpu_memory_utilization=0.85,
            dtype="bfloat16",
            limit_mm_per_prompt={"image": 2},
            enforce_eager=False,
            extra_args=("--enable-prefix-caching",),
        ),
        base_model=BaseModelIdentity(model_id="org/base", revision="abc123"),
    )
    model = only(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::Model"))["Properties"]
    env = model["PrimaryContainer"]["Environment"]
    assert env == {
        serving_env.RUNTIME_LORA_UPDATING: "true",
        "CDK_ADAPTERS_VLLM_MAX_LORAS": "3",
        "CDK_ADAPTERS_VLLM_MAX_CPU_LORAS": "6",
        "CDK_ADAPTERS_VLLM_MAX_LORA_RANK": "32",
        "CDK_ADAPTERS_VLLM_MAX_MODEL_LEN": "4096",
        "CDK_ADAPTERS_VLLM_GPU_MEMORY_UTILIZATION": "0.85",
        "CDK_ADAPTERS_VLLM_DTYPE": "bfloat16",
        "CDK_ADAPTERS_VLLM_LIMIT_MM_PER_PROMPT": '{"image":2}',
        "CDK_ADAPTERS_VLLM_ENFORCE_EAGER": "false",
        serving_env.EXTRA_ARGS: '["--enable-prefix-caching"]',
        serving_env.ALLOW_BASE_MODEL: "false",
        serving_env.ALLOW_VISION_MODULES: "false",
        serving_env.BASE_MODEL_ID: "org/base",
        serving_env.BASE_MODEL_REVISION: "abc123",
        # The request metrics (EMF) with their defaults, rendered by the contract module.
        **request_metrics.environment(endpoint_name=endpoint.endpoint_name),
        # The component prefix, so the container reduces component names to adapters (adapter_identity).
        **adapter_identity.environment(endpoint.component_prefix),
    }
    assert model["EnableNetworkIsolation"] is True
    assert model["PrimaryContainer"]["Image"] == DIGEST_IMAGE


def test_vision_modules_and_base_access_are_opt_in_flags_for_the_container():
    endpoint = build_endpoint(allow_base_model=True, allow_vision_modules=True)
    model = only(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::Model"))["Properties"]
    env = model["PrimaryContainer"]["Environment"]
    assert env[serving_env.ALLOW_BASE_MODEL] == "true"
    assert env[serving_env.ALLOW_VISION_MODULES] == "true"
    assert model["PrimaryContainer"]["ModelDataSource"] == {
        "S3DataSource": {"S3Uri": "s3://example-models/base/tiny-llama/", "S3DataType": "S3Prefix", "CompressionType": "None"}
    }


def test_base_model_access_is_explicit_opt_in():
    endpoint = build_endpoint(allow_base_model=True)
    env = only(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::Model"))["Properties"][
        "PrimaryContainer"
    ]["Environment"]
    assert env[serving_env.ALLOW_BASE_MODEL] == "true"


def test_model_archive_uses_gzip_object():
    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Weights", "weights-bucket")
    build_endpoint(stack, model_data=ModelData.from_s3_archive(bucket, "tiny/model.tar.gz"))
    template = Template.from_stack(stack)
    model = only(template.find_resources("AWS::SageMaker::Model"))["Properties"]
    assert model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"] == {
        "S3Uri": "s3://weights-bucket/tiny/model.tar.gz",
        "S3DataType": "S3Object",
        "CompressionType": "Gzip",
    }


def test_base_component_has_compute_startup_and_copies():
    endpoint = build_endpoint(
        compute=ComputeRequirements(min_memory_required_in_mb=20000, accelerator_devices=1, cpu_cores=4),
        vllm=VllmOptions(tensor_parallel_size=1),
        base_copies=BaseCopies(count=2),
        instances=Instances(instance_type="ml.g6.12xlarge"),
    )
    template = Template.from_stack(cdk.Stack.of(endpoint))
    base = template.find_resources("AWS::SageMaker::InferenceComponent", {"Properties": {"VariantName": "AllTraffic"}})
    properties = only(base)["Properties"]
    assert properties["InferenceComponentName"] == endpoint.base_component_name
    assert properties["RuntimeConfig"] == {"CopyCount": 2}
    spec = properties["Specification"]
    assert spec["ComputeResourceRequirements"] == {
        "MinMemoryRequiredInMb": 20000,
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 4,
    }
    assert spec["StartupParameters"] == {
        "ModelDataDownloadTimeoutInSeconds": 1200,
        "ContainerStartupHealthCheckTimeoutInSeconds": 1200,
    }
    assert spec["ModelName"] == {"Fn::GetAtt": [next(iter(template.find_resources("AWS::SageMaker::Model"))), "ModelName"]}


def test_adapter_component_carries_only_what_sagemaker_allows_and_depends_on_base():
    endpoint = build_endpoint()
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    template = Template.from_stack(cdk.Stack.of(endpoint))
    components = template.find_resources("AWS::SageMaker::InferenceComponent")
    base_id = next(k for k, v in components.items() if "VariantName" in v["Properties"])
    _adapter_id, adapter = next((k, v) for k, v in components.items() if k != base_id)
    properties = adapter["Properties"]
    assert set(properties) == {"EndpointName", "InferenceComponentName", "Specification"}
    assert properties["Specification"] == {
        "BaseInferenceComponentName": endpoint.base_component_name,
        "Container": {"ArtifactUrl": ADAPTER_URL},
    }
    assert base_id in adapter["DependsOn"]
    assert properties["InferenceComponentName"] == f"{endpoint.prefix}-support-en-v1"


def test_component_names_are_valid_deterministic_and_unique_per_endpoint():
    names_seen = []
    for _ in range(2):
        endpoint = build_endpoint(new_stack("A-Very-Long-Stack-Name-For-Production-Serving"))
        component = endpoint.add_adapter("a" * 36 + "-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
        names_seen.append((endpoint.endpoint_name, endpoint.base_component_name, component.inference_component_name))
    assert names_seen[0] == names_seen[1], "names must not change between synths"
    for name in names_seen[0]:
        assert len(name) <= 63 and SAGEMAKER_NAME_PATTERN.match(name), name
    other = build_endpoint(new_stack("A-Very-Long-Stack-Name-For-Production-Serving-2"))
    assert other.endpoint_name != names_seen[0][0]


def test_execution_role_is_least_privilege():
    endpoint = build_endpoint()
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    template = Template.from_stack(cdk.Stack.of(endpoint))
    role = only(template.find_resources("AWS::IAM::Role"))["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    statements = [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    star = [s for s in statements if s["Resource"] == "*"]
    assert {json.dumps(s["Action"]) for s in star} == {'"ecr:GetAuthorizationToken"', '"cloudwatch:PutMetricData"'}
    metrics = next(s for s in star if s["Action"] == "cloudwatch:PutMetricData")
    assert metrics["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents"]}
    }
    pull = next(s for s in statements if s.get("Sid") == "PullServingImage")
    assert pull["Resource"]["Fn::Join"][1][-1] == ":ecr:us-east-1:123456789012:repository/cdk-adapters-vllm"
    rendered = json.dumps(statements)
    assert "s3:*" not in rendered and '"sagemaker:' not in rendered
    logs = next(s for s in statements if s.get("Sid") == "WriteOwnLogs")
    prefix = "arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:"
    groups = (
        f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}",
        f"/aws/sagemaker/InferenceComponents/{endpoint.base_component_name}",
        f"/cdk-adapters/capture/{endpoint.endpoint_name}",
    )
    assert sorted(flatten_reference(r) for r in logs["Resource"]) == sorted(
        prefix + group + suffix for group in groups for suffix in ("", ":*")
    )
    # Adapters are read by location: one statement for the declared prefix, none per adapter.
    assert not [s for s in statements if "support-en" in json.dumps(s)]
    [location_read] = [s for s in statements if "example-adapters" in json.dumps(s)]
    assert location_read["Action"] == "s3:GetObject"
    assert flatten_reference(location_read["Resource"]) == "arn:<AWS::Partition>:s3:::example-adapters/*"


def test_local_archive_adapter_is_uploaded_under_a_tar_gz_key(tmp_path, zoo):
    """SageMaker requires ArtifactUrl to end in .tar.gz; a plain CDK Asset would end in .gz."""
    (archive,) = real_archives(zoo, tmp_path / "archives", 1)
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Local-Archive")
    endpoint = build_endpoint(stack)
    component = endpoint.add_adapter("local-one-v1", artifact=AdapterArtifact.from_archive(archive))
    url = stack.resolve(component.artifact_url)["Fn::Sub"]
    match = re.fullmatch(r"s3://cdk-hnb659fds-assets-\$\{AWS::AccountId\}-\$\{AWS::Region\}/([0-9a-f]{64})\.tar\.gz", url)
    assert match, url
    content_hash = match[1]
    app.synth()
    files = json.loads((tmp_path / "out" / "Local-Archive.assets.json").read_text())["files"]
    entry = next(e for e in files.values() if e["source"]["path"].startswith(f"asset.{content_hash}"))
    assert only(entry["destinations"])["objectKey"] == f"{content_hash}.tar.gz"
    assert (tmp_path / "out" / entry["source"]["path"]).read_bytes() == archive.read_bytes()
    template = json.loads((tmp_path / "out" / "Local-Archive.template.json").read_text())
    read = next(
        r for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Policy" and "localarchivepolicy" in k.lower()
    )
    statement = only_statement(read)
    assert statement["Action"] == "s3:GetObject"
    assert json.dumps(statement["Resource"]).endswith(f'"/{content_hash}.tar.gz"]]}}'), "the exact object, no wildcard"


def test_same_archive_bytes_give_the_same_key(tmp_path, zoo):
    urls = []
    for copy in ("a", "b"):
        archive = tmp_path / copy / "adapter.tar.gz"
        archive.parent.mkdir()
        package_adapter(zoo.adapter("good"), archive)
        stack = new_stack()
        component = build_endpoint(stack).add_adapter("local-one-v1", artifact=AdapterArtifact.from_archive(archive))
        urls.append(stack.resolve(component.artifact_url))
    assert urls[0] == urls[1]


def test_image_asset_is_built_from_container_dockerfile_with_repo_root_context(tmp_path):
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    stack = new_stack()
    build_endpoint(stack, image=ContainerImage.from_asset(tmp_path))
    template = Template.from_stack(stack)
    model = only(template.find_resources("AWS::SageMaker::Model"))["Properties"]
    assert "container-assets" in json.dumps(model["PrimaryContainer"]["Image"])
    pull = next(
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "PullServingImage"
    )
    assert "container-assets" in json.dumps(pull["Resource"])
    asset = cdk.Stack.of(stack).node.find_all()
    docker_assets = [c for c in asset if c.__class__.__name__ == "DockerImageAsset"]
    assert len(docker_assets) == 1


def test_discovery_publishes_the_record_and_the_naming_rule_not_a_list():
    endpoint = build_endpoint(allow_base_model=True)
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    endpoint.add_adapter("Support-DE-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL.replace("-en", "-de")))
    template = Template.from_stack(cdk.Stack.of(endpoint))
    outputs = {key.removeprefix("Serving")[:-8]: value["Value"] for key, value in template.find_outputs("*").items()}
    assert set(outputs) == {"EndpointName", "BaseInferenceComponentName", "AdapterComponentPrefix", "DiscoveryParameterName"}
    assert outputs["BaseInferenceComponentName"] == endpoint.base_component_name
    assert outputs["AdapterComponentPrefix"] == f"{endpoint.prefix}-"
    parameter = only(template.find_resources("AWS::SSM::Parameter"))["Properties"]
    assert parameter["Name"] == outputs["DiscoveryParameterName"] == f"/cdk-adapters/{endpoint.prefix}/inference-components"
    assert parameter["Tier"] == "Standard"
    record = DiscoveryRecord.from_json(parameter["Value"])
    assert record == endpoint.discovery_record()
    assert (record.endpoint_name, record.base_inference_component_name) == (endpoint.endpoint_name, endpoint.base_component_name)
    assert record.allow_base_model is True
    # The rule reproduces every component name the construct created, case-insensitively.
    assert (
        {name: record.component_name(name) for name in endpoint.adapters}
        == endpoint.adapter_component_names()
        == {
            "support-en-v1": f"{endpoint.prefix}-support-en-v1",
            "Support-DE-v1": f"{endpoint.prefix}-support-de-v1",
        }
    )


def test_grant_invoke_is_scoped_to_endpoint_and_named_components():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    endpoint.add_adapter("support-de-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(caller, adapters=["support-en-v1"])
    template = Template.from_stack(stack)
    policy = next(p for k, p in template.find_resources("AWS::IAM::Policy").items() if k.startswith("CallerDefaultPolicy"))
    statement = only_statement(policy)
    assert statement["Action"] == ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
    resources = [json.dumps(r) for r in statement["Resource"]]
    assert len(resources) == 2
    assert any(f":endpoint/{endpoint.endpoint_name}" in r for r in resources)
    assert any(f":inference-component/{endpoint.prefix}-support-en-v1" in r for r in resources)
    assert not any("support-de" in r for r in resources)


def test_grant_invoke_all_uses_this_endpoints_name_pattern_only():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(caller)
    template = Template.from_stack(stack)
    policy = next(p for k, p in template.find_resources("AWS::IAM::Policy").items() if k.startswith("CallerDefaultPolicy"))

    def arn(resource: str) -> dict:
        return {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":sagemaker:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    resource,
                ],
            ]
        }

    # Exactly one statement, exactly these two resources: this endpoint and its own components' names.
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert [statement.pop("Sid").startswith("InvokeAdapters") for statement in statements] == [True]
    assert statements == [
        {
            "Action": ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
            "Effect": "Allow",
            "Resource": [arn(f":endpoint/{endpoint.endpoint_name}"), arn(f":inference-component/{endpoint.prefix}-*")],
        }
    ]


def test_the_published_record_does_not_grow_with_the_adapter_count():
    records = []
    for count in (1, 60):
        endpoint = build_endpoint(new_stack())
        for index in range(count):
            endpoint.add_adapter(f"tenant-{index}-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
        (parameter,) = Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SSM::Parameter").values()
        records.append(parameter["Properties"]["Value"])
    assert records[0] == records[1]  # 1 adapter or 60: the same value (the stacks' names are the same too)


def test_given_role_is_used_and_no_role_is_created():
    stack = new_stack()
    role = iam.Role.from_role_arn(stack, "Given", "arn:aws:iam::123456789012:role/serving")
    endpoint = build_endpoint(stack, role=role)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::IAM::Role", 0)
    config = only(template.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    assert config["ExecutionRoleArn"] == "arn:aws:iam::123456789012:role/serving"
    assert endpoint.role is role
    policy = only(template.find_resources("AWS::IAM::Policy"))
    assert policy["Properties"]["Roles"] == ["serving"]


def test_vpc_places_model_and_config_in_private_subnets_with_a_fresh_security_group():
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    build_endpoint(stack, networking=Networking(vpc=vpc))
    template = Template.from_stack(stack)
    model = only(template.find_resources("AWS::SageMaker::Model"))["Properties"]
    config = only(template.find_resources("AWS::SageMaker::EndpointConfig"))["Properties"]
    assert model["VpcConfig"] == config["VpcConfig"]
    assert len(model["VpcConfig"]["Subnets"]) == 2
    assert all("PrivateSubnet" in s["Ref"] for s in model["VpcConfig"]["Subnets"])
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    assert len(groups) == 1 and "SecurityGroupIngress" not in only(groups)["Properties"]
    statements = [
        s for p in template.find_resources("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    sids = {s.get("Sid") for s in statements}
    assert {"CreateInterfacesInOwnSubnets", "ManageInterfacesInOwnVpc", "DescribeVpc"} <= sids


ADAPTER_METRICS = {
    "metric_invocations": ("Invocations", "Sum"),
    "metric_invocation_4xx_errors": ("Invocation4XXErrors", "Sum"),
    "metric_invocation_5xx_errors": ("Invocation5XXErrors", "Sum"),
    "metric_model_latency": ("ModelLatency", "p90"),
    "metric_overhead_latency": ("OverheadLatency", "p90"),
}
BASE_ONLY_METRICS = {
    "metric_invocations_per_copy": ("AWS/SageMaker", "InvocationsPerCopy", "Sum"),
    "metric_no_capacity_invocation_failures": ("AWS/SageMaker", "NoCapacityInvocationFailures", "Sum"),
    "metric_gpu_utilization": ("/aws/sagemaker/InferenceComponents", "GPUUtilizationNormalized", "Average"),
    "metric_gpu_memory_utilization": ("/aws/sagemaker/InferenceComponents", "GPUMemoryUtilizationNormalized", "Average"),
    "metric_cpu_utilization": ("/aws/sagemaker/InferenceComponents", "CPUUtilizationNormalized", "Average"),
    "metric_memory_utilization": ("/aws/sagemaker/InferenceComponents", "MemoryUtilizationNormalized", "Average"),
}


def rendered_metric(metric: cloudwatch.Metric) -> dict:
    """The metric as an alarm renders it into the template."""
    stack = new_stack("Metric-Render")
    metric.create_alarm(stack, "Alarm", threshold=1, evaluation_periods=1)
    properties = only(Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm"))["Properties"]
    statistic = properties.get("Statistic") or properties.get("ExtendedStatistic")
    return {
        "namespace": properties["Namespace"],
        "name": properties["MetricName"],
        "dimensions": properties["Dimensions"],
        "statistic": statistic,
        "period": properties["Period"],
    }


@pytest.mark.parametrize("method", sorted(ADAPTER_METRICS))
def test_every_component_has_the_invocation_metrics_sagemaker_publishes(method):
    endpoint = build_endpoint()
    adapter = endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    name, statistic = ADAPTER_METRICS[method]
    for component in (adapter, endpoint.base_component):
        assert rendered_metric(getattr(component, method)()) == {
            "namespace": "AWS/SageMaker",
            "name": name,
            "dimensions": [{"Name": "InferenceComponentName", "Value": component.inference_component_name}],
            "statistic": statistic,
            "period": 300,
        }


@pytest.mark.parametrize("method", sorted(BASE_ONLY_METRICS))
def test_base_component_has_copy_capacity_and_utilization_metrics(method):
    endpoint = build_endpoint()
    namespace, name, statistic = BASE_ONLY_METRICS[method]
    assert rendered_metric(getattr(endpoint.base_component, method)()) == {
        "namespace": namespace,
        "name": name,
        "dimensions": [{"Name": "InferenceComponentName", "Value": endpoint.base_component_name}],
        "statistic": statistic,
        "period": 300,
    }


def test_metric_options_override_the_defaults():
    endpoint = build_endpoint()
    adapter = endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    rendered = rendered_metric(adapter.metric_model_latency(statistic="p99", period=cdk.Duration.minutes(1)))
    assert (rendered["statistic"], rendered["period"]) == ("p99", 60)


def test_endpoint_metric_picks_the_component_and_refuses_unknown_adapters():
    endpoint = build_endpoint()
    adapter = endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    assert endpoint.metric("ModelLatency", adapter="Support-EN-v1").dimensions == {
        "InferenceComponentName": adapter.inference_component_name
    }
    assert endpoint.metric("Invocations").dimensions == {"InferenceComponentName": endpoint.base_component_name}
    with pytest.raises(ConfigurationError, match="'support-de-v1' is not an adapter of this endpoint") as caught:
        endpoint.metric("Invocations", adapter="support-de-v1")
    assert [(p.subject, p.field) for p in caught.value.problems] == [("MultiAdapterEndpoint 'Test-Stack/Serving'", "adapter")]


@pytest.mark.parametrize("uri", [DIGEST_IMAGE])
def test_digest_image_is_pinned_verbatim(uri):
    endpoint = build_endpoint(image=ContainerImage.from_digest_uri(uri))
    model = only(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::Model"))["Properties"]
    assert model["PrimaryContainer"]["Image"] == uri
