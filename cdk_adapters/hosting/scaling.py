"""Copy-count autoscaling of the base inference component, and opt-in scale to zero with a wake-up.

The base component owns the compute; adapters run on its copies, so only the base scales
(``endpoint.base_component.auto_scale_copy_count(...)``, shaped like ECS's ``autoScaleTaskCount``
and aws-sagemaker-alpha's ``autoScaleInstanceCount``). Managed instance scaling on the endpoint
config then adds or removes instances as copies need room, so the maximum number of copies must fit
on the maximum number of instances: that is checked at synth from the copy's reservation and the
instance type's GPUs, vCPUs and memory (`cdk_adapters.hosting.compute`, one rule with the endpoint's check
of its initial copies).

Scale to zero needs a wake-up: with no copy running, requests fail and record
``NoCapacityInvocationFailures``, and only a step-scaling policy on an alarm on that metric brings
the first copy back. Whether a request to an *adapter* records it under the adapter's component
name or the base's is unconfirmed, and CloudWatch Metrics Insights filters dimension values only
with ``=``, ``!=`` and ``AND`` (no prefix match, no ``LIKE``, no ``OR``), so no query can select
"this endpoint's components" without listing every name. The default wake-up therefore watches the
metric of every inference component in the account and region with one Metrics Insights query:
it fires on a failed request to any adapter whatever name it is recorded under, is one resource
whatever the adapter count, and never changes when adapters are added. Its cost is that a
scale-to-zero endpoint also wakes when another one in the same account and region is called at
zero (`WakeUpScope` says how to narrow it once a live test settles the question).

Nothing here touches the base component's own template: the scalable target, policies and alarm
are separate resources that depend on it, so changing them (or the adapters) never re-sends the
component's write-only ``RuntimeConfig.CopyCount``, which could reset a count autoscaling changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import TypeGuard

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable, IValidation

from cdk_adapters.hosting.compute import InstanceScaling, copies_fit_problems, whole_seconds_problems
from cdk_adapters.hosting.instance_types import UnknownInstanceType
from cdk_adapters.problems import Problem, raise_if_any

COPY_COUNT_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling's dimension for an inference component's copies."""
SERVICE_LINKED_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)
"""The role Application Auto Scaling uses for SageMaker (created by it on first registration)."""
COOLDOWN_RANGE_SECONDS = (0, 3600)
"""Cooldowns this library accepts. The API takes any integer; more than an hour between scaling
steps on a GPU endpoint is almost always minutes given as seconds, so it is refused."""
WAKE_UP_PERIOD = Duration.minutes(1)
"""Metrics Insights aggregates at one minute at best (it does not serve high-resolution data)."""
WAKE_UP_QUERY = 'SELECT SUM(NoCapacityInvocationFailures) FROM SCHEMA("AWS/SageMaker", InferenceComponentName)'
"""Every inference component's no-capacity failures in this account and region, summed."""


class CopyScalingMetric(Enum):
    """The two predefined metrics Application Auto Scaling tracks for inference component copies."""

    CONCURRENT_REQUESTS_PER_COPY = (
        appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION
    )
    """Requests in flight per copy, sampled below a minute: reacts in about 30 s; the better fit
    for LLMs, whose requests last seconds."""
    INVOCATIONS_PER_COPY = appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY
    """Requests per copy per minute."""


class WakeUpScope(Enum):
    """Which no-capacity failures wake a scaled-to-zero endpoint."""

    ANY_COMPONENT_IN_REGION = "any-component-in-region"
    """One Metrics Insights query over every inference component of the account and region: fires
    on a failed request to any adapter whatever name SageMaker records it under. Other
    scale-to-zero endpoints in the same account and region wake this one too."""
    BASE_COMPONENT = "base-component"
    """A plain alarm on the base component's metric alone: exact, but it wakes on adapter requests
    only if SageMaker records them under the base's name (unconfirmed; test on a live endpoint)."""


@dataclass(frozen=True)
class WakeUp:
    """What `ScalableCopyCount.scale_to_zero` created."""

    alarm: cloudwatch.Alarm
    action: appscaling.StepScalingAction


