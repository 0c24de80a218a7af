"""The deploy check: after CloudFormation creates or updates adapter components, invoke each new or
changed adapter once and fail the deployment (so CloudFormation rolls it back) when one errors,
times out, or is answered by anything but itself (the base model, say).

Mechanism: a custom resource of CDK's provider framework (`aws_cdk.custom_resources.Provider`),
not `aws_cdk.triggers`. A trigger invokes its function with no payload and re-runs only when the
function's code changes, so it cannot tell which adapters changed; a custom resource gets its
properties and, on Update, its ``OldResourceProperties``. The properties hold one entry per
adapter (its name and a digest of its artifact URL and check request), so adding one adapter to a
thousand changes one entry and the handler (`handler/index.py`) invokes that one.

Order: the resource depends on every adapter component (the nested stack of each shard that
holds one, or the component itself when components stay in the endpoint's stack), so it runs
after all of them are created or updated, and a failure rolls them back.

Scope: an endpoint's own check may invoke every ``<prefix>-*`` component (the endpoint owns them
all). A tenant stack's check (`ImportedMultiAdapterEndpoint.add_deploy_check`) names each of the
tenant's components instead, so it can never invoke another team's adapters; IAM's inline policy
size then bounds how many one tenant stack's check can name (`NAMED_COMPONENTS_LIMIT`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import jsii
from aws_cdk import (
    Aws,
    CfnResource,
    CustomResource,
    Duration,
    IStableAnyProducer,
    Lazy,
    NestedStack,
    Stack,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct, IValidation

from cdk_adapters.deploy_check.settings import WAIT_BUDGET_SECONDS as WAIT_BUDGET_SECONDS
from cdk_adapters.deploy_check.settings import AdapterCheck as AdapterCheck
from cdk_adapters.deploy_check.settings import DeployCheck as DeployCheck
from cdk_adapters.deploy_check.settings import adapter_digest
from cdk_adapters.hosting.logs import EndpointLogs, allow_logs_to_use_key, log_group, with_logs_key
from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.private.arns import inference_component_arn


class CheckedComponent(IConstruct, Protocol):
    """What the check reads of an adapter component (described here, so the deploy check imports
    nothing of the endpoint that creates it)."""

    @property
    def adapter_name(self) -> str: ...
    @property
    def inference_component_name(self) -> str: ...
    @property
    def artifact_url(self) -> str: ...
    @property
    def base_component_name(self) -> str: ...
    @property
    def resource(self) -> CfnResource: ...


HANDLER_DIRECTORY = Path(__file__).resolve().parent / "handler"
RESOURCE_TYPE = "Custom::AdapterDeployCheck"
FUNCTION_TIMEOUT = Duration.minutes(14)
"""The check function's limit: under the provider framework's own 15 minutes, so a failure is reported."""
SERVICE_TIMEOUT = Duration.minutes(20)
"""How long CloudFormation waits for the check's answer: past the framework's 15 minutes."""
INVOKE_ACTION = "sagemaker:InvokeEndpoint"
INLINE_POLICY_BUDGET = 10_240
"""IAM's limit on the characters of all inline policies of one role (whitespace not counted)."""
NAMED_COMPONENT_OVERHEAD = 80
"""Characters one named component ARN takes in the policy besides its name (the longest partition
and region, the account, ``inference-component/``, quotes and comma)."""
FIXED_STATEMENTS_SIZE = 1_600
"""The check policy's other statements (endpoint, base-component Deny, logs, stack, network interfaces)."""

