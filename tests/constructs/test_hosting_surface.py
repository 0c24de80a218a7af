"""The endpoint's hosting options: SageMaker's own metrics, routing, copy placement and data cache.

Each prop is rendered where SageMaker reads it (the endpoint config, or the base component: never
an adapter component), its default is pinned, each bad value is refused with every problem at
once, and the allowed values are the SageMaker API model's (botocore's, installed offline).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import aws_cdk as cdk
import botocore
import pytest
from aws_cdk.assertions import Template

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.hosting import copy_placement, routing
from cdk_adapters.hosting import sagemaker_metrics as observability
from cdk_adapters.hosting.capacity_reservation import CapacityReservation
from cdk_adapters.hosting.copy_placement import CopyPlacement
from cdk_adapters.hosting.data_capture import DataCapture
from cdk_adapters.hosting.instance_access import SsmAccess
from cdk_adapters.hosting.routing import Routing
from cdk_adapters.hosting.sagemaker_metrics import Observability
from cdk_adapters.monitoring import RequestMetrics
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, endpoint_props, new_stack

SUBJECT = "MultiAdapterEndpoint 'Test-Stack/Serving'"
ADAPTER_URL = "s3://example-adapters/support-en/v1/adapter.tar.gz"
API_MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"


def template_of(**overrides) -> dict:
    endpoint = build_endpoint(**overrides)
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    return Template.from_stack(cdk.Stack.of(endpoint)).to_json()


def endpoint_config(template: dict) -> dict:
    [config] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    return config


def components(template: dict) -> tuple[dict, list[dict]]:
    """(the base component's Specification, the adapter components' Specifications)."""
    specs = [
        r["Properties"]["Specification"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    ]
    [base] = [s for s in specs if "BaseInferenceComponentName" not in s]
    return base, [s for s in specs if "BaseInferenceComponentName" in s]


def refused(**overrides) -> list[tuple[str, str]]:
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack, **overrides))
    assert all(problem.subject == SUBJECT for problem in caught.value.problems)
    assert not [c for c in stack.node.find_all() if isinstance(c, cdk.CfnResource)], "nothing created"
    return [(problem.field, problem.message) for problem in caught.value.problems]


# ------------------------------------------------------------------ the API model's values


def api_shapes() -> dict:
    return json.loads(gzip.decompress(API_MODEL.read_bytes()))["shapes"]


def test_allowed_values_are_the_api_models():
    shapes = api_shapes()
    assert tuple(shapes["RoutingStrategy"]["enum"]) == routing.STRATEGIES
    assert (
        shapes["PrefixAwareRoutingPrefixLength"]["min"],
        shapes["PrefixAwareRoutingPrefixLength"]["max"],
    ) == routing.PREFIX_LENGTH_RANGE
    threshold = shapes["PrefixAwareRoutingConcurrencyThreshold"]
    assert (threshold["min"], threshold["max"]) == routing.CONCURRENCY_THRESHOLD_RANGE
    assert tuple(shapes["InferenceComponentPlacementStrategy"]["enum"]) == copy_placement.STRATEGIES
    assert shapes["AvailabilityZoneBalanceEnforcementMode"]["enum"] == [copy_placement.ENFORCEMENT_MODE]
    imbalance = shapes["AvailabilityZoneBalanceMaxImbalance"]
    assert (imbalance["min"], imbalance["max"]) == copy_placement.MAX_IMBALANCE_RANGE
    frequency_doc = shapes["MetricsConfig"]["members"]["MetricPublishFrequencyInSeconds"]["documentation"]
    assert "Valid values: " + ", ".join(f"<code>{v}</code>" for v in observability.PUBLISH_FREQUENCIES_SECONDS) in frequency_doc
    path = shapes["MetricsEndpointPath"]
    assert path["max"] == observability.METRICS_PATH_MAX_LENGTH
    detailed_doc = shapes["MetricsConfig"]["members"]["EnableDetailedObservability"]["documentation"]
    assert "The default value for new endpoint configurations is <code>True</code>" in detailed_doc
    assert "/metrics</code> on port <code>8080" in detailed_doc


# ------------------------------------------------------------------ observability (MetricsConfig)


def test_default_states_detailed_observability_off_because_emf_carries_the_per_adapter_metrics():
    template = template_of()
    assert endpoint_config(template)["MetricsConfig"] == {"EnableDetailedObservability": False}
    base, adapters = components(template)
    assert "Container" not in base, "nothing to scrape when detailed observability is off"
    assert all(set(spec) == {"BaseInferenceComponentName", "Container"} for spec in adapters)


def test_without_emf_sagemaker_scrapes_the_containers_metrics_instead():
    template = template_of(request_metrics=RequestMetrics(emf=False))
    assert endpoint_config(template)["MetricsConfig"] == {"EnableDetailedObservability": True}
    base, adapters = components(template)
    assert base["Container"] == {"ContainerMetricsConfig": {"MetricsEndpoints": [{"MetricsEndpointPath": "/metrics"}]}}
    assert all(set(spec["Container"]) == {"ArtifactUrl"} for spec in adapters), "adapters carry only their artifact"


def test_every_observability_setting_is_rendered():
    template = template_of(
        observability=Observability(
            detailed_observability=True,
            enhanced_metrics=True,
            publish_frequency_seconds=30,
            container_publish_frequency_seconds=10,
        )
    )
    assert endpoint_config(template)["MetricsConfig"] == {
        "EnableDetailedObservability": True,
        "EnableEnhancedMetrics": True,
        "MetricPublishFrequencyInSeconds": 30,
    }
    base, _ = components(template)
    assert base["Container"]["ContainerMetricsConfig"]["MetricsEndpoints"] == [
        {"MetricsEndpointPath": "/metrics", "MetricPublishFrequencyInSeconds": 10}
    ]


def test_container_block_can_be_left_to_sagemakers_default_path():
    template = template_of(observability=Observability(detailed_observability=True, container_metrics_path=None))
    assert endpoint_config(template)["MetricsConfig"]["EnableDetailedObservability"] is True
    assert "Container" not in components(template)[0]


def test_bad_observability_is_refused_with_every_problem():
    found = refused(
        observability=Observability(
            detailed_observability="yes",  # type: ignore[arg-type]
            enhanced_metrics=1,  # type: ignore[arg-type]
            publish_frequency_seconds=45,
            container_metrics_path="metrics/../x",
            container_publish_frequency_seconds=True,  # type: ignore[arg-type]
        )
    )
    fields = [field for field, _ in found]
    assert fields == [
        "observability.detailed_observability",
        "observability.enhanced_metrics",
        "observability.publish_frequency_seconds",
        "observability.container_publish_frequency_seconds",
        "observability.container_metrics_path",
    ]
    assert "10, 30, 60, 120, 180, 240, 300" in dict(found)["observability.publish_frequency_seconds"]
    assert refused(observability=Observability(container_metrics_path=None, container_publish_frequency_seconds=60)) == [
        ("observability.container_publish_frequency_seconds", "needs container_metrics_path (the endpoint it applies to)")
    ]
    assert refused(observability="on")[0][0] == "observability"


# ------------------------------------------------------------------ routing


def test_routing_default_is_unchanged():
    variant = endpoint_config(template_of())["ProductionVariants"][0]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_random_and_prefix_aware_routing_are_rendered():
    variant = endpoint_config(template_of(routing=Routing(strategy="RANDOM")))["ProductionVariants"][0]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "RANDOM"}
    variant = endpoint_config(template_of(routing=Routing(strategy="PREFIX_AWARE", prefix_length=4096, concurrency_threshold=8)))[
        "ProductionVariants"
    ][0]
    assert variant["RoutingConfig"] == {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {"PrefixLength": 4096, "ConcurrencyThreshold": 8},
    }


def test_kv_aware_only_with_an_acknowledgment():
    assert refused(routing=Routing(strategy="KV_AWARE"))[0][0] == "routing.kv_aware_acknowledgment"
    reason = "our container is vLLM with prefix caching; verified against the SageMaker vLLM DLC behaviour"
    variant = endpoint_config(template_of(routing=Routing(strategy="KV_AWARE", kv_aware_acknowledgment=reason)))[
        "ProductionVariants"
    ][0]
    assert variant["RoutingConfig"] == {"RoutingStrategy": "KV_AWARE"}


def test_bad_routing_is_refused_with_every_problem():
    assert [f for f, _ in refused(routing=Routing(strategy="PREFIX_AWARE"))] == [
        "routing.prefix_length",
        "routing.concurrency_threshold",
    ]
    found = refused(routing=Routing(strategy="PREFIX_AWARE", prefix_length=512, concurrency_threshold=2000))
    assert found == [
        ("routing.prefix_length", "must be an integer from 1024 to 65536, got 512"),
        ("routing.concurrency_threshold", "must be an integer from 1 to 1024, got 2000"),
    ]
    found = refused(routing=Routing(strategy="ROUND_ROBIN", prefix_length=2048, kv_aware_acknowledgment="x" * 30))
    assert [f for f, _ in found] == ["routing.strategy", "routing.prefix_length", "routing.kv_aware_acknowledgment"]


# ------------------------------------------------------------------ copy placement and data cache


def test_placement_and_cache_default_to_sagemakers():
    base, _ = components(template_of())
    assert "SchedulingConfig" not in base and "DataCacheConfig" not in base


def test_copy_placement_and_data_cache_are_on_the_base_component_only():
    template = template_of(
        base_copies=BaseCopies(placement=CopyPlacement(strategy="SPREAD", max_zone_imbalance=1)),
        instances=Instances(data_cache=True),
    )
    base, adapters = components(template)
    assert base["SchedulingConfig"] == {
        "PlacementStrategy": "SPREAD",
        "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 1},
    }
    assert base["DataCacheConfig"] == {"EnableCaching": True}
    assert adapters and all("SchedulingConfig" not in s and "DataCacheConfig" not in s for s in adapters)
    base, _ = components(
        template_of(base_copies=BaseCopies(placement=CopyPlacement(strategy="BINPACK")), instances=Instances(data_cache=False))
    )
    assert base["SchedulingConfig"]["PlacementStrategy"] == "BINPACK"
    assert base["SchedulingConfig"]["AvailabilityZoneBalance"] == {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 0}
    assert base["DataCacheConfig"] == {"EnableCaching": False}


def test_bad_placement_and_cache_are_refused_with_every_problem():
    found = refused(
        base_copies=BaseCopies(placement=CopyPlacement(strategy="PACK", max_zone_imbalance=101)),
        instances=Instances(data_cache="on"),
    )
    assert [f for f, _ in found] == [
        "base_copies.placement.strategy",
        "base_copies.placement.max_zone_imbalance",
        "instances.data_cache",
    ]
    assert "SPREAD, BINPACK" in found[0][1]


# ------------------------------------------------------------------ everything on: cfn-lint and the nag packs

RESERVATION_ARN = "arn:aws:sagemaker:us-east-1:123456789012:reservation/ml-g6-12xlarge-prod"

EVERYTHING_ON = {
    "instances": Instances(
        instance_type="ml.g6.12xlarge",
        initial_count=2,
        min_count=2,
        max_count=4,
        data_cache=True,
        capacity_reservation=CapacityReservation(RESERVATION_ARN),
        ssm_access=SsmAccess("incident response: inspect GPU memory of a stuck copy in place"),
    ),
    "base_copies": BaseCopies(count=2, placement=CopyPlacement(strategy="SPREAD", max_zone_imbalance=1)),
    "observability": Observability(
        detailed_observability=True, enhanced_metrics=True, publish_frequency_seconds=30, container_publish_frequency_seconds=30
    ),
    "routing": Routing(strategy="PREFIX_AWARE", prefix_length=2048, concurrency_threshold=4),
}


def test_everything_on_is_cfn_lint_and_nag_clean(tmp_path):
    from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Hosting-Everything-On")
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3

    bucket = s3.Bucket.from_bucket_name(stack, "Capture", "example-capture")
    key = kms.Key.from_key_arn(stack, "CaptureKey", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    capture = DataCapture(bucket=bucket, sampling_percentage=5, encryption_key=key)
    endpoint = build_endpoint(stack, data_capture=capture, **EVERYTHING_ON)
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_cloudformations_schema_does_not_list_kv_aware_yet(tmp_path):
    """Why KV_AWARE needs an acknowledgment beyond the container question: the SageMaker API lists
    it, but the CloudFormation schema cfn-lint ships does not, so a deploy may be refused."""
    from tests.constructs.test_nag_lint_composition import cfn_lint, synth_to

    app = cdk.App(outdir=str(tmp_path))
    reason = "our container is vLLM with prefix caching; verified against the SageMaker vLLM DLC behaviour"
    build_endpoint(cdk.Stack(app, "Hosting-Kv-Aware"), routing=Routing(strategy="KV_AWARE", kv_aware_acknowledgment=reason))
    result = cfn_lint(synth_to(app))
    assert result.returncode != 0 and "'KV_AWARE' is not one of" in result.stdout, result.stdout


def test_example_app_names_malformed_hosting_blocks_in_cdk_json():
    import app as example_app
    from tests.constructs.conftest import app_context

    settings = {"routing": {"stategy": "RANDOM"}, "observability": ["on"], "copy_placement": {"strategy": "SPREAD"}}
    found = example_app.hosting_settings_problems("prod", settings)
    assert [(p.subject, p.field) for p in found] == [
        ("cdk.json", "context.environments.prod.routing"),
        ("cdk.json", "context.environments.prod.observability"),
    ]
    assert "stategy" in found[0].message
    context = app_context("prod")
    context["environments"]["prod"]["copy_placement"] = {"strategy": "PACK"}
    with pytest.raises(ConfigurationError) as caught:
        example_app.build(cdk.App(context=context))
    assert any(p.field == "base_copies.placement.strategy" for p in caught.value.problems)


# ------------------------------------------------------------------ SSM access


def test_ssm_access_is_off_unless_a_reason_is_given():
    assert "EnableSSMAccess" not in endpoint_config(template_of())["ProductionVariants"][0]
    template = template_of(
        instances=Instances(ssm_access=SsmAccess("incident response: inspect GPU memory of a stuck copy in place"))
    )
    assert endpoint_config(template)["ProductionVariants"][0]["EnableSSMAccess"] is True
    assert [f for f, _ in refused(instances=Instances(ssm_access=SsmAccess("debug")))] == ["instances.ssm_access.reason"]
    assert [f for f, _ in refused(instances=Instances(ssm_access=True))] == ["instances.ssm_access"]


# ------------------------------------------------------------------ data capture


def test_data_capture_is_off_by_default_and_rendered_with_its_write_grant():
    assert "DataCaptureConfig" not in endpoint_config(template_of())
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3

    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Capture", "example-capture")
    key = kms.Key.from_key_arn(stack, "CaptureKey", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    endpoint = build_endpoint(
        stack, data_capture=DataCapture(bucket=bucket, sampling_percentage=10, encryption_key=key, mode="Input")
    )
    template = Template.from_stack(cdk.Stack.of(endpoint)).to_json()
    assert endpoint_config(template)["DataCaptureConfig"] == {
        "EnableCapture": True,
        "InitialSamplingPercentage": 10,
        "DestinationS3Uri": "s3://example-capture/data-capture",
        "KmsKeyId": key.key_arn,
        "CaptureOptions": [{"CaptureMode": "Input"}],
        "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
    }
    statements = [
        st
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st.get("Sid", "").endswith("DataCapture")
    ]
    assert [st["Sid"] for st in statements] == ["WriteDataCapture", "EncryptDataCapture"]
    assert statements[0]["Action"] == "s3:PutObject"
    assert "data-capture/*" in json.dumps(statements[0]["Resource"])
    both = DataCapture(bucket=bucket, sampling_percentage=1).render()
    assert [o.capture_mode for o in both.capture_options] == ["Input", "Output"]


def test_bad_data_capture_is_refused_with_every_problem():
    from aws_cdk import aws_s3 as s3

    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Capture", "example-capture")
    capture = DataCapture(bucket=bucket, sampling_percentage=101, mode="Both", prefix="/capture", json_content_types=())
    problems = capture.problems(SUBJECT)
    assert [p.field for p in problems] == [
        "data_capture.sampling_percentage",
        "data_capture.mode",
        "data_capture.prefix",
        "data_capture.json_content_types",
    ]
    assert [f for f, _ in refused(data_capture="s3://x")] == ["data_capture"]


def test_capture_modes_are_the_api_models():
    from cdk_adapters.hosting import data_capture

    shapes = api_shapes()
    assert tuple(shapes["CaptureMode"]["enum"]) == data_capture.CAPTURE_MODES
    assert (shapes["SamplingPercentage"]["min"], shapes["SamplingPercentage"]["max"]) == data_capture.SAMPLING_RANGE


# ------------------------------------------------------------------ capacity reservation


def test_capacity_reservation_is_rendered_with_the_only_preference():
    assert "CapacityReservationConfig" not in endpoint_config(template_of())["ProductionVariants"][0]
    variant = endpoint_config(template_of(instances=Instances(capacity_reservation=CapacityReservation(RESERVATION_ARN))))[
        "ProductionVariants"
    ][0]
    assert variant["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": RESERVATION_ARN,
    }


def test_bad_reservation_arn_is_refused():
    for arn in ("reservation/abc", "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-1", 42):
        assert [f for f, _ in refused(instances=Instances(capacity_reservation=CapacityReservation(arn)))] == [
            "instances.capacity_reservation.ml_reservation_arn"
        ]
    assert [f for f, _ in refused(instances=Instances(capacity_reservation=RESERVATION_ARN))] == [
        "instances.capacity_reservation"
    ]


def test_reservation_values_are_the_api_models():
    import re

    from cdk_adapters.hosting import capacity_reservation

    shapes = api_shapes()
    assert shapes["CapacityReservationPreference"]["enum"] == [capacity_reservation.PREFERENCE]
    arn = shapes["MlReservationArn"]
    assert (arn["min"], arn["max"]) == capacity_reservation.ARN_LENGTH_RANGE
    assert re.compile(arn["pattern"]).pattern == capacity_reservation.ARN_PATTERN.pattern
