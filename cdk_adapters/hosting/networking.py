"""`Networking`, one option object of `MultiAdapterEndpoint`: the container's network isolation and
running the instances in a VPC (subnets, security groups, the VpcConfig both the model and the
endpoint config carry)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class VpcPlacement:
    """Security group ids and subnet ids for ``VpcConfig``."""

    security_group_ids: list[str]
    subnet_ids: list[str]


@dataclass(frozen=True)
class Networking:
    """Where the instances run and what the container may reach. ``Networking()``: SageMaker's own
    network, no network inside the container."""

    vpc: ec2.IVpc | None = None
    """Run the instances in this VPC. Default: none."""
    vpc_subnets: ec2.SubnetSelection | None = None
    """Default: the VPC's private subnets with egress (a VPC without them must choose, e.g. its
    isolated subnets, which then need an S3 gateway endpoint for the model download)."""
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    """Default: one created with no ingress, when `vpc` is given."""
    network_isolation: bool = True
    """No network inside the container (``EnableNetworkIsolation``). Default True."""

    def problems(self, subject: str) -> list[Problem]:
        if self.vpc is None:
            if self.vpc_subnets is not None or self.security_groups:
                return [Problem(subject, "networking.vpc", "vpc_subnets and security_groups need a vpc")]
            return []
        if self.vpc_subnets is None and not self.vpc.private_subnets:
            return [Problem(subject, "networking.vpc_subnets", _no_default_subnets(self.vpc))]
        try:
            selected = self.vpc.select_subnets(**_subnet_kwargs(self.vpc_subnets))
        except RuntimeError as error:  # jsii's wrapper of the selection's own error
            return [Problem(subject, "networking.vpc_subnets", f"selects no subnet of the VPC: {_jsii_message(error)}")]
        if not selected.subnet_ids:
            return [Problem(subject, "networking.vpc_subnets", "selects no subnet of the VPC")]
        return []

    def bind(self, scope: Construct, description: str) -> tuple[VpcPlacement | None, list[ec2.ISecurityGroup]]:
        """The ``VpcConfig`` values (None without a VPC) and the security groups in use."""
        if self.vpc is None:
            return None, []
        groups = list(self.security_groups or [])
        if not groups:
            groups.append(
                ec2.SecurityGroup(scope, "SecurityGroup", vpc=self.vpc, description=description, allow_all_outbound=True)
            )
        subnets = self.vpc.select_subnets(**_subnet_kwargs(self.vpc_subnets))
        return VpcPlacement([group.security_group_id for group in groups], subnets.subnet_ids), groups


def _no_default_subnets(vpc: ec2.IVpc) -> str:
    found = " and ".join(
        kind for kind, subnets in (("isolated", vpc.isolated_subnets), ("public", vpc.public_subnets)) if subnets
    )
    message = f"the default is the VPC's private subnets with egress, and this VPC has none (it has {found or 'no'} subnets)"
    if not vpc.isolated_subnets:
        return f"{message}; pass Networking(vpc_subnets=...) naming the private subnets the instances run in"
    return (
        f"{message}; to run in the isolated ones pass "
        "Networking(vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)) and give the VPC an S3 "
        "gateway endpoint (vpc.add_gateway_endpoint('S3', service=ec2.GatewayVpcEndpointAwsService.S3)): "
        "isolated subnets reach S3 only through one, and the instances download the model and the adapters from S3"
    )


def _jsii_message(error: RuntimeError) -> str:
    """aws-cdk-lib's message without jsii's ``Code:`` prefix."""
    text = str(error)
    code, separator, message = text.partition(": ")
    return message if separator and code.isalnum() else text


def _subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict[str, Any]:
    if selection is None:
        return {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    return {
        key: value
        for key, value in {
            "subnet_type": selection.subnet_type,
            "subnets": selection.subnets,
            "subnet_group_name": selection.subnet_group_name,
            "availability_zones": selection.availability_zones,
            "one_per_az": selection.one_per_az,
            "subnet_filters": selection.subnet_filters,
        }.items()
        if value is not None
    }