REASON_COMPONENT_PATTERN = (
    "the check invokes the endpoint's adapter components that are new or changed in a deployment, which only the "
    "deployment knows; the pattern <prefix>-* names exactly this endpoint's components (adapter components are "
    "named <prefix>-<adapter>), keeps the policy the same size for one adapter or a thousand (per-component ARNs "
    "pass IAM's policy size limit at about 100 adapters), and an explicit Deny removes the base component"
)
REASON_FUNCTION_LOG_STREAMS = (
    "Lambda creates log streams with generated names at run time; the wildcard covers only the streams of the "
    "function's own log group, created here with a retention"
)
REASON_NO_CONCURRENCY = (
    "runs once per deployment, invoked by CloudFormation; reserving concurrency would take it from the account's "
    "unreserved pool (new accounts may have none to spare) for a function that never runs concurrently with itself"
)
REASON_NO_DLQ = (
    "invoked synchronously (CloudFormation's custom resource protocol, through the provider framework): a failure "
    "is returned to CloudFormation, which rolls the deployment back; there is no asynchronous event to keep"
)
REASON_OUTSIDE_VPC_CHECK = (
    "the endpoint is not in a VPC (no vpc given), so the check calls the SageMaker runtime's regional API as any "
    "client of the endpoint does; with MultiAdapterEndpoint(networking=Networking(vpc=...)) the check function runs in that VPC"
)
REASON_OUTSIDE_VPC_FRAMEWORK = (
    "CDK's provider framework function only invokes the check function and posts its result to CloudFormation's "
    "pre-signed S3 URL; it never calls the endpoint, so it stays outside the VPC and needs no VPC endpoints for "
    "Lambda or S3"
)
REASON_VPC_ENI = (
    "a Lambda function in a VPC creates and deletes its network interfaces, whose ids IAM cannot know in advance "
    "(the EC2 network-interface actions Lambda needs have no resource-level scope)"
)
REASON_INLINE_POLICY = (
    "inline on purpose: each policy grants one role of this endpoint's deploy check (the check function's, or the "
    "provider framework function's) what that one function needs, and must never be attached to another principal"
)


