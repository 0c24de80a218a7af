"""A tenant's app imports a service of cells deployed by the platform's app, through the same
cached SSM lookups the CLI makes, and adds each adapter to the cell the placement rule chooses.

Two separate `App`s share no construct. The platform's templates give the service record and each
cell's own record; each tenant synth pass reports the lookup it misses (as ``cdk synth`` would
look it up), until the last pass misses none.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.cell_placement import cell_names, hashed_cell
from cdk_adapters.contract.service_record import ServiceRecord
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.service import AdapterService, ImportedAdapterService
from tests.constructs.conftest import ADAPTER_BUCKET_URL, endpoint_props

ENV = cdk.Environment(account="123456789012", region="us-east-1")
CELLS = cell_names(2)
TENANT_FAMILIES = [f"acme{i}" for i in range(20)]
FIRST = next(f for f in TENANT_FAMILIES if hashed_cell(f, CELLS) == "cell-0")
SECOND = next(f for f in TENANT_FAMILIES if hashed_cell(f, CELLS) == "cell-1")
TENANT_ADAPTERS = (f"{FIRST}-v1", f"{SECOND}-v1")


def artifact(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz")


def platform_parameters() -> tuple[AdapterService, dict[str, str]]:
    """The platform's service, and every SSM parameter its templates publish (name -> value)."""
    app = cdk.App()
    service = AdapterService(
        app, "Chat", cells=2, endpoint_props=lambda stack, _cell: endpoint_props(stack), stack_props={"env": ENV}
    )
    service.add_adapter("platform-v1", artifact=artifact("platform-v1"))
    values = {}
    for stack in [cell.stack for cell in service.cells] + [service.stack]:
        for parameter in Template.from_stack(stack).find_resources("AWS::SSM::Parameter").values():
            values[parameter["Properties"]["Name"]] = parameter["Properties"]["Value"]
    return service, values


def tenant_pass(outdir: Path, context: dict[str, str]) -> tuple[ImportedAdapterService, cdk.Stack, list[dict]]:
    app = cdk.App(outdir=str(outdir), context=context)
    stack = cdk.Stack(app, "Tenant-Acme", env=ENV)
    imported = ImportedAdapterService.from_service_parameter(stack, "Chat", parameter_name="/cdk-adapters/Chat/service")
    for name in TENANT_ADAPTERS:
        imported.add_adapter(name, artifact=artifact(name))
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    imported.grant_invoke(role, adapters=[TENANT_ADAPTERS[0]])
    manifest = json.loads((Path(app.synth().directory) / "manifest.json").read_text())
    return imported, stack, [m for m in manifest.get("missing", []) if m["provider"] == "ssm"]


def test_a_tenant_adds_each_adapter_to_the_cell_placement_chooses_through_cached_lookups(tmp_path):
    service, published = platform_parameters()
    context: dict[str, str] = {}
    for attempt in range(4):
        imported, stack, missing = tenant_pass(tmp_path / f"pass-{attempt}", context)
        if not missing:
            break
        for entry in missing:
            context[entry["key"]] = published[entry["props"]["parameterName"]]
    assert not missing and attempt == 2, "the service record, then each cell's own record"
    assert not imported.lookup_pending
    assert imported.record == ServiceRecord.from_json(published["/cdk-adapters/Chat/service"])
    components = Template.from_stack(stack).find_resources("AWS::SageMaker::InferenceComponent")
    by_name = {r["Properties"]["InferenceComponentName"]: r["Properties"] for r in components.values()}
    assert len(by_name) == 2
    for name, cell in zip(TENANT_ADAPTERS, CELLS, strict=True):
        endpoint = service.cell(cell).endpoint
        properties = by_name[endpoint.adapter_component_names().get(name) or f"{endpoint.prefix}-{name}"]
        assert properties["EndpointName"] == endpoint.endpoint_name
        assert properties["Specification"]["BaseInferenceComponentName"] == endpoint.base_component_name
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    granted = json.dumps(policy["Properties"]["PolicyDocument"])
    assert service.cell("cell-0").endpoint.endpoint_name in granted
    assert service.cell("cell-1").endpoint.endpoint_name not in granted


def test_a_first_lookup_pass_accepts_a_published_adapter_so_the_cli_can_look_the_record_up():
    """Before the record is known the endpoint's locations are not either: refusing the adapter then
    failed the first pass, so `cdk synth` never looked the parameter up (an S3 adapter never synthesized)."""
    stack = cdk.Stack(cdk.App(), "Tenant", env=ENV)
    imported = MultiAdapterEndpoint.from_discovery_parameter(
        stack, "Serving", parameter_name="/cdk-adapters/x/inference-components"
    )
    assert imported.lookup_pending
    imported.add_adapter("acme-v1", artifact=artifact("acme-v1"))
