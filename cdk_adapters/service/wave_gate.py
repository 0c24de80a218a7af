"""`WaveGate`: in a later wave's cell stack, hold an upgrade until the first wave has baked quietly.

A provider-framework custom resource (handlers in `wave_handler`) whose ``Fingerprint`` is what the
cell's model runs (image, weights, environment). The cell's model depends on it, so when an
upgrade changes the fingerprint CloudFormation updates the gate first: it waits the bake time while
the first wave's alarms stay quiet, and fails (rolling this cell's stack back before its model
changes) as soon as one is in ALARM. `cdk deploy --all` then deploys the first wave, bakes, and
deploys the rest; ``--concurrency`` lets the later cells bake side by side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import jsii
from aws_cdk import Acknowledgment, ArnFormat, Aws, CustomResource, Duration, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from cdk_adapters.hosting.logs import EndpointLogs, allow_logs_to_use_key, log_group, with_logs_key
from cdk_adapters.private import nag_acknowledgments as nag

HANDLER_DIRECTORY = Path(__file__).resolve().parent / "wave_handler"
RESOURCE_TYPE = "Custom::CellWaveGate"
MAX_BAKE = Duration.minutes(50)
"""CloudFormation waits at most an hour for a custom resource; the rest is margin."""
CHECK_INTERVAL = Duration.minutes(1)
REASON_ALARM_PREFIXES = (
    "the gate reads the first wave's alarms, named <component prefix>/<kind> and <component prefix>-<adapter>/<kind>; "
    "the prefix pattern names exactly those cells' alarms, whatever adapters they hold"
)
REASON_LOG_STREAMS = (
    "Lambda creates log streams with generated names at run time; the wildcard covers only the streams of the "
    "gate's own log group, created here with a retention"
)
REASON_NO_CONCURRENCY = (
    "runs once a minute during an upgrade, invoked by the provider framework; reserving concurrency would take it "
    "from the account's unreserved pool for a function that never runs concurrently with itself"
)
REASON_NO_DLQ = (
    "invoked synchronously by the provider framework: a failure is returned to CloudFormation, which rolls the "
    "cell's stack back; there is no asynchronous event to keep"
)
REASON_FRAMEWORK_ROLES = (
    "the roles CDK's provider framework creates for its own functions (onEvent, isComplete, onTimeout) and its "
    "waiter state machine: basic Lambda execution, and invoking the gate's two functions and its own, by any "
    "version; they call no AWS service on the cells' data"
)
REASON_LOG_DELIVERY = (
    "Step Functions delivers the waiter state machine's execution logs through CloudWatch Logs' log-delivery "
    "actions (logs:CreateLogDelivery, logs:DescribeResourcePolicies, ...), which take no resource-level scope"
)
REASON_NO_TRACING = (
    "the provider framework's waiter state machine only calls the gate's check once a minute; its executions are "
    "logged in full to the gate's log group, and X-Ray tracing would add nothing an operator needs"
)
REASON_OUTSIDE_VPC = (
    "the gate calls only the CloudWatch and CloudFormation regional APIs (no endpoint, no data), as the provider "
    "framework's own functions do"
)


class WaveGate(Construct):
    """Holds this cell's model until the first wave's alarms stayed quiet for `bake_time`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cell: str,
        watched_prefixes: Sequence[str],
        bake_time: Duration,
        model: sagemaker.CfnModel,
        tier_models: Sequence[sagemaker.CfnModel] = (),
        log_settings: EndpointLogs,
    ) -> None:
        """
        :param cell: this cell's name (``cell-1`` ...).
        :param watched_prefixes: the first wave's component prefixes, which name their alarms.
        :param bake_time: how long the first wave's alarms must stay quiet (at most 50 minutes).
        :param model: this cell's SageMaker model; it depends on the gate, and its properties are the fingerprint.
        :param tier_models: the models of the cell's rank tiers above the first, gated and fingerprinted too.
        :param log_settings: retention, key and removal policy of the gate's log groups (the endpoint's).
        """
        super().__init__(scope, id)
        stack = Stack.of(self)
        group_name = f"/cdk-adapters/wave-gate/{stack.stack_name}-{self.node.addr[:8]}"
        log_settings = with_logs_key(self, "LogsKey", log_settings, f"Encrypts the wave gate logs of {cell}")
        self.log_group = log_group(self, "Logs", log_settings, group_name)
        alarm_arns = [
            stack.format_arn(
                service="cloudwatch", resource="alarm", resource_name=f"{prefix}*", arn_format=ArnFormat.COLON_RESOURCE_NAME
            )
            for prefix in watched_prefixes
        ]
        streams = f"{self.log_group.log_group_arn}:*"
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=f"Wave gate of {cell}"
        )
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(sid="ReadFirstWaveAlarms", actions=["cloudwatch:DescribeAlarms"], resources=alarm_arns),
                # An update and a rollback look alike to a custom resource; the stack's status tells them apart.
                iam.PolicyStatement(
                    sid="ReadOwnStackStatus", actions=["cloudformation:DescribeStacks"], resources=[Aws.STACK_ID]
                ),
                iam.PolicyStatement(
                    sid="WriteOwnLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[streams]
                ),
            ],
        )
        self._create_functions(cell, bake_time, group_name, log_settings)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            service_timeout=Duration.minutes(60),
            properties={
                "Cell": cell,
                "WatchedPrefixes": list(watched_prefixes),
                "BakeSeconds": str(int(bake_time.to_seconds())),
                "Fingerprint": Lazy.string(_Fingerprint(model, tier_models)),
            },
        )
        self.resource.node.add_dependency(self.policy)
        for gated in (model, *tier_models):
            gated.node.add_dependency(self.resource)
        self._acknowledge(alarm_arns, streams)
        self._quiet_framework_lint()

    def _create_functions(self, cell: str, bake_time: Duration, group_name: str, log_settings: EndpointLogs) -> None:
        """The gate's two handlers (start a bake, check it) and the provider framework around them."""
        role = iam.Role.from_role_arn(self, "RoleArn", self.role.role_arn, mutable=False)
        code = lambda_.Code.from_asset(str(HANDLER_DIRECTORY), exclude=["__pycache__", "*.pyc", "__init__.py"])
        self.functions = [
            lambda_.Function(
                self,
                kind,
                runtime=lambda_.Runtime.PYTHON_3_14,
                handler=f"index.{handler}",
                code=code,
                timeout=Duration.minutes(1),
                memory_size=128,
                role=role,
                log_group=self.log_group,
                description=f"cdk-adapters wave gate of {cell}: {what}",
            )
            for kind, handler, what in (
                ("Start", "on_event", "starts a bake when an upgrade changes the model"),
                ("Check", "is_complete", "fails the upgrade when a first-wave alarm fires"),
            )
        ]
        for function in self.functions:
            function.node.add_dependency(self.policy)
        allow_logs_to_use_key(self, log_settings, [group_name])
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.functions[0],
            is_complete_handler=self.functions[1],
            query_interval=CHECK_INTERVAL,
            total_timeout=bake_time.plus(Duration.minutes(5)),
            log_group=self.log_group,
            waiter_state_machine_log_options=cr.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL),
            disable_waiter_state_machine_logging=False,
        )

    def _acknowledge(self, alarm_arns: list[str], streams: str) -> None:
        nag.acknowledge_wildcards(self.policy, [(alarm_arns, REASON_ALARM_PREFIXES), ([streams], REASON_LOG_STREAMS)])
        nag.acknowledge_inline_policy(self.policy)
        reasons = [("concurrency", REASON_NO_CONCURRENCY), ("dlq", REASON_NO_DLQ), ("vpc", REASON_OUTSIDE_VPC)]
        for construct in (*self.functions, self.provider):
            nag.acknowledge_lambda_rules(construct, reasons)
        framework = [self.provider.node.find_child(f"framework-{name}") for name in ("onEvent", "isComplete", "onTimeout")]
        invoked = [f"{function.function_arn}:*" for function in (*self.functions, *framework)]  # type: ignore[attr-defined]
        wildcards = [nag.wildcard_finding_id(self, arn) for arn in invoked]
        managed = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
        nag.acknowledge(
            self.provider,
            [Acknowledgment(id=finding, reason=REASON_FRAMEWORK_ROLES) for finding in (managed, *wildcards)]
            + [
                Acknowledgment(id="AwsSolutions-SF2", reason=REASON_NO_TRACING),
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=REASON_LOG_DELIVERY),
            ],
        )
        nag.acknowledge_inline_policy(self.provider, REASON_FRAMEWORK_ROLES)

    def _quiet_framework_lint(self) -> None:
        """CDK's provider framework gives its functions and waiter state machine a DependsOn on the
        role their Role property already names (cfn-lint W3005): acknowledged on exactly those."""
        framework = [self.provider.node.find_child(f"framework-{name}") for name in ("onEvent", "isComplete", "onTimeout")]
        machine = self.provider.node.find_child("waiter-state-machine").node.find_child("Resource")
        for resource in [f.node.default_child for f in framework] + [machine]:
            resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})  # type: ignore[union-attr]