class ScalableCopyCount(Construct):
    """The base component's copy count as an Application Auto Scaling target.

    Create it with `BaseInferenceComponent.auto_scale_copy_count`; then add target tracking
    (`scale_on_concurrent_requests`, `scale_on_invocations`) and, with ``min_copies=0``,
    `scale_to_zero`. Everything is checked before anything is created.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        inference_component_name: str,
        component: IDependable,
        min_copies: int,
        max_copies: int,
        instance_scaling: InstanceScaling | None,
        no_capacity_failures: cloudwatch.Metric,
    ) -> None:
        """Use `BaseInferenceComponent.auto_scale_copy_count`, which checks the arguments first
        (`problems`).

        :param inference_component_name: the component whose copies scale.
        :param component: its resource; the scalable target is registered after it.
        :param min_copies: the floor (0 allows `scale_to_zero`).
        :param max_copies: the ceiling.
        :param instance_scaling: the endpoint's instances; `scale_to_zero` needs their floor at 0.
        :param no_capacity_failures: the component's ``NoCapacityInvocationFailures`` metric at
            the wake-up's period and statistic (``WakeUpScope.BASE_COMPONENT`` alarms on it).
        """
        super().__init__(scope, id)
        self.inference_component_name = inference_component_name
        self.min_copies = min_copies
        self.max_copies = max_copies
        self.instance_scaling = instance_scaling
        self._no_capacity_failures = no_capacity_failures
        self.tracked: dict[CopyScalingMetric, float] = {}
        self.wake_up: WakeUp | None = None
        self.wake_up_scope: WakeUpScope | None = None
        stack = Stack.of(self)
        role = iam.Role.from_role_arn(
            self,
            "ServiceLinkedRole",
            stack.format_arn(service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE),
        )
        self.scalable_target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"inference-component/{inference_component_name}",
            scalable_dimension=COPY_COUNT_DIMENSION,
            min_capacity=min_copies,
            max_capacity=max_copies,
            role=role,
        )
        # The resource id is only a name: without this, CloudFormation may register the target
        # before the component exists (and deregister it after the component is gone).
        self.scalable_target.node.add_dependency(component)
        self.node.add_validation(_ScalingValidation(self))

    @staticmethod
    def problems(
        *,
        inference_component_name: str,
        min_copies: object,
        max_copies: object,
        copy_count: int,
        instance_scaling: InstanceScaling | None,
    ) -> list[Problem]:
        """Everything wrong with autoscaling a component created with `copy_count` copies between
        `min_copies` and `max_copies` on `instance_scaling`'s instances."""
        subject = _subject(inference_component_name)
        found: list[Problem] = []
        for field, value, low in (("min_copies", min_copies, 0), ("max_copies", max_copies, 1)):
            if not _is_int(value) or value < low:
                found.append(Problem(subject, field, f"must be an integer >= {low}, got {value!r}"))
        if found:
            return found
        assert isinstance(min_copies, int) and isinstance(max_copies, int)
        if min_copies > max_copies:
            return [Problem(subject, "min_copies", f"({min_copies}) must not exceed max_copies ({max_copies})")]
        copies = copy_count
        if not max(min_copies, 1) <= copies <= max_copies:
            found.append(
                Problem(
                    subject,
                    "base_copies.count",
                    f"({copies}) must lie within {max(min_copies, 1)}..{max_copies}: every deploy creates the component "
                    "with base_copies.count copies (never 0), and autoscaling moves it within min_copies..max_copies. Set it "
                    "once and leave it: changing it updates the base component and resets an autoscaled count",
                )
            )
        found += _capacity_problems(instance_scaling, subject, max_copies)
        return found

    # ------------------------------------------------------------------ target tracking

    def scale_on_concurrent_requests(
        self,
        target_requests_per_copy: float,
        *,
        scale_in_cooldown: Duration | None = None,
        scale_out_cooldown: Duration | None = None,
    ) -> appscaling.TargetTrackingScalingPolicy:
        """Keep the requests in flight per copy near `target_requests_per_copy`.

        :param scale_in_cooldown: wait after removing a copy. Default 5 minutes.
        :param scale_out_cooldown: wait after adding a copy. Default 1 minute.
        """
        return self._track(
            CopyScalingMetric.CONCURRENT_REQUESTS_PER_COPY,
            "target_requests_per_copy",
            target_requests_per_copy,
            scale_in_cooldown,
            scale_out_cooldown,
        )

    def scale_on_invocations(
        self,
        target_invocations_per_copy: float,
        *,
        scale_in_cooldown: Duration | None = None,
        scale_out_cooldown: Duration | None = None,
    ) -> appscaling.TargetTrackingScalingPolicy:
        """Keep the requests per copy per minute near `target_invocations_per_copy`.

        :param scale_in_cooldown: wait after removing a copy. Default 5 minutes.
        :param scale_out_cooldown: wait after adding a copy. Default 1 minute.
        """
        return self._track(
            CopyScalingMetric.INVOCATIONS_PER_COPY,
            "target_invocations_per_copy",
            target_invocations_per_copy,
            scale_in_cooldown,
            scale_out_cooldown,
        )

    def _track(
        self,
        metric: CopyScalingMetric,
        field: str,
        target: float,
        scale_in_cooldown: Duration | None,
        scale_out_cooldown: Duration | None,
    ) -> appscaling.TargetTrackingScalingPolicy:
        method = (
            "scale_on_concurrent_requests" if metric is CopyScalingMetric.CONCURRENT_REQUESTS_PER_COPY else "scale_on_invocations"
        )
        subject = _subject(self.inference_component_name)
        scale_in = scale_in_cooldown or Duration.minutes(5)
        scale_out = scale_out_cooldown or Duration.minutes(1)
        problems = []
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target) or target <= 0:
            problems.append(Problem(subject, f"{method}.{field}", f"must be a number > 0, got {target!r}"))
        problems += _cooldown_problems(subject, f"{method}.scale_in_cooldown", scale_in)
        problems += _cooldown_problems(subject, f"{method}.scale_out_cooldown", scale_out)
        if metric in self.tracked:
            problems.append(Problem(subject, method, "is already set; call it once (one policy per metric)"))
        raise_if_any(problems, heading=f"cannot autoscale {self.inference_component_name!r}")
        self.tracked[metric] = float(target)
        return self.scalable_target.scale_to_track_metric(
            metric.name.title().replace("_", ""),
            target_value=float(target),
            predefined_metric=metric.value,
            scale_in_cooldown=scale_in,
            scale_out_cooldown=scale_out,
        )

    # ------------------------------------------------------------------ scale to zero

    def scale_to_zero(
        self,
        *,
        wake_up_cooldown: Duration | None = None,
        scope: WakeUpScope = WakeUpScope.ANY_COMPONENT_IN_REGION,
    ) -> WakeUp:
        """Wake the endpoint from zero copies on the first request that finds no capacity.

        An alarm (`scope`) on ``NoCapacityInvocationFailures`` ``>= 1`` in one minute triggers a
        step-scaling policy that adds one copy; managed instance scaling then starts an instance
        for it. Needs ``min_copies=0`` here and ``Instances(min_count=0)`` on the endpoint; target
        tracking scales the idle endpoint in to zero.

        :param wake_up_cooldown: how long after a wake-up before another copy may be added by it.
            CloudWatch re-invokes a scaling action every minute while the alarm stays in ALARM, and
            requests keep failing until the first copy is up (minutes): a cooldown shorter than a
            cold start adds a copy per minute. Default 10 minutes.
        :param scope: which failures wake it. Default `WakeUpScope.ANY_COMPONENT_IN_REGION`.
        """
        subject = _subject(self.inference_component_name)
        cooldown = wake_up_cooldown or Duration.minutes(10)
        problems = _cooldown_problems(subject, "scale_to_zero.wake_up_cooldown", cooldown)
        if self.min_copies != 0:
            problems.append(
                Problem(
                    subject, "min_copies", f"is {self.min_copies}; scale_to_zero needs auto_scale_copy_count(min_copies=0, ...)"
                )
            )
        scaling = self.instance_scaling
        if scaling is None or scaling.min_instance_count != 0:
            found = "unknown" if scaling is None else scaling.min_instance_count
            problems.append(
                Problem(
                    subject,
                    "instances.min_count",
                    f"is {found}; scale to zero needs MultiAdapterEndpoint(instances=Instances(min_count=0)) so managed instance "
                    "scaling may release the last instance",
                )
            )
        if not isinstance(scope, WakeUpScope):
            problems.append(Problem(subject, "scale_to_zero.scope", f"must be a WakeUpScope, got {scope!r}"))
        if self.wake_up is not None:
            problems.append(Problem(subject, "scale_to_zero", "is already set; call it once"))
        raise_if_any(problems, heading=f"cannot scale {self.inference_component_name!r} to zero")

        action = appscaling.StepScalingAction(
            self,
            "WakeUpPolicy",
            scaling_target=self.scalable_target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=cooldown,
        )
        # Relative to the alarm threshold: failures - 1 >= 0, i.e. one failed request, adds one copy.
        action.add_adjustment(adjustment=1, lower_bound=0)
        alarm = cloudwatch.Alarm(
            self,
            "WakeUpAlarm",
            metric=self._wake_up_metric(scope),
            threshold=1,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"Wakes {self.inference_component_name} from zero copies: a request found no capacity "
                f"({scope.value}); adds one copy"
            ),
        )
        alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(action))
        self.wake_up = WakeUp(alarm=alarm, action=action)
        self.wake_up_scope = scope
        return self.wake_up

    def _wake_up_metric(self, scope: WakeUpScope) -> cloudwatch.IMetric:
        if scope is WakeUpScope.BASE_COMPONENT:
            return self._no_capacity_failures
        return cloudwatch.MathExpression(
            expression=WAKE_UP_QUERY, using_metrics={}, period=WAKE_UP_PERIOD, label="NoCapacityInvocationFailures"
        )