class AdapterDeployCheck(Construct):
    """The check's function, its provider and the custom resource, for one endpoint.

    `track` adds an adapter: one property entry, and a dependency on its component's stack.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: DeployCheck,
        endpoint_name: str,
        endpoint_arn: str,
        component_prefix: str,
        base_component_name: str,
        log_settings: EndpointLogs,
        tier_component_names: Sequence[str] = (),
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        after: Sequence[Any] = (),
        named_components_only: bool = False,
    ) -> None:
        """
        :param endpoint_name: the endpoint's name (a token is fine: the check then also waits for it).
        :param endpoint_arn: the endpoint's ARN (from its literal name).
        :param component_prefix: adapter components are named ``<component_prefix>-<adapter>``.
        :param base_component_name: the base component, which the check may never invoke.
        :param tier_component_names: the rank tiers' base components, never invoked either (their
            names match ``<component_prefix>-*`` too). Default none.
        :param log_settings: retention, key and removal policy of the check's log groups (the endpoint's).
        :param vpc: run the check function in this VPC (the endpoint's). Default: none.
        :param after: further resources the check waits for (the base component).
        :param named_components_only: invoke exactly the components `track` adds (a tenant stack's,
            ARN by ARN) instead of every ``<component_prefix>-*`` component. Default False.
        """
        super().__init__(scope, id)
        self.settings = settings
        self.component_prefix = component_prefix
        self._first_base = base_component_name
        stack = Stack.of(self)
        self._stack = stack
        self._adapters: dict[str, str] = {}
        self._checks: dict[str, str] = {}
        self._shards: set[str] = set()
        self._named_components_only = named_components_only

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Deploy check of SageMaker endpoint {component_prefix}: invokes its adapter components",
        )
        log_settings = with_logs_key(self, "LogsKey", log_settings, f"Encrypts the deploy check logs of {component_prefix}")
        group_name = f"/cdk-adapters/deploy-check/{stack.stack_name}-{self.node.addr[:8]}"
        self.log_group = log_group(self, "Logs", log_settings, group_name)
        component_pattern = inference_component_arn(self, f"{component_prefix}-*")
        log_streams = f"{self.log_group.log_group_arn}:*"
        bases = [base_component_name, *tier_component_names]
        statements = self._function_statements(endpoint_arn, component_pattern, bases, log_streams, vpc is not None)
        self.policy = iam.Policy(self, "Policy", statements=statements, roles=[self.role])
        self._create_function(settings, vpc, vpc_subnets)
        framework_policy = self._create_provider(log_settings, group_name)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            # CloudFormation waits at most this long for an answer (default an hour), should both functions die silently.
            service_timeout=SERVICE_TIMEOUT,
            properties={
                "EndpointName": endpoint_name,
                "ComponentPrefix": component_prefix,
                "Request": json.dumps(dict(settings.body), sort_keys=True),
                "Adapters": Lazy.any(_Entries(self._adapters)),
                "Checks": Lazy.any(_Entries(self._checks)),
            },
        )
        self.resource.node.add_dependency(self.policy, framework_policy)
        for resource in after:
            self.resource.node.add_dependency(resource)
        self._acknowledge(vpc is not None, None if named_components_only else component_pattern, log_streams)
        if named_components_only:
            self.node.add_validation(_NamedComponentsBudget(self))

    def _function_statements(
        self, endpoint_arn: str, component_pattern: str, base_component_names: Sequence[str], log_streams: str, in_vpc: bool
    ) -> list[iam.PolicyStatement]:
        """Invoke the adapters (never the base), write its own logs, read its stack's status; ENIs in a VPC."""
        self._invoke = iam.PolicyStatement(
            sid="InvokeAdapterComponents",
            actions=[INVOKE_ACTION],
            resources=[endpoint_arn] if self._named_components_only else [endpoint_arn, component_pattern],
        )
        base_arns = [inference_component_arn(self, name) for name in base_component_names]
        statements = [
            self._invoke,
            iam.PolicyStatement(
                sid="NeverTheBaseComponent", effect=iam.Effect.DENY, actions=[INVOKE_ACTION], resources=base_arns
            ),
            iam.PolicyStatement(
                sid="WriteOwnLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_streams]
            ),
            # An update and a rollback look alike to a custom resource; the stack's status tells them apart.
            iam.PolicyStatement(sid="ReadOwnStackStatus", actions=["cloudformation:DescribeStacks"], resources=[Aws.STACK_ID]),
        ]
        eni_actions = [
            "ec2:CreateNetworkInterface",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DeleteNetworkInterface",
            "ec2:AssignPrivateIpAddresses",
            "ec2:UnassignPrivateIpAddresses",
        ]
        if in_vpc:
            statements.append(iam.PolicyStatement(sid="LambdaNetworkInterfaces", actions=eni_actions, resources=["*"]))
        return statements

    def _create_function(self, settings: DeployCheck, vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None) -> None:
        """The check's function, after its policy; in a VPC with HTTPS out only."""
        component_prefix = self.component_prefix
        self.security_group: ec2.SecurityGroup | None = None
        if vpc is not None:
            self.security_group = ec2.SecurityGroup(
                self,
                "SecurityGroup",
                vpc=vpc,
                allow_all_outbound=False,
                description=f"Deploy check of SageMaker endpoint {component_prefix}: HTTPS out to the SageMaker runtime only",
            )
            self.security_group.add_egress_rule(
                ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to the SageMaker runtime (VPC endpoint or NAT)"
            )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIRECTORY), exclude=["__pycache__", "*.pyc", "__init__.py"]),
            timeout=FUNCTION_TIMEOUT,
            memory_size=256,
            role=_by_arn(self, "RoleArn", self.role),
            log_group=self.log_group,
            environment=settings.environment(),
            description=f"cdk-adapters deploy check of endpoint {component_prefix}: invokes new or changed adapters once",
            vpc=vpc,
            vpc_subnets=vpc_subnets if vpc is not None else None,
            security_groups=[self.security_group] if self.security_group is not None else None,
        )
        self.function.node.add_dependency(self.policy)

    def _create_provider(self, log_settings: EndpointLogs, group_name: str) -> iam.Policy:
        """The provider framework's role, log group and policy, and the provider; the policy."""
        self.framework_role = iam.Role(
            self,
            "ProviderRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"CDK provider framework of the deploy check of SageMaker endpoint {self.component_prefix}",
        )
        self.framework_log_group = log_group(self, "ProviderLogs", log_settings, f"{group_name}/provider")
        allow_logs_to_use_key(self, log_settings, [group_name, f"{group_name}/provider"])
        self.framework_policy = framework_policy = iam.Policy(
            self,
            "ProviderPolicy",
            roles=[self.framework_role],
            statements=[
                iam.PolicyStatement(
                    sid="WriteOwnLogs",
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[f"{self.framework_log_group.log_group_arn}:*"],
                ),
                # What the framework's own grant would add, without its "<function ARN>:*" (it calls the function unqualified).
                iam.PolicyStatement(
                    sid="InvokeCheckFunction",
                    actions=["lambda:InvokeFunction", "lambda:GetFunction"],
                    resources=[self.function.function_arn],
                ),
            ],
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            framework_on_event_role=_by_arn(self, "ProviderRoleArn", self.framework_role),
            log_group=self.framework_log_group,
        )
        self.provider.node.find_child("framework-onEvent").node.add_dependency(framework_policy)
        return framework_policy

    def track(self, component: CheckedComponent, check: AdapterCheck | None) -> None:
        """Check `component` whenever it is new or changed, after its stack is deployed; on a rank
        tier's base (not the first tier's), a move between tiers is a change too."""
        name = component.adapter_name
        base = component.base_component_name
        tier_base = None if base == self._first_base else base
        self._adapters[name] = adapter_digest(component.artifact_url, check, self._stack, tier_base)
        if self._named_components_only:
            self._invoke.add_resources(inference_component_arn(self._stack, component.inference_component_name))
        if check is not None and check.render():
            self._checks[name] = json.dumps(check.render(), sort_keys=True)
        stack = Stack.of(component)
        if isinstance(stack, NestedStack):
            path = stack.node.path
            if path not in self._shards:
                self._shards.add(path)
                self.resource.node.add_dependency(stack.nested_stack_resource)
        else:
            self.resource.node.add_dependency(component.resource)

    @property
    def adapters(self) -> dict[str, str]:
        """Adapter -> the digest whose change makes the check invoke it."""
        return dict(self._adapters)

    def _acknowledge(self, in_vpc: bool, component_pattern: str | None, log_streams: str) -> None:
        nag.acknowledge_wildcards(
            self.policy,
            ([([component_pattern], REASON_COMPONENT_PATTERN)] if component_pattern is not None else [])
            + [([log_streams], REASON_FUNCTION_LOG_STREAMS)]
            + ([(["*"], REASON_VPC_ENI)] if in_vpc else []),
        )
        nag.acknowledge_wildcards(
            self.framework_policy, [([f"{self.framework_log_group.log_group_arn}:*"], REASON_FUNCTION_LOG_STREAMS)]
        )
        for policy in (self.policy, self.framework_policy):
            nag.acknowledge_inline_policy(policy, REASON_INLINE_POLICY)
        for construct in (self.function, self.provider):
            reasons = [("concurrency", REASON_NO_CONCURRENCY), ("dlq", REASON_NO_DLQ)]
            if construct is self.provider:
                reasons.append(("vpc", REASON_OUTSIDE_VPC_FRAMEWORK))
            elif not in_vpc:
                reasons.append(("vpc", REASON_OUTSIDE_VPC_CHECK))
            nag.acknowledge_lambda_rules(construct, reasons)