def bake_time_problems(bake_time: object) -> list[str]:
    """What is wrong with a bake time (empty: nothing)."""
    if not isinstance(bake_time, Duration):
        return [f"must be a Duration (Duration.minutes(30)), got {bake_time!r}"]
    seconds = bake_time.to_seconds()
    if seconds % 60:
        return [f"must be whole minutes (the gate checks once a minute), got {seconds:g} seconds"]
    if not 60 <= seconds <= MAX_BAKE.to_seconds():
        return [
            f"must be 1 to {int(MAX_BAKE.to_minutes())} minutes (CloudFormation waits an hour for the gate), got {seconds / 60:g}"
        ]
    return []


@jsii.implements(IStableStringProducer)
class _Fingerprint:
    """A digest of the model's properties as synthesized: it changes exactly when an upgrade does."""

    def __init__(self, model: sagemaker.CfnModel, tier_models: Sequence[sagemaker.CfnModel]) -> None:
        self._model = model
        self._tier_models = tier_models

    def produce(self) -> str:
        stack = Stack.of(self._model)
        runs: dict[str, object] = {
            "container": stack.resolve(self._model.primary_container),
            "isolated": stack.resolve(self._model.enable_network_isolation),
        }
        if self._tier_models:  # rank tiers' models run the same upgrade; without tiers the digest is as it was
            runs["tiers"] = [stack.resolve(model.primary_container) for model in self._tier_models]
        return hashlib.sha256(json.dumps(runs, sort_keys=True, default=str).encode()).hexdigest()[:32]
