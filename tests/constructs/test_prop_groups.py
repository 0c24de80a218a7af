"""The endpoint's grouped props (`Instances`, `BaseCopies`, `BaseModelIdentity`, `Networking`) and
the flat props they replaced, still accepted with a `FlatPropWarning`.

The claim is that an app written against the old props synthesizes the very same template after
the upgrade, and is told, at its own line, how to spell each prop now. Four synths (two spellings
of two sets of values), about 3 s.
"""

from __future__ import annotations

import dataclasses
import warnings

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from cdk_adapters import (
    BaseCopies,
    BaseModelIdentity,
    CapacityReservation,
    ConfigurationError,
    CopyPlacement,
    FlatPropWarning,
    InstancePool,
    Instances,
    MultiAdapterEndpoint,
    Networking,
    SsmAccess,
    StartupTimeouts,
)
from cdk_adapters.endpoint.prop_groups import FLAT_PROPS, GROUPS
from tests.constructs.conftest import endpoint_props, new_stack

RESERVATION = "arn:aws:sagemaker:us-east-1:123456789012:reservation/ml-p3-prod"


def flat_values(stack: cdk.Stack) -> dict[str, object]:
    """A value other than the default for every flat prop one endpoint can take at once (pools
    exclude a single type, a volume key and a capacity reservation, so they get their own set)."""
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-12345678", availability_zones=["us-east-1a"], private_subnet_ids=["subnet-aaaa1111"]
    )
    return {
        "instance_type": "ml.p3.2xlarge",
        "instance_provisioning_timeout": cdk.Duration.minutes(10),
        "initial_instance_count": 2,
        "min_instance_count": 1,
        "max_instance_count": 3,
        "volume_key": kms.Key(stack, "Key", enable_key_rotation=True),
        "volume_size_in_gb": 200,
        "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-3-1",
        "data_cache": True,
        "ssm_access": SsmAccess("incident response: inspect GPU memory of a stuck copy in place"),
        "capacity_reservation": CapacityReservation(RESERVATION),
        "copy_count": 2,
        "startup": StartupTimeouts(model_data_download=cdk.Duration.minutes(30)),
        "copy_placement": CopyPlacement(strategy="BINPACK", max_zone_imbalance=1),
        "base_model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "base_model_revision": "0e9e39f249a16976918f6564b8830bc894c89659",
        "vpc": vpc,
        "vpc_subnets": ec2.SubnetSelection(subnets=vpc.private_subnets),
        "security_groups": [ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-12345678")],
        "network_isolation": False,
    }


def pool_values(stack: cdk.Stack) -> dict[str, object]:
    pools = [InstancePool("ml.g6.12xlarge"), InstancePool("ml.g5.12xlarge")]
    return {"instance_pools": pools, "initial_instance_count": 2, "max_instance_count": 2, "copy_count": 2}


def grouped(flat: dict[str, object]) -> dict[str, object]:
    """The same values in the option objects, written out by the table's own mapping."""
    fields: dict[str, dict[str, object]] = {}
    for name, value in flat.items():
        group, field = FLAT_PROPS[name]
        fields.setdefault(group, {})[field] = value
    return {group: GROUPS[group](**values) for group, values in fields.items()}


def template(values_of, spelling) -> dict:
    stack = new_stack()
    MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack), **spelling(values_of(stack)))
    return Template.from_stack(stack).to_json()


@pytest.mark.parametrize("values_of", [flat_values, pool_values], ids=["one-type", "pools"])
def test_the_old_flat_props_synthesize_the_template_the_option_objects_do(values_of):
    with pytest.warns(FlatPropWarning):
        old = template(values_of, lambda values: values)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FlatPropWarning)
        new = template(values_of, grouped)
    assert old == new
    [variant] = next(r for r in new["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig")["Properties"][
        "ProductionVariants"
    ]
    assert variant["InitialInstanceCount"] == 2, "the values took effect, so the comparison compares something"


def test_the_table_maps_every_field_of_every_option_object_once():
    targets = sorted(FLAT_PROPS.values())
    assert len(targets) == len(set(targets))
    assert targets == sorted((group, field.name) for group, kind in GROUPS.items() for field in dataclasses.fields(kind))
    every_flat_prop = set(flat_values(new_stack())) | set(pool_values(new_stack())) | {"base_model_facts"}
    assert every_flat_prop == set(FLAT_PROPS), "the synth comparison covers every old prop but the facts (their own test)"


def test_the_warning_names_the_new_spelling_at_the_callers_line():
    stack = new_stack()
    with pytest.warns(FlatPropWarning) as caught:
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack), min_instance_count=0, copy_count=1)
    messages = {str(record.message) for record in caught}
    assert messages == {
        "MultiAdapterEndpoint(min_instance_count=) is deprecated; pass instances=Instances(min_count=...)",
        "MultiAdapterEndpoint(copy_count=) is deprecated; pass base_copies=BaseCopies(count=...)",
    }
    assert {record.filename for record in caught} == {__file__}, "not the library's or jsii's frame"
    assert issubclass(FlatPropWarning, FutureWarning), "shown by default in a stack module, not only in __main__"


