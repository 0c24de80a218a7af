"""Shared builders for the monitoring tests: small endpoints with alarms, and the dashboard body as JSON."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from tests.constructs.conftest import build_endpoint, new_stack

ADAPTERS = ("support-en-v1", "support-de-v1")


def artifact(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"s3://example-adapters/{name}/adapter.tar.gz")


def endpoint_with(adapters=ADAPTERS, stack: cdk.Stack | None = None, **overrides: Any) -> MultiAdapterEndpoint:
    endpoint = build_endpoint(stack or new_stack(), **overrides)
    for name in adapters:
        endpoint.add_adapter(name, artifact=artifact(name))
    return endpoint


def template_of(construct) -> dict[str, Any]:
    return Template.from_stack(cdk.Stack.of(construct)).to_json()


def resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {key: value for key, value in template["Resources"].items() if value["Type"] == resource_type}


def join_to_text(value: Any) -> str:
    """A CloudFormation string value with ``Fn::Join`` parts resolved; ``Ref``/``GetAtt`` become
    ``<ref:...>`` placeholders (they sit inside JSON strings in a dashboard body)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return delimiter.join(join_to_text(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<ref:{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<getatt:{'.'.join(value['Fn::GetAtt'])}>"
    raise AssertionError(f"unexpected intrinsic in a dashboard body: {value!r}")


def dashboard_body(template: dict[str, Any]) -> dict[str, Any]:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    return json.loads(join_to_text(dashboard["Properties"]["DashboardBody"]))


def alarms_by_name(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        alarm["Properties"]["AlarmName"]: alarm["Properties"] for alarm in resources(template, "AWS::CloudWatch::Alarm").values()
    }