def _subject(inference_component_name: str) -> str:
    return f"base inference component {inference_component_name!r}"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _cooldown_problems(subject: str, field: str, cooldown: object) -> list[Problem]:
    return whole_seconds_problems(subject, field, cooldown, COOLDOWN_RANGE_SECONDS, "Duration.minutes(5)")


def _capacity_problems(scaling: InstanceScaling | None, subject: str, max_copies: int) -> list[Problem]:
    """Managed instance scaling must be able to place `max_copies` copies (on the pool that holds
    fewest, when the endpoint has instance pools)."""
    if scaling is None:
        return [Problem(subject, "instance_scaling", "is unknown; create the component through MultiAdapterEndpoint")]
    try:
        return copies_fit_problems(
            subject,
            scaling,
            copies=max_copies,
            copies_field="max_copies",
            instance_count=scaling.max_instance_count,
            count_field="instances.max_count",
        )
    except UnknownInstanceType as error:
        return [
            Problem(
                subject, "instances.instance_type", f"{error}; autoscaling needs its GPUs and memory to check that max_copies fit"
            )
        ]


@jsii.implements(IValidation)
class _ScalingValidation:
    """At synth, when every method has been called: no configuration that strands the endpoint."""

    def __init__(self, copies: ScalableCopyCount) -> None:
        self._copies = copies

    def validate(self) -> list[str]:
        copies = self._copies
        subject = _subject(copies.inference_component_name)
        found = []
        if not copies.tracked:
            found.append(
                f"{subject}: auto_scale_copy_count: has no scaling policy; call scale_on_concurrent_requests(...) or "
                "scale_on_invocations(...)"
            )
        if copies.min_copies == 0 and copies.wake_up is None:
            found.append(
                f"{subject}: min_copies: is 0 without scale_to_zero(): nothing would add the first copy back after "
                "scaling in to zero"
            )
        return found


__all__ = [
    "COPY_COUNT_DIMENSION",
    "WAKE_UP_QUERY",
    "CopyScalingMetric",
    "ScalableCopyCount",
    "WakeUp",
    "WakeUpScope",
]
