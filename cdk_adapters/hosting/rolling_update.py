"""Rolling update with auto-rollback for the base inference component: typed `DeploymentConfig`.

A base-model or image upgrade replaces every copy of the base component, and every tenant is
served by those copies. A rolling update replaces them a batch at a time and watches alarms
between batches; when one fires, SageMaker puts the old copies back. Sources: the
CloudFormation schema of ``AWS::SageMaker::InferenceComponent``
(``DeploymentConfig`` is write-only and applied only on updates; ``WaitIntervalInSeconds`` 0-3600,
``MaximumExecutionTimeoutInSeconds`` 600-28800, ``Alarms`` 1-10) and botocore's
``InferenceComponentRollingUpdatePolicy``, which the CloudFormation schema does not enforce:

* ``RollingUpdatePolicy`` needs ``MaximumBatchSize`` and ``WaitIntervalInSeconds``;
* a batch "must be between 5% to 50% of the copy count".

**The single-copy caveat.** With one copy, no batch is 5-50% of the copies (one copy is 100%), so
a rolling update of a one-copy base component is refused here: run at least two copies (AWS's own
rolling-update sample uses two) or leave `deployment` unset (SageMaker then replaces the copy
without a rollback guard). Whether SageMaker itself would accept a one-copy roll is unconfirmed;
refusing is the cheap side of being wrong. SageMaker may launch an extra instance for the roll
(AWS sample notebooks), so keep ``Instances.max_count`` above what the copies need.

A rollback needs an alarm: SageMaker rolls back only when an alarm in
``AutoRollbackConfiguration`` fires, so a rollback batch size with no alarm is refused rather
than shipped as a guard that never triggers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.problems import Problem

COPY_COUNT = "COPY_COUNT"
CAPACITY_PERCENT = "CAPACITY_PERCENT"
BATCH_SIZE_TYPES = (COPY_COUNT, CAPACITY_PERCENT)
BATCH_PERCENT_RANGE = (5, 50)
"""What botocore says a batch is: 5% to 50% of the copy count."""
ROLLBACK_PERCENT_RANGE = (5, 100)
WAIT_INTERVAL_RANGE_SECONDS = (0, 3600)
EXECUTION_TIMEOUT_RANGE_SECONDS = (600, 28800)
MAX_ROLLBACK_ALARMS = 10


@dataclass(frozen=True)
class BatchSize:
    """``InferenceComponentCapacitySize``: copies, or a percentage of the copies."""

    type: str
    value: int

    @staticmethod
    def copies(count: int) -> BatchSize:
        return BatchSize(COPY_COUNT, count)

    @staticmethod
    def percent(share: int) -> BatchSize:
        return BatchSize(CAPACITY_PERCENT, share)

    def problems(self, subject: str, field_name: str, copy_count: int | None, percent_range: tuple[int, int]) -> list[Problem]:
        """`copy_count` None: the copies are not bounded (a rollback restores any number)."""
        if self.type not in BATCH_SIZE_TYPES:
            return [Problem(subject, f"{field_name}.type", f"must be one of {', '.join(BATCH_SIZE_TYPES)}, got {self.type!r}")]
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            return [Problem(subject, f"{field_name}.value", f"must be an integer, got {value!r}")]
        low, high = percent_range
        if self.type == CAPACITY_PERCENT and not low <= value <= high:
            return [Problem(subject, f"{field_name}.value", f"is {value}%; SageMaker accepts {low}% to {high}% of the copies")]
        if self.type == COPY_COUNT:
            if value < 1:
                return [Problem(subject, f"{field_name}.value", f"must be at least 1 copy, got {value}")]
            least = None if copy_count is None else max(1, -(-copy_count * low // 100))
            if least is not None and value < least:
                return [
                    Problem(
                        subject,
                        f"{field_name}.value",
                        f"is {value} of {copy_count} copies; SageMaker takes at least {low}% of the copies per batch "
                        f"({least} here)",
                    )
                ]
            most = None if copy_count is None else copy_count * high // 100
            if most is not None and value > most:
                return [
                    Problem(
                        subject,
                        f"{field_name}.value",
                        f"is {value} of {copy_count} copies; SageMaker takes at most {high}% of the copies per batch "
                        f"({most} here)",
                    )
                ]
        return []

    def render(self) -> sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty:
        return sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(type=self.type, value=self.value)


def _five_minutes() -> Duration:
    return Duration.minutes(5)


def _one_copy() -> BatchSize:
    return BatchSize.copies(1)


@dataclass(frozen=True)
class RollingUpdate:
    """How the base component's copies are replaced on an update, and what rolls it back.

    ``RollingUpdate(rollback_on_endpoint_alarms=("error_rate",))`` rolls back when the
    endpoint's own error-rate alarm fires (it needs the endpoint's alarms on).
    """

    maximum_batch_size: BatchSize = field(default_factory=_one_copy)
    """Copies replaced per step. Default one copy. 5-50% of the copies."""
    wait_interval: Duration = field(default_factory=_five_minutes)
    """Bake time after each batch while the alarms are watched. Default 5 minutes; 0 to 3600 s."""
    maximum_execution_timeout: Duration | None = None
    """Give up (and roll back) after this long. Default SageMaker's; 600 to 28,800 s."""
    rollback_maximum_batch_size: BatchSize | None = None
    """Copies restored per rollback step. Default SageMaker's: all at once (blue/green)."""
    rollback_alarms: Sequence[cloudwatch.IAlarm] = ()
    """Alarms (in the endpoint's stack, or imported by name) that trigger a rollback."""
    rollback_on_endpoint_alarms: Sequence[str] = ()
    """Names of the endpoint's own alarms that trigger a rollback: ``error_rate``,
    ``latency_p95``, ``cold_start_share`` (see `cdk_adapters.monitoring.alarms`)."""

    def problems(self, subject: str, copy_count: int, endpoint_alarms: Sequence[str]) -> list[Problem]:
        """Everything SageMaker's API would refuse, and a rollback that could never trigger.

        :param endpoint_alarms: the alarm kinds the endpoint creates (for `rollback_on_endpoint_alarms`).
        """
        found: list[Problem] = []
        field_prefix = "deployment"
        if isinstance(copy_count, int) and not isinstance(copy_count, bool) and copy_count < 2:
            found.append(
                Problem(
                    subject,
                    f"{field_prefix}.maximum_batch_size",
                    f"a rolling update replaces 5-50% of the copies per batch, and base_copies.count={copy_count} has no such "
                    "batch; run base_copies.count >= 2 (AWS's sample uses 2) or leave deployment unset",
                )
            )
        else:
            found += self.maximum_batch_size.problems(
                subject, f"{field_prefix}.maximum_batch_size", copy_count, BATCH_PERCENT_RANGE
            )
        if self.rollback_maximum_batch_size is not None:
            found += self.rollback_maximum_batch_size.problems(
                subject, f"{field_prefix}.rollback_maximum_batch_size", None, ROLLBACK_PERCENT_RANGE
            )
        found += _seconds_problems(subject, f"{field_prefix}.wait_interval", self.wait_interval, WAIT_INTERVAL_RANGE_SECONDS)
        if self.maximum_execution_timeout is not None:
            found += _seconds_problems(
                subject,
                f"{field_prefix}.maximum_execution_timeout",
                self.maximum_execution_timeout,
                EXECUTION_TIMEOUT_RANGE_SECONDS,
            )
        if isinstance(self.rollback_on_endpoint_alarms, str):
            found.append(
                Problem(
                    subject,
                    f"{field_prefix}.rollback_on_endpoint_alarms",
                    f"must be a list of alarm names, got {self.rollback_on_endpoint_alarms!r}",
                )
            )
        else:
            for name in self.rollback_on_endpoint_alarms:
                if name not in endpoint_alarms:
                    made = ", ".join(endpoint_alarms) or "none (alarms are off)"
                    found.append(
                        Problem(
                            subject,
                            f"{field_prefix}.rollback_on_endpoint_alarms",
                            f"{name!r} is not an alarm of this endpoint (it creates: {made}); turn the endpoint's alarms on "
                            "with alarms=MonitoringAlarms(...) or name another",
                        )
                    )
        count = self.alarm_count
        if self.rollback_maximum_batch_size is not None and count == 0:
            found.append(
                Problem(
                    subject,
                    f"{field_prefix}.rollback_maximum_batch_size",
                    "is set but no alarm can trigger a rollback: SageMaker rolls back only when an alarm fires; add "
                    "rollback_alarms or rollback_on_endpoint_alarms (e.g. ('error_rate',))",
                )
            )
        if count > MAX_ROLLBACK_ALARMS:
            found.append(
                Problem(
                    subject,
                    f"{field_prefix}.rollback_alarms",
                    f"names {count} alarms; SageMaker takes at most {MAX_ROLLBACK_ALARMS}",
                )
            )
        return found

    @property
    def alarm_count(self) -> int:
        extra = 0 if isinstance(self.rollback_on_endpoint_alarms, str) else len(self.rollback_on_endpoint_alarms)
        return len(self.rollback_alarms) + extra

    def render(
        self, endpoint_alarms: Mapping[str, cloudwatch.IAlarm]
    ) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
        """The L1 property; `endpoint_alarms` maps the endpoint's alarm kinds to its alarms."""
        alarms = [*self.rollback_alarms, *(endpoint_alarms[name] for name in self.rollback_on_endpoint_alarms)]
        return sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
                maximum_batch_size=self.maximum_batch_size.render(),
                wait_interval_in_seconds=int(self.wait_interval.to_seconds()),
                maximum_execution_timeout_in_seconds=int(self.maximum_execution_timeout.to_seconds())
                if self.maximum_execution_timeout is not None
                else None,
                rollback_maximum_batch_size=self.rollback_maximum_batch_size.render()
                if self.rollback_maximum_batch_size is not None
                else None,
            ),
            auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
                alarms=[sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=alarm.alarm_name) for alarm in alarms]
            )
            if alarms
            else None,
        )


def _seconds_problems(subject: str, field_name: str, value: object, allowed: tuple[int, int]) -> list[Problem]:
    if not isinstance(value, Duration):
        return [Problem(subject, field_name, f"must be a Duration (e.g. Duration.minutes(5)), got {value!r}")]
    if Token.is_unresolved(value):
        return []
    seconds = value.to_seconds()
    low, high = allowed
    if not low <= seconds <= high:
        return [Problem(subject, field_name, f"is {seconds:g} s; SageMaker accepts {low} to {high} s")]
    return []
