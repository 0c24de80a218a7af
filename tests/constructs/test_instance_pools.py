"""Instance pools: a variant that may launch 2 to 5 instance types in priority order, the
capacity-provisioning timeout, and the base component's specification per type.

Rendered where SageMaker reads them (the variant; the base component, never an adapter), defaults
pinned, every refusal at once, the ranges the SageMaker API model's (botocore's, read offline), and
the one-type path unchanged.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import aws_cdk as cdk
import botocore
import pytest

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.capacity_reservation import CapacityReservation
from cdk_adapters.hosting.compute import ComputeRequirements
from cdk_adapters.hosting.copy_placement import CopyPlacement
from cdk_adapters.hosting.instance_pools import POOL_COUNT_RANGE, PROVISION_TIMEOUT_RANGE_SECONDS, InstancePool
from cdk_adapters.hosting.sagemaker_metrics import Observability
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, new_stack
from tests.constructs.test_hosting_surface import ADAPTER_URL, SUBJECT, endpoint_config, refused, template_of

API_MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
G6_THEN_G5 = [InstancePool(instance_type="ml.g6.2xlarge"), InstancePool(instance_type="ml.g5.2xlarge")]


def base_component(template: dict) -> dict:
    [base] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
        and "BaseInferenceComponentName" not in r["Properties"].get("Specification", {})
    ]
    return base


def test_ranges_are_the_api_models():
    shapes = json.loads(gzip.decompress(API_MODEL.read_bytes()))["shapes"]
    assert shapes["InstancePoolList"]["max"] == POOL_COUNT_RANGE[1]
    assert shapes["InferenceComponentSpecificationList"]["max"] == POOL_COUNT_RANGE[1]
    timeout = shapes["VariantInstanceProvisionTimeoutInSeconds"]
    assert (timeout["min"], timeout["max"]) == PROVISION_TIMEOUT_RANGE_SECONDS
    assert (shapes["InstancePoolPriority"]["min"], shapes["InstancePoolPriority"]["max"]) == (1, 5)
    assert set(shapes["InstancePool"]["required"]) == {"InstanceType", "Priority"}


def test_default_is_one_instance_type_and_no_provisioning_timeout():
    template = template_of()
    [variant] = endpoint_config(template)["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6.2xlarge"
    assert "InstancePools" not in variant and "VariantInstanceProvisionTimeoutInSeconds" not in variant
    base = base_component(template)
    assert "Specifications" not in base and "InstanceType" not in base["Specification"]


def test_pools_render_in_priority_order_with_a_specification_per_type():
    template = template_of(instances=Instances(pools=G6_THEN_G5, provisioning_timeout=cdk.Duration.minutes(15)))
    [variant] = endpoint_config(template)["ProductionVariants"]
    assert "InstanceType" not in variant
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6.2xlarge", "Priority": 1},
        {"InstanceType": "ml.g5.2xlarge", "Priority": 2},
    ]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900
    base = base_component(template)
    assert "Specification" not in base
    model = {"Fn::GetAtt": ["ServingModel2BFB7A72", "ModelName"]}
    startup = {"ModelDataDownloadTimeoutInSeconds": 1200, "ContainerStartupHealthCheckTimeoutInSeconds": 1200}
    assert base["Specifications"] == [
        {
            "InstanceType": name,
            "ModelName": model,
            "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 16384, "NumberOfAcceleratorDevicesRequired": 1},
            "StartupParameters": startup,
        }
        for name in ("ml.g6.2xlarge", "ml.g5.2xlarge")
    ], "each pool defaults to the endpoint's compute"
    [adapter] = [
        r["Properties"]["Specification"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent" and "Specification" in r["Properties"]
    ]
    assert set(adapter) == {"BaseInferenceComponentName", "Container"}, "an adapter component is untouched by pools"


def test_a_pool_may_reserve_its_own_compute_and_each_specification_carries_the_base_options():
    pools = [
        InstancePool("ml.g6.12xlarge"),
        InstancePool(
            "ml.g5.12xlarge",
            compute=ComputeRequirements(min_memory_required_in_mb=40960, cpu_cores=8, max_memory_required_in_mb=49152),
        ),
    ]
    template = template_of(
        observability=Observability(detailed_observability=True),
        instances=Instances(pools=pools, data_cache=True),
        base_copies=BaseCopies(placement=CopyPlacement(strategy="SPREAD")),
    )
    first, second = base_component(template)["Specifications"]
    assert first["ComputeResourceRequirements"] == {"MinMemoryRequiredInMb": 16384, "NumberOfAcceleratorDevicesRequired": 1}
    assert second["ComputeResourceRequirements"] == {
        "MinMemoryRequiredInMb": 40960,
        "MaxMemoryRequiredInMb": 49152,
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 8,
    }
    for spec in (first, second):
        assert spec["SchedulingConfig"]["PlacementStrategy"] == "SPREAD"
        assert spec["DataCacheConfig"] == {"EnableCaching": True}
        assert spec["Container"]["ContainerMetricsConfig"]["MetricsEndpoints"][0]["MetricsEndpointPath"] == "/metrics"


def test_the_provisioning_timeout_also_applies_to_one_instance_type():
    template = template_of(instances=Instances(provisioning_timeout=cdk.Duration.seconds(300)))
    [variant] = endpoint_config(template)["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6.2xlarge" and variant["VariantInstanceProvisionTimeoutInSeconds"] == 300
    assert "Specification" in base_component(template)


def test_every_pool_problem_is_refused_at_once_naming_the_type_and_field():
    problems = refused(
        instances=Instances(
            instance_type="ml.g6.2xlarge",
            pools=[
                InstancePool("ml.g6.2xlarge"),
                InstancePool("ml.g6.2xlarge"),
                InstancePool("ml.x9.huge"),
                InstancePool("ml.g5.xlarge", compute=ComputeRequirements(min_memory_required_in_mb=16000, cpu_cores=8)),
                InstancePool(
                    "ml.g6.12xlarge", compute=ComputeRequirements(min_memory_required_in_mb=16384, accelerator_devices=2)
                ),
                InstancePool("ml.g6e.2xlarge"),
            ],
            provisioning_timeout=cdk.Duration.seconds(299),
            capacity_reservation=CapacityReservation("arn:aws:sagemaker:us-east-1:123456789012:reservation/ml-g6-prod"),
        )
    )
    fields = [field for field, _ in problems]
    assert fields == [
        "instances.instance_type",
        "instances.capacity_reservation",
        "instances.pools",
        "instances.pools[1].instance_type",
        "instances.pools[2].instance_type",
        "instances.pools[3].compute",
        "instances.pools[4].compute.accelerator_devices",
        "instances.provisioning_timeout",
    ], problems
    messages = dict(problems)
    assert "has 6 pool(s); SageMaker takes 2 to 5" in messages["instances.pools"]
    assert "already instances.pools[0]" in messages["instances.pools[1].instance_type"]
    assert "'ml.x9.huge' is not a GPU instance type" in messages["instances.pools[2].instance_type"]
    assert (
        messages["instances.pools[3].compute"]
        == "one copy does not fit on a ml.g5.xlarge (instances.pools[3]: 4 vCPUs, 8 per copy)"
    )
    assert "(2) must equal compute.accelerator_devices (1)" in messages["instances.pools[4].compute.accelerator_devices"]
    assert "is 299 s; must be whole seconds from 300 to 3600" in messages["instances.provisioning_timeout"]


def test_a_derived_reservation_that_does_not_fit_a_pool_names_the_pool():
    problems = refused(
        compute=ComputeRequirements(min_memory_required_in_mb=40000),
        instances=Instances(pools=[InstancePool("ml.g6.12xlarge"), InstancePool("ml.g5.2xlarge")]),
    )
    assert problems == [
        ("compute", "one copy does not fit on a ml.g5.2xlarge (instances.pools[1]: 32 GiB host memory, 40000 MiB per copy)")
    ]


def test_one_pool_not_a_list_and_mixed_storage_are_refused():
    assert refused(instances=Instances(pools=[InstancePool("ml.g6.2xlarge")])) == [
        ("instances.pools", "has 1 pool(s); SageMaker takes 2 to 5 here; for one instance type use Instances(instance_type=...)")
    ]
    assert refused(instances=Instances(pools=InstancePool("ml.g6.2xlarge"))) == [
        ("instances.pools", "must be a list of InstancePool, got InstancePool")
    ]
    assert [field for field, _ in refused(instances=Instances(pools=["ml.g6.2xlarge", "ml.g5.2xlarge"]))] == [
        "instances.pools[0]",
        "instances.pools[1]",
    ]


def test_initial_copies_must_fit_the_pool_that_holds_fewest():
    # A g6.12xlarge holds 4 copies, a g6.2xlarge 1: 3 copies on 1 instance fit only the first.
    problems = refused(
        instances=Instances(pools=[InstancePool("ml.g6.12xlarge"), InstancePool("ml.g6.2xlarge")]),
        base_copies=BaseCopies(count=3),
    )
    assert problems == [
        (
            "base_copies.count",
            "(3) does not fit: the pool that holds fewest, a ml.g6.2xlarge, holds 1 copies (1 GPU(s), 1 per copy), so "
            "instances.initial_count=1 holds 1; raise instances.initial_count to 3 or lower base_copies.count to 1",
        )
    ]


def test_autoscaling_ceiling_is_checked_against_the_pool_that_holds_fewest():
    pools = [InstancePool("ml.g6.12xlarge"), InstancePool("ml.g5.2xlarge")]
    endpoint = build_endpoint(instances=Instances(pools=pools, max_count=3))
    with pytest.raises(ConfigurationError) as caught:
        endpoint.base_component.auto_scale_copy_count(min_copies=1, max_copies=4)
    [problem] = caught.value.problems
    assert problem.field == "max_copies"
    assert "the pool that holds fewest, a ml.g5.2xlarge, holds 1 copies" in problem.message
    assert "raise instances.max_count to 4 or lower max_copies to 3" in problem.message
    other = build_endpoint(instances=Instances(pools=pools, max_count=3))
    other.base_component.auto_scale_copy_count(min_copies=1, max_copies=3).scale_on_concurrent_requests(4)


def test_an_app_with_pools_is_cfn_lint_and_nag_clean(tmp_path):
    from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Pools-Lint")
    endpoint = build_endpoint(
        stack,
        observability=Observability(detailed_observability=True),
        placement=FleetPlacement(),
        instances=Instances(
            pools=[InstancePool("ml.g6.2xlarge"), InstancePool("ml.g5.2xlarge"), InstancePool("ml.g6e.2xlarge")],
            provisioning_timeout=cdk.Duration.minutes(20),
            initial_count=2,
            max_count=4,
            data_cache=True,
        ),
        base_copies=BaseCopies(count=2, placement=CopyPlacement(strategy="SPREAD", max_zone_imbalance=1)),
    )
    endpoint.add_adapter("support-en-v1", artifact=AdapterArtifact.from_s3_url(ADAPTER_URL))
    endpoint.base_component.auto_scale_copy_count(min_copies=2, max_copies=4).scale_on_concurrent_requests(4)
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_instance_type_attribute_is_the_first_pool():
    endpoint = build_endpoint(new_stack(), instances=Instances(pools=G6_THEN_G5))
    assert endpoint.hosting.instance_type == "ml.g6.2xlarge"
    assert endpoint.hosting.instance_scaling.instance_types == ("ml.g6.2xlarge", "ml.g5.2xlarge")
    assert SUBJECT.startswith("MultiAdapterEndpoint")


# ------------------------------------------------------------------ the example app's cdk.json


def test_example_app_takes_exactly_one_of_instance_type_and_pools():
    import app as example_app
    from tests.constructs.conftest import app_context

    def problems_of(**changes) -> list[tuple[str, str]]:
        context = app_context("prod")
        settings = context["environments"]["prod"]
        for key, value in changes.items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        with pytest.raises(ConfigurationError) as caught:
            example_app.build(cdk.App(context=context))
        return [(p.field, p.message) for p in caught.value.problems]

    field = "context.environments.prod"
    assert problems_of(instance_type="ml.g6.2xlarge") == [
        (field, "needs exactly one of instance_type and instance_pools; both are set")
    ]
    assert problems_of(instance_pools=None) == [(field, "needs exactly one of instance_type and instance_pools; neither is set")]
    [(where, message)] = problems_of(instance_pools="ml.g6.2xlarge")
    assert where == f"{field}.instance_pools" and "must be a list of instance type names" in message
    [(where, _)] = problems_of(instance_provisioning_timeout_seconds="15m")
    assert where == f"{field}.instance_provisioning_timeout_seconds"


def test_the_prod_canary_runs_its_own_single_instance_type():
    import app as example_app
    from tests.constructs.conftest import app_context

    stack = example_app.build(cdk.App(context=dict(app_context("prod"), canary="true")))
    assert [pool.instance_type for pool in stack.endpoint.hosting.instance_pools] == ["ml.g6.2xlarge", "ml.g5.2xlarge"]
    assert stack.canary.endpoint.hosting.instance_pools is None and stack.canary.endpoint.hosting.instance_type == "ml.g6.2xlarge"
