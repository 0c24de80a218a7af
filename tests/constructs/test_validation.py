"""Bad configuration fails at synth, naming the construct and the field, with every problem at once.

Each test also shows that nothing was synthesized for the failed endpoint: validation runs
before any child construct is created.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from cdk_adapters import BaseCopies, Instances, Networking
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.components import ComputeRequirements, StartupTimeouts
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.names import MAX_ADAPTER_NAME_LENGTH
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import TAG_IMAGE, build_endpoint, endpoint_props, new_stack

URL = "s3://example-adapters/a/v1.tar.gz"
ENDPOINT_SUBJECT = "MultiAdapterEndpoint 'Test-Stack/Serving'"


def failing_endpoint(**overrides) -> tuple[ConfigurationError, cdk.Stack]:
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack, **overrides))
    return caught.value, stack


def assert_nothing_created(stack: cdk.Stack) -> None:
    failed = stack.node.find_child("Serving")
    assert failed.node.children == [], "validation must run before any resource is created"
    # Not Template.from_stack: synthesizing an empty stack makes CDK warn that the template has no Resources.
    assert not [c for c in stack.node.find_all() if isinstance(c, cdk.CfnResource)]


def fields_of(error: ConfigurationError) -> list[tuple[str, str]]:
    return [(p.subject, p.field) for p in error.problems]


def test_missing_minimum_memory():
    error, stack = failing_endpoint(compute=ComputeRequirements())
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "compute.min_memory_required_in_mb")]
    assert "required" in str(error) and "Test-Stack/Serving" in str(error)
    assert_nothing_created(stack)


@pytest.mark.parametrize("field", ["model_data_download", "container_startup_health_check"])
@pytest.mark.parametrize("seconds", [59, 3601])
def test_startup_timeout_out_of_range(field, seconds):
    error, stack = failing_endpoint(base_copies=BaseCopies(startup=StartupTimeouts(**{field: cdk.Duration.seconds(seconds)})))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, f"base_copies.startup.{field}")]
    assert f"is {seconds} s; SageMaker accepts 60 to 3600 s" in str(error)
    assert_nothing_created(stack)


def test_tag_only_image_without_opt_in():
    error, stack = failing_endpoint(image=ContainerImage.from_uri(TAG_IMAGE))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "image")]
    assert "allow_floating_tag=True" in str(error)
    assert_nothing_created(stack)


def test_tag_only_image_with_explicit_opt_in_is_accepted():
    endpoint = build_endpoint(image=ContainerImage.from_uri(TAG_IMAGE, allow_floating_tag=True))
    assert endpoint.model is not None


def test_digest_uri_without_digest_and_non_ecr_image():
    error, _ = failing_endpoint(image=ContainerImage.from_digest_uri(TAG_IMAGE))
    assert "no @sha256: digest" in str(error)
    error, _ = failing_endpoint(image=ContainerImage.from_digest_uri("vllm/vllm-openai@sha256:" + "0" * 64))
    assert "not an Amazon ECR image URI" in str(error)


def test_missing_dockerfile_for_asset_image(tmp_path):
    error, stack = failing_endpoint(image=ContainerImage.from_asset(tmp_path))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "image")]
    assert "no Dockerfile" in str(error)
    assert_nothing_created(stack)


@pytest.mark.parametrize("rank", [0, 4, 24, 1024])
def test_max_lora_rank_vllm_does_not_accept(rank):
    error, stack = failing_endpoint(vllm=VllmOptions(max_lora_rank=rank))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "vllm.max_lora_rank")]
    assert "1, 8, 16, 32, 64, 128, 256, 320, 512" in str(error)
    assert_nothing_created(stack)


def test_max_cpu_loras_below_max_loras():
    error, stack = failing_endpoint(vllm=VllmOptions(max_loras=8, max_cpu_loras=4))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "vllm.max_cpu_loras")]
    assert "(4) must be >= max_loras (8)" in str(error)
    assert_nothing_created(stack)


def test_tensor_parallel_must_match_accelerators():
    error, _ = failing_endpoint(vllm=VllmOptions(tensor_parallel_size=2))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "vllm.tensor_parallel_size")]


def test_extra_args_may_not_fight_typed_or_managed_flags():
    error, _ = failing_endpoint(vllm=VllmOptions(extra_args=("--max-loras=9", "--port", "9000")))
    messages = [p.message for p in error.problems]
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "vllm.extra_args")] * 2
    assert any("set max_loras instead" in m for m in messages)
    assert any(
        "--port is refused by the serving container (--port: SageMaker always sends requests to port 8080)" in m for m in messages
    )


def test_kms_key_on_local_nvme_instance_type():
    stack = new_stack()
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint(
            stack,
            "Serving",
            **endpoint_props(stack, instances=Instances(instance_type="ml.g5.2xlarge", volume_key=key, volume_size_in_gb=100)),
        )
    assert fields_of(caught.value) == [
        (ENDPOINT_SUBJECT, "instances.volume_key"),
        (ENDPOINT_SUBJECT, "instances.volume_size_in_gb"),
    ]


def test_instance_counts_out_of_order():
    error, _ = failing_endpoint(instances=Instances(initial_count=5, min_count=1, max_count=2))
    assert fields_of(error) == [(ENDPOINT_SUBJECT, "instances.initial_count")]


def test_managed_environment_may_not_be_overridden():
    error, _ = failing_endpoint(environment={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "false", "CDK_ADAPTERS_VLLM_PORT": "1"})
    assert [f for _, f in fields_of(error)] == [
        "environment.VLLM_ALLOW_RUNTIME_LORA_UPDATING",
        "environment.CDK_ADAPTERS_VLLM_PORT",
    ]


def test_several_problems_are_reported_together():
    error, stack = failing_endpoint(
        compute=ComputeRequirements(),
        image=ContainerImage.from_uri(TAG_IMAGE),
        vllm=VllmOptions(max_lora_rank=24, max_loras=8, max_cpu_loras=2),
        base_copies=BaseCopies(startup=StartupTimeouts(model_data_download=cdk.Duration.seconds(10)), count=0),
    )
    assert sorted(field for _, field in fields_of(error)) == sorted(
        [
            "compute.min_memory_required_in_mb",
            "base_copies.startup.model_data_download",
            "image",
            "vllm.max_lora_rank",
            "vllm.max_cpu_loras",
            "base_copies.count",
        ]
    )
    assert "(6 problem(s))" in str(error)
    assert_nothing_created(stack)


# ---------------------------------------------------------------- adapters


def adapter_error(
    endpoint: MultiAdapterEndpoint, name: str, artifact: AdapterArtifact | None = None, **options
) -> ConfigurationError:
    before = len(endpoint.adapters)
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter(name, artifact=artifact or AdapterArtifact.from_s3_url(URL), **options)
    assert len(endpoint.adapters) == before, "a refused adapter must leave nothing behind"
    assert endpoint.node.find_child("Adapters").node.try_find_child(name) is None
    return caught.value


@pytest.mark.parametrize("name", ["has_underscore", "dots.v1", "-leading", "trailing-", "with space", ""])
def test_invalid_adapter_name(name):
    error = adapter_error(build_endpoint(), name)
    assert {p.field for p in error.problems} == {"name"}  # the SageMaker name rules, and version-suffix where it fails too
    assert f"adapter {name!r} of MultiAdapterEndpoint 'Test-Stack/Serving'" in str(error)


def test_too_long_adapter_name():
    name = "a" * (MAX_ADAPTER_NAME_LENGTH - 2) + "-v1"
    error = adapter_error(build_endpoint(), name)
    assert [p.field for p in error.problems] == ["name"]
    assert f"at most {MAX_ADAPTER_NAME_LENGTH} fit" in str(error)


def test_reserved_adapter_name():
    error = adapter_error(build_endpoint(), "Base")
    assert "reserved for the base inference component" in str(error)


def test_duplicate_adapter_name_case_insensitive():
    endpoint = build_endpoint()
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL))
    error = adapter_error(endpoint, "Tenant-A-v1")
    assert [p.field for p in error.problems] == ["name"]
    assert "already added" in str(error)


def test_bad_artifact_urls():
    endpoint = build_endpoint()
    error = adapter_error(endpoint, "tenant-a-v1", AdapterArtifact.from_s3_url("https://example.com/a.tar.gz"))
    assert [p.field for p in error.problems] == ["artifact.url"]
    error = adapter_error(endpoint, "tenant-a-v1", AdapterArtifact.from_s3_url("s3://bucket-name/a.zip"))
    assert ".tar.gz archive" in str(error)


def test_missing_local_archive(tmp_path):
    error = adapter_error(build_endpoint(), "tenant-a-v1", AdapterArtifact.from_archive(tmp_path / "missing.tar.gz"))
    assert [p.field for p in error.problems] == ["artifact.path"]


def test_adapter_name_and_artifact_problems_come_together():
    error = adapter_error(build_endpoint(), "bad_name-v1", AdapterArtifact.from_s3_url("not-a-url"))
    assert sorted(p.field for p in error.problems) == ["artifact.url", "name"]


def test_grant_for_unknown_adapter_fails_synth_naming_construct_field_and_grantee():
    """Checked at synth, not at the call: the adapter may be added after the grant."""
    stack = new_stack()
    endpoint = build_endpoint(stack)
    role = cdk.aws_iam.Role(stack, "Caller", assumed_by=cdk.aws_iam.AccountRootPrincipal())
    endpoint.grant_invoke(role, adapters=["nope"])
    with pytest.raises(Exception) as caught:
        Template.from_stack(stack)
    assert (
        "MultiAdapterEndpoint 'Test-Stack/Serving': grant_invoke.adapters: 'nope' (granted to "
        "'Test-Stack/Caller') is not an adapter or alias of this endpoint"
    ) in str(caught.value)


def test_grant_of_no_adapters_is_refused_not_silently_useless():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL))
    role = cdk.aws_iam.Role(stack, "Caller", assumed_by=cdk.aws_iam.AccountRootPrincipal())
    for nothing in ([], ()):
        with pytest.raises(ConfigurationError) as caught:
            endpoint.grant_invoke(role, adapters=nothing)
        [problem] = caught.value.problems
        assert problem.field == "grant_invoke.adapters"
        assert "leave it out to grant every adapter" in problem.message
    with pytest.raises(ConfigurationError, match="name at least one adapter in a list"):
        endpoint.grant_invoke(role, adapters="tenant-a-v1")  # a bare string is not a list of names
    assert role.node.try_find_child("DefaultPolicy") is None, "nothing was granted"


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("s3://a/a/v1.tar.gz", "bucket 'a' is 1 character(s); S3 bucket names are 3 to 63"),
        ("s3://Example-Adapters/a/v1.tar.gz", "may hold only lower-case letters, digits, dots and hyphens"),
        ("s3://example-adapters", "names no object key after the bucket"),
        ("https://example.com/a.tar.gz", "must start with 's3://'"),
        ("s3://example-adapters/a/v1.zip", "'s3://example-adapters/a/v1.zip' must name a .tar.gz archive"),
    ],
)
def test_artifact_url_messages_say_what_is_wrong_and_quote_the_url(url, text):
    error = adapter_error(build_endpoint(), "tenant-a-v1", AdapterArtifact.from_s3_url(url))
    [problem] = error.problems
    assert problem.field == "artifact.url"
    assert text in problem.message
    assert url in problem.message


def test_more_initial_copies_than_the_instances_hold_is_refused():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(
            stack, base_copies=BaseCopies(count=3), instances=Instances(instance_type="ml.g6.2xlarge")
        )  # one L4 per instance, one GPU per copy
    [problem] = caught.value.problems
    assert problem.field == "base_copies.count"
    assert "a ml.g6.2xlarge holds 1 copies (1 GPU(s), 1 per copy), so instances.initial_count=1 holds 1" in problem.message
    assert_nothing_created(stack)
    build_endpoint(
        new_stack(), base_copies=BaseCopies(count=4), instances=Instances(instance_type="ml.g6.12xlarge")
    )  # four GPUs: fits


def isolated_only_vpc(stack):
    return cdk.aws_ec2.Vpc(
        stack,
        "Vpc",
        nat_gateways=0,
        max_azs=2,
        subnet_configuration=[
            cdk.aws_ec2.SubnetConfiguration(name="isolated", subnet_type=cdk.aws_ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )


def test_isolated_only_vpc_with_the_default_subnets_is_a_library_error():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(stack, networking=Networking(vpc=isolated_only_vpc(stack)))
    (problem,) = caught.value.problems
    assert (problem.subject, problem.field) == ("MultiAdapterEndpoint 'Test-Stack/Serving'", "networking.vpc_subnets")
    assert "this VPC has none (it has isolated subnets)" in problem.message
    assert "SubnetType.PRIVATE_ISOLATED" in problem.message and "S3 gateway endpoint" in problem.message


def test_isolated_subnets_chosen_explicitly_are_used():
    stack = new_stack()
    vpc = isolated_only_vpc(stack)
    vpc.add_gateway_endpoint("S3", service=cdk.aws_ec2.GatewayVpcEndpointAwsService.S3)
    build_endpoint(
        stack,
        networking=Networking(
            vpc=vpc, vpc_subnets=cdk.aws_ec2.SubnetSelection(subnet_type=cdk.aws_ec2.SubnetType.PRIVATE_ISOLATED)
        ),
    )
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    assert model["Properties"]["VpcConfig"]["Subnets"] == [
        {"Ref": stack.get_logical_id(s.node.default_child)} for s in vpc.isolated_subnets
    ]


def test_a_subnet_selection_that_matches_nothing_is_a_library_error():
    stack = new_stack()
    vpc = isolated_only_vpc(stack)
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(stack, networking=Networking(vpc=vpc, vpc_subnets=cdk.aws_ec2.SubnetSelection(subnet_group_name="app")))
    (problem,) = caught.value.problems
    assert problem.field == "networking.vpc_subnets" and problem.message.startswith("selects no subnet of the VPC: ")
    assert "Traceback" not in problem.message and "@jsii" not in problem.message


def test_an_unversioned_name_is_refused_as_the_manifest_refuses_it():
    endpoint = build_endpoint()
    endpoint.add_adapter("support-v1", artifact=AdapterArtifact.from_s3_url(URL))
    error = adapter_error(endpoint, "Support")
    (problem,) = error.problems
    assert (problem.subject, problem.field, problem.rule) == ("adapter 'Support'", "name", "version-suffix")
    assert "(for example 'Support-v2')" in problem.message, "support-v1 is taken, ignoring case"
    from cdk_adapters.gate import check_co_hosted
    from cdk_adapters.gate.checks.co_hosted import CoHostedAdapter

    manifest_gate = check_co_hosted([CoHostedAdapter("support-v1", ()), CoHostedAdapter("Support", ())])
    assert [problem] == manifest_gate


def test_the_version_suffix_ignores_case():
    endpoint = build_endpoint()
    endpoint.add_adapter("Support-V1", artifact=AdapterArtifact.from_s3_url(URL))
    assert list(endpoint.adapters) == ["Support-V1"]


def test_an_unversioned_name_can_be_acknowledged_as_in_a_manifest_row():
    from cdk_adapters.gate import Acknowledgment

    endpoint = build_endpoint()
    reason = "the name is fixed by the tenant's contract"
    endpoint.add_adapter(
        "summary", artifact=AdapterArtifact.from_s3_url(URL), acknowledge=Acknowledgment("version-suffix", reason)
    )
    assert list(endpoint.adapters) == ["summary"]
    for bad, text in (
        (Acknowledgment("rank-limit", reason), "'rank-limit' cannot be acknowledged"),
        (Acknowledgment("version-suffix", "ok"), "an acknowledgment must say why"),
    ):
        error = adapter_error(endpoint, "digest", acknowledge=bad)
        assert any(p.field == "acknowledge" and text in p.message for p in error.problems), str(error)
