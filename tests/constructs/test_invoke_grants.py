"""`grant_invoke` grants what a client of the granted names can call: the main endpoint's
components, the canary's share, every target of an alias; and it does not depend on the order of
`grant_invoke`, `add_adapter`, `add_alias` and `set_canary` (rendered at synth)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from tests.constructs.conftest import build_endpoint

ARN = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:"


def artifact(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"s3://example-adapters/{name}/adapter.tar.gz")


def invoke_statements(stack: cdk.Stack, policy_prefix: str = "Caller") -> list[dict]:
    template = Template.from_stack(stack)
    return [
        statement
        for key, policy in template.find_resources("AWS::IAM::Policy").items()
        if key.startswith(policy_prefix)
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "sagemaker:InvokeEndpoint" in statement["Action"]
    ]


def granted(stack: cdk.Stack) -> set[str]:
    """Every ARN the caller's invoke statements name, with pseudo parameters as ``<AWS::...>``."""
    arns = set()
    for statement in invoke_statements(stack):
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        arns |= {flatten_reference(resource).replace("<Ref:", "<") for resource in resources}
    return arns


def arns(kind: str, *names: str) -> set[str]:
    return {f"{ARN}{kind}/{name}" for name in names}


@pytest.fixture
def app_stacks():
    """A main endpoint, its canary in a stack of its own, and a caller in a third stack (as app.py)."""
    app = cdk.App()
    main = build_endpoint(cdk.Stack(app, "Main"))
    canary = build_endpoint(cdk.Stack(app, "Main-Canary"))
    callers = cdk.Stack(app, "Callers")
    role = iam.Role(callers, "Caller", assumed_by=iam.AccountRootPrincipal())
    return main, canary, callers, role


def test_the_canary_endpoint_and_its_component_of_a_granted_adapter_are_granted(app_stacks):
    main, canary, callers, role = app_stacks
    for name in ("a-v1", "b-v1"):
        main.add_adapter(name, artifact=artifact(name))
    canary.add_adapter("a-v1", artifact=artifact("a-v1"))
    main.set_canary(canary, traffic_percent=5)
    main.grant_invoke(role, adapters=["a-v1", "b-v1"])
    assert granted(callers) == (
        arns("endpoint", main.endpoint_name, canary.endpoint_name)
        | arns("inference-component", f"{main.prefix}-a-v1", f"{main.prefix}-b-v1", f"{canary.prefix}-a-v1")
    )
    # The canary's component ARN names the component its template creates.
    components = Template.from_stack(cdk.Stack.of(canary)).find_resources("AWS::SageMaker::InferenceComponent")
    assert f"{canary.prefix}-a-v1" in {c["Properties"]["InferenceComponentName"] for c in components.values()}
    assert canary.adapters["a-v1"].inference_component_name == f"{canary.prefix}-a-v1"


def test_an_adapter_the_canary_does_not_serve_gets_no_canary_grant(app_stacks):
    main, canary, callers, role = app_stacks
    for name in ("a-v1", "b-v1"):
        main.add_adapter(name, artifact=artifact(name))
    canary.add_adapter("a-v1", artifact=artifact("a-v1"))
    main.set_canary(canary, traffic_percent=5)
    main.grant_invoke(role, adapters=["b-v1"])
    assert granted(callers) == arns("endpoint", main.endpoint_name) | arns("inference-component", f"{main.prefix}-b-v1")


def test_grant_before_add_adapter_add_alias_and_set_canary(app_stacks):
    main, canary, callers, role = app_stacks
    main.grant_invoke(role, adapters=["support", "c-v1"])  # an alias and an adapter, neither added yet
    main.add_adapter("support-v1", artifact=artifact("support-v1"))
    main.add_adapter("support-v2", artifact=artifact("support-v2"))
    main.add_adapter("c-v1", artifact=artifact("c-v1"))
    main.add_alias("support", {"support-v1": 90, "support-v2": 10})
    canary.add_adapter("support-v2", artifact=artifact("support-v2"))
    main.set_canary(canary, traffic_percent=10)
    assert granted(callers) == (
        arns("endpoint", main.endpoint_name, canary.endpoint_name)
        | arns("inference-component", *(f"{main.prefix}-{n}" for n in ("support-v1", "support-v2", "c-v1")))
        | arns("inference-component", f"{canary.prefix}-support-v2")
    )


def test_the_grant_covers_every_component_the_client_can_pick(app_stacks):
    """The discovery record is what clients route by: every (endpoint, component) it can send a
    call to for the granted names is in the grant."""
    main, canary, callers, role = app_stacks
    for name in ("x-v1", "x-v2", "y-v1"):
        main.add_adapter(name, artifact=artifact(name))
    canary.add_adapter("x-v2", artifact=artifact("x-v2"))
    main.add_alias("X", {"x-v1": 50, "x-v2": 50})  # aliases compare case-insensitively, as the client does
    main.set_canary(canary, traffic_percent=50)
    main.grant_invoke(role, adapters=["x"])
    record = main.discovery_record()
    reachable = set()
    for target in record.aliases["X"]:
        reachable |= arns("endpoint", record.endpoint_name) | arns("inference-component", record.component_name(target))
        if record.canary.serves(target):
            reachable |= arns("endpoint", record.canary.endpoint_name)
            reachable |= arns("inference-component", record.canary.component_name(target))
    assert granted(callers) == reachable
    assert not any("y-v1" in arn for arn in granted(callers))


def test_grant_of_every_adapter_covers_the_canary_by_its_name_pattern(app_stacks):
    main, canary, callers, role = app_stacks
    main.grant_invoke(role)
    main.add_adapter("a-v1", artifact=artifact("a-v1"))
    canary.add_adapter("a-v1", artifact=artifact("a-v1"))
    main.set_canary(canary, traffic_percent=5)
    assert granted(callers) == (
        arns("endpoint", main.endpoint_name, canary.endpoint_name)
        | arns("inference-component", f"{main.prefix}-*", f"{canary.prefix}-*")
    )


def test_several_grants_to_one_role_keep_their_own_statements(app_stacks):
    """IAM's policy minimisation would merge equal-action statements; each grant has its own Sid."""
    main, canary, callers, role = app_stacks
    main.add_adapter("a-v1", artifact=artifact("a-v1"))
    canary.add_adapter("a-v1", artifact=artifact("a-v1"))
    main.grant_invoke(role, adapters=["a-v1"])
    main.grant_invoke(role)
    canary.grant_invoke(role, adapters=["a-v1"])
    statements = invoke_statements(callers)
    assert len(statements) == 3 and len({s["Sid"] for s in statements}) == 3
    assert all(s["Sid"].isalnum() for s in statements)
    assert "Fn::ImportValue" not in json.dumps(statements), "literal names: no cross-stack exports"


def test_an_alias_that_is_granted_but_never_added_fails_synth(app_stacks):
    main, _, callers, role = app_stacks
    main.add_adapter("a-v1", artifact=artifact("a-v1"))
    main.grant_invoke(role, adapters=["a"])
    with pytest.raises(Exception, match=r"grant_invoke.adapters: 'a' \(granted to 'Callers/Caller'\) is not an adapter or alias"):
        Template.from_stack(callers)
