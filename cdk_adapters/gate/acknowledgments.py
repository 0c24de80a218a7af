"""Acknowledged findings, in cdk-nag's model: a rule id plus the reason it does not apply here.

A manifest row may acknowledge one gate rule. Its findings are then reported apart from the
problems (``cdk-adapters validate`` lists them) and do not fail the gate. Only rules that run
nowhere else can be acknowledged: the serving container re-runs every adapter rule when
SageMaker registers the adapter, so acknowledging one of those would only move the failure to
the deploy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cdk_adapters.gate.checks import RULES
from cdk_adapters.problems import Problem

MIN_REASON_LENGTH = 10
"""A reason is a sentence a reviewer can check, not ``ok`` or ``n/a``."""


@dataclass(frozen=True)
class Acknowledgment:
    """One rule acknowledged for one adapter, and why."""

    rule: str
    reason: str


@dataclass(frozen=True)
class AcknowledgedFinding:
    """A problem the gate found and the adapter's row acknowledged."""

    problem: Problem
    reason: str

    def __str__(self) -> str:
        return f"{self.problem} (acknowledged: {self.reason})"


def acknowledgeable_rules() -> list[str]:
    return sorted(rule for rule, check in RULES.items() if check.acknowledgeable)


def rule_error(rule: object) -> str | None:
    """Why `rule` cannot be acknowledged, or None when it can."""
    allowed = ", ".join(acknowledgeable_rules())
    if not isinstance(rule, str) or rule not in RULES:
        return f"{rule!r} is not a rule of the gate; rules that can be acknowledged: {allowed}"
    if not RULES[rule].acknowledgeable:
        return (
            f"{rule!r} cannot be acknowledged: the adapter would still fail later (the serving container "
            "re-runs every adapter rule when SageMaker registers it; duplicate names clash in SageMaker); "
            f"fix the adapter. Rules that can be acknowledged: {allowed}"
        )
    return None


def reason_error(reason: object) -> str | None:
    """Why `reason` is not a reason, or None when it is one."""
    if not isinstance(reason, str) or len(reason.strip()) < MIN_REASON_LENGTH:
        return f"an acknowledgment must say why the rule does not apply to this adapter (at least {MIN_REASON_LENGTH} characters)"
    return None


def split_acknowledged(
    problems: Iterable[Problem], acknowledgments: Mapping[str, Acknowledgment]
) -> tuple[list[Problem], list[AcknowledgedFinding]]:
    """(open problems, acknowledged findings): a problem is acknowledged when its subject's
    acknowledgment (`acknowledgments` is keyed by subject, e.g. ``adapter 'x'``) names its rule."""
    open_problems: list[Problem] = []
    acknowledged: list[AcknowledgedFinding] = []
    for problem in problems:
        acknowledgment = acknowledgments.get(problem.subject)
        if acknowledgment is not None and problem.rule is not None and problem.rule == acknowledgment.rule:
            acknowledged.append(AcknowledgedFinding(problem, acknowledgment.reason))
        else:
            open_problems.append(problem)
    return open_problems, acknowledged
