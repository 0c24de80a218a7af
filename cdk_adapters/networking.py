"""Running an endpoint's instances in a VPC: subnets, security groups, the VpcConfig both the model
and the endpoint config carry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class VpcPlacement:
    """Security group ids and subnet ids for ``VpcConfig``."""

    security_group_ids: list[str]
    subnet_ids: list[str]


@dataclass(frozen=True)
class EndpointNetworking:
    """Where the instances run. Without a VPC, SageMaker's own network is used."""

    vpc: ec2.IVpc | None = None
    vpc_subnets: ec2.SubnetSelection | None = None
    """Default: the VPC's private subnets with egress."""
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    """Default: one created with no ingress, when `vpc` is given."""

    def problems(self, subject: str) -> list[Problem]:
        if self.vpc is None and (self.vpc_subnets is not None or self.security_groups):
            return [Problem(subject, "vpc", "vpc_subnets and security_groups need a vpc")]
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


def _subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict[str, object]:
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