def _by_arn(scope: Construct, id: str, role: iam.Role) -> iam.IRole:
    """`role` as an immutable reference: a function given it neither adds grants to it nor a
    DependsOn on it (its Role property already orders it; cfn-lint W3005). What the function needs
    is in this construct's own policies, which the function depends on explicitly."""
    return iam.Role.from_role_arn(scope, id, role.role_arn, mutable=False)


@jsii.implements(IValidation)
class _NamedComponentsBudget:
    """At synth: a check that names its components ARN by ARN keeps its role's inline policy under IAM's limit."""

    def __init__(self, check: AdapterDeployCheck) -> None:
        self._check = check

    def validate(self) -> list[str]:
        names = list(self._check._adapters)
        size = FIXED_STATEMENTS_SIZE + sum(
            NAMED_COMPONENT_OVERHEAD + len(self._check.component_prefix) + 1 + len(n) for n in names
        )
        if size <= INLINE_POLICY_BUDGET:
            return []
        return [
            f"{self._check.node.path}: the deploy check names each of this stack's {len(names)} adapter components in its "
            f"policy (about {size} characters); IAM allows {INLINE_POLICY_BUDGET} characters of inline policy per role. "
            "Add further adapters from another tenant stack"
        ]


@jsii.implements(IStableAnyProducer)
class _Entries:
    """A mapping rendered at synth (adapters are added after the check is created)."""

    def __init__(self, entries: dict[str, str]) -> None:
        self._entries = entries

    def produce(self) -> dict[str, str] | None:
        return dict(sorted(self._entries.items())) or None
