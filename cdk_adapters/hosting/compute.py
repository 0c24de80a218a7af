"""What one copy of the base model reserves, how long a copy may take to start, and whether copies
fit on the endpoint's instances.

Both the base inference component (which renders the reservation) and copy-count autoscaling (which
checks that its ceiling can be placed) need these facts, and the endpoint checks its initial copies
with the same rule, so they live here once. Depends only on `instance_types` and `problems`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from aws_cdk import Duration

from cdk_adapters.hosting.instance_types import UnknownInstanceType, instance_type
from cdk_adapters.problems import Problem

STARTUP_TIMEOUT_RANGE_SECONDS = (60, 3600)
"""What SageMaker accepts for both startup timeouts."""


@dataclass(frozen=True)
class ComputeRequirements:
    """What one copy of the base model reserves on an instance.

    `min_memory_required_in_mb` has no default on purpose: the CloudFormation schema makes it
    optional but the SageMaker API refuses a component without it, so leaving it out would only
    fail at deploy time.
    """

    min_memory_required_in_mb: int | None = None
    """Host memory reserved per copy, in MiB (required)."""
    accelerator_devices: int = 1
    """GPUs per copy. Default 1."""
    cpu_cores: float | None = None
    """CPU cores reserved per copy. Default: none reserved."""
    max_memory_required_in_mb: int | None = None
    """Upper bound of host memory per copy. Default: none."""

    def problems(self, subject: str, prefix: str = "compute") -> list[Problem]:
        found: list[Problem] = []
        memory = self.min_memory_required_in_mb
        if memory is None:
            found.append(
                Problem(
                    subject,
                    f"{prefix}.min_memory_required_in_mb",
                    "is required: SageMaker refuses an inference component without it (size it to the "
                    "host memory one model copy needs, e.g. 16384 for an 8B model)",
                )
            )
        elif isinstance(memory, bool) or not isinstance(memory, int) or memory < 128:
            found.append(Problem(subject, f"{prefix}.min_memory_required_in_mb", f"must be an integer >= 128, got {memory!r}"))
        if (
            isinstance(self.accelerator_devices, bool)
            or not isinstance(self.accelerator_devices, int)
            or self.accelerator_devices < 1
        ):
            found.append(
                Problem(subject, f"{prefix}.accelerator_devices", f"must be a positive integer, got {self.accelerator_devices!r}")
            )
        if self.cpu_cores is not None and not (isinstance(self.cpu_cores, (int, float)) and self.cpu_cores > 0):
            found.append(Problem(subject, f"{prefix}.cpu_cores", f"must be positive, got {self.cpu_cores!r}"))
        top = self.max_memory_required_in_mb
        if top is not None and isinstance(memory, int) and (not isinstance(top, int) or top < memory):
            found.append(
                Problem(
                    subject,
                    f"{prefix}.max_memory_required_in_mb",
                    f"must be >= min_memory_required_in_mb ({memory}), got {top!r}",
                )
            )
        return found


def _twenty_minutes() -> Duration:
    return Duration.minutes(20)


@dataclass(frozen=True)
class StartupTimeouts:
    """How long SageMaker waits for a new copy. LLMs need 15-30 minutes to download and load
    weights; SageMaker's own defaults are sized for small models and fail them."""

    model_data_download: Duration = field(default_factory=_twenty_minutes)
    """Downloading the weights. Default 20 minutes; 60 s to 3600 s."""
    container_startup_health_check: Duration = field(default_factory=_twenty_minutes)
    """From container start to a healthy ``/ping``. Default 20 minutes; 60 s to 3600 s."""

    def problems(self, subject: str) -> list[Problem]:
        low, high = STARTUP_TIMEOUT_RANGE_SECONDS
        found: list[Problem] = []
        for name in ("model_data_download", "container_startup_health_check"):
            seconds = getattr(self, name).to_seconds()
            if not low <= seconds <= high:
                found.append(
                    Problem(subject, f"base_copies.startup.{name}", f"is {seconds:g} s; SageMaker accepts {low} to {high} s")
                )
        return found

    def seconds(self) -> tuple[int, int]:
        return int(self.model_data_download.to_seconds()), int(self.container_startup_health_check.to_seconds())