def test_the_old_base_model_facts_reach_the_gate_as_the_new_ones_do(zoo):
    stack = new_stack()
    with pytest.warns(FlatPropWarning, match=r"pass base_model=BaseModelIdentity\(facts=\.\.\.\)"):
        old = MultiAdapterEndpoint(stack, "Old", **endpoint_props(stack), base_model_facts=zoo.base_facts)
    new = MultiAdapterEndpoint(stack, "New", **endpoint_props(stack), base_model=BaseModelIdentity(facts=zoo.base_facts))
    assert old.compatibility_reference == new.compatibility_reference
    assert old.compatibility_reference.base is not None


def test_a_group_and_one_of_its_flat_props_together_are_refused_naming_both():
    stack = new_stack()
    with pytest.raises(TypeError, match=r"got instances= and instance_type; give instances=Instances\(instance_type=\.\.\.\)"):
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack), instances=Instances(), instance_type="ml.g5.xlarge")
    assert stack.node.try_find_child("Serving").node.children == []


def test_an_unknown_keyword_is_a_type_error_as_python_makes_it():
    stack = new_stack()
    with pytest.raises(TypeError, match="MultiAdapterEndpoint\\(\\) got an unexpected keyword argument 'instance_typ'"):
        MultiAdapterEndpoint(stack, "Serving", **endpoint_props(stack), instance_typ="ml.g5.xlarge")


def test_an_option_object_of_the_wrong_class_is_named_not_read():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint(
            stack,
            "Serving",
            **endpoint_props(stack),
            instances="ml.g5.xlarge",
            base_copies=2,
            networking=Networking(),
            base_model=BaseModelIdentity(),
        )
    assert [(p.field, p.message) for p in caught.value.problems] == [
        ("instances", "must be an Instances, got str"),
        ("base_copies", "must be a BaseCopies, got int"),
    ]
    assert stack.node.try_find_child("Serving").node.children == []


def test_problems_name_the_field_by_its_grouped_path():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint(
            stack,
            "Serving",
            **endpoint_props(stack),
            instances=Instances(
                instance_type="ml.p3.2xlarge", initial_count=0, min_count=0, max_count=1, volume_size_in_gb=600, data_cache="yes"
            ),
            base_copies=BaseCopies(count=0, placement=CopyPlacement(strategy="PACK")),
            base_model=BaseModelIdentity(revision="abc123"),
        )
    assert sorted(p.field for p in caught.value.problems) == [
        "base_copies.count",
        "base_copies.placement.strategy",
        "base_model.revision",
        "instances.data_cache",
        "instances.initial_count",
        "instances.volume_size_in_gb",
    ]


def test_a_prop_that_creates_something_names_the_attribute_that_holds_it():
    """aws-cdk-lib's convention (``eks.Cluster(alb_controller=options)`` -> ``cluster.alb_controller``,
    the construct), documented in docs/constructs.md: the prop is the options, the attribute of the
    same name what they created, and None when the prop turns it off."""
    from cdk_adapters import DeployCheck
    from cdk_adapters.deploy_check.deploy_check import AdapterDeployCheck
    from cdk_adapters.monitoring.dashboard import EndpointDashboard

    stack = new_stack()
    check = DeployCheck()
    on = MultiAdapterEndpoint(stack, "On", **endpoint_props(stack), deploy_check=check, dashboard=True)
    off = MultiAdapterEndpoint(stack, "Off", **endpoint_props(stack), dashboard=False)
    assert isinstance(on.deploy_check, AdapterDeployCheck) and on.deploy_check_settings is check
    assert isinstance(on.dashboard, EndpointDashboard)
    assert off.deploy_check is None and off.deploy_check_settings is None and off.dashboard is None


def test_startup_none_means_the_default_timeouts_as_it_always_did():
    default = template(lambda stack: {}, lambda values: values)
    with pytest.warns(FlatPropWarning):
        flat_none = template(lambda stack: {"startup": None}, lambda values: values)
    grouped_none = template(lambda stack: {}, lambda values: {"base_copies": BaseCopies(startup=None)})
    assert default == flat_none == grouped_none
    assert BaseCopies(startup=None).startup.seconds() == StartupTimeouts().seconds()


def test_only_the_installed_packages_frames_are_skipped_not_a_users_folder_of_the_same_name():
    from cdk_adapters.endpoint import prop_groups

    assert prop_groups._is_ours(prop_groups.__file__)
    assert not prop_groups._is_ours("/home/dev/src/cdk_adapters/app.py")
    assert not prop_groups._is_ours("/home/dev/jsii/stacks/serving.py")