def whole_seconds_problems(
    subject: str, field: str, duration: object, seconds_range: tuple[int, int], example: str
) -> list[Problem]:
    """`duration` must be a `Duration` of whole seconds within `seconds_range` (the API takes
    integers): the rule for autoscaling cooldowns and the capacity-provisioning timeout."""
    low, high = seconds_range
    if not isinstance(duration, Duration):
        return [Problem(subject, field, f"must be a Duration (e.g. {example}), got {duration!r}")]
    seconds = duration.to_milliseconds() / 1000
    if seconds != int(seconds) or not low <= seconds <= high:
        return [Problem(subject, field, f"is {seconds:g} s; must be whole seconds from {low} to {high}")]
    return []


def copies_per_instance(instance_type_name: str, compute: ComputeRequirements) -> tuple[int, str]:
    """How many copies of `compute` one `instance_type_name` instance holds, and the resource that
    limits it.

    Raises `UnknownInstanceType` when the instance type is not in the table. Host memory is AWS's
    published figure; SageMaker keeps some for itself, so this is an upper bound and the check
    refuses only what certainly cannot fit.
    """
    row = instance_type(instance_type_name)
    if row is None:
        raise UnknownInstanceType(instance_type_name)
    limits = {
        f"{row.gpu_count} GPU(s), {compute.accelerator_devices} per copy": row.gpu_count // compute.accelerator_devices,
        f"{row.host_memory_gib:g} GiB host memory, {compute.min_memory_required_in_mb} MiB per copy": int(
            row.host_memory_gib * 1024 // (compute.min_memory_required_in_mb or 1)
        ),
    }
    if compute.cpu_cores:
        limits[f"{row.vcpus} vCPUs, {compute.cpu_cores:g} per copy"] = int(row.vcpus // compute.cpu_cores)
    reason, count = min(limits.items(), key=lambda item: item[1])
    return count, reason


@dataclass(frozen=True)
class InstanceScaling:
    """The instances managed instance scaling may run, and what one copy reserves on each type.

    `reservations` holds one ``(instance type, reservation)`` pair per type the variant may launch:
    one for a single `instance_type`, one per pool in priority order for instance pools.
    """

    reservations: tuple[tuple[str, ComputeRequirements], ...]
    min_instance_count: int
    max_instance_count: int

    @property
    def instance_types(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.reservations)

    def fewest_copies_per_instance(self) -> tuple[int, str, str]:
        """The worst case over the types: ``(copies, instance type, limiting resource)`` for the type
        that holds the fewest copies (managed scaling may have launched any of them). The first
        type wins a tie. Raises `UnknownInstanceType` for a type not in the table."""
        placements = [(name, *copies_per_instance(name, compute)) for name, compute in self.reservations]
        name, count, reason = min(placements, key=lambda placement: placement[1])
        return count, name, reason


def copies_fit_problems(
    subject: str,
    scaling: InstanceScaling,
    *,
    copies: int,
    copies_field: str,
    instance_count: int,
    count_field: str,
) -> list[Problem]:
    """`copies` copies must fit on `instance_count` instances, each of the type that holds fewest.

    The one rule for the copies a deploy starts with (``base_copies.count`` on ``instances.initial_count``
    instances) and the copies autoscaling may reach (``max_copies`` on ``instances.max_count``).
    Raises `UnknownInstanceType` for a type not in the table; callers decide whether that is a
    problem.
    """
    per_instance, name, reason = scaling.fewest_copies_per_instance()
    which = f"a {name}" if len(scaling.reservations) == 1 else f"the pool that holds fewest, a {name},"
    if per_instance < 1:
        return [Problem(subject, "compute", f"one copy does not fit on a {name} ({reason})")]
    room = per_instance * instance_count
    if copies <= room:
        return []
    needed = math.ceil(copies / per_instance)
    return [
        Problem(
            subject,
            copies_field,
            f"({copies}) does not fit: {which} holds {per_instance} copies ({reason}), so "
            f"{count_field}={instance_count} holds {room}; raise {count_field} to {needed} "
            f"or lower {copies_field} to {room}",
        )
    ]


__all__ = [
    "STARTUP_TIMEOUT_RANGE_SECONDS",
    "ComputeRequirements",
    "InstanceScaling",
    "StartupTimeouts",
    "copies_fit_problems",
    "copies_per_instance",
    "whole_seconds_problems",
]
