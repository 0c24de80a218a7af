"""The gate's rules have ids (cdk-nag's model): every problem names its rule, and only rules that
nothing checks later can be acknowledged."""

from __future__ import annotations

import pkgutil

import pytest

from cdk_adapters.gate import ADAPTER_CHECKS, CO_HOSTED_CHECKS, RULES, Reference, check_adapter_dir
from cdk_adapters.gate import checks as checks_package
from cdk_adapters.gate.acknowledgments import acknowledgeable_rules, reason_error, rule_error
from cdk_adapters.problems import Problem

NOT_RULES = {"base", "co_hosted"}
"""Modules of gate/checks/ that hold shared code or several rules."""


def test_every_single_adapter_rule_is_its_modules_name():
    modules = {info.name for info in pkgutil.iter_modules(checks_package.__path__)} - NOT_RULES
    assert {check.id for check in ADAPTER_CHECKS} == {name.replace("_", "-") for name in modules}
    for check in ADAPTER_CHECKS:
        module = __import__(check.run.__module__, fromlist=["CHECK"])
        assert module.CHECK is check and module.__name__.rsplit(".", 1)[1].replace("_", "-") == check.id


def test_rule_ids_are_unique_and_cover_the_co_hosted_checks():
    ids = [check.id for check in (*ADAPTER_CHECKS, *CO_HOSTED_CHECKS)]
    assert len(ids) == len(set(ids)) == len(RULES)
    assert {check.id for check in CO_HOSTED_CHECKS} == {"unique-names", "version-suffix", "identical-target-modules"}


def test_every_problem_of_a_bad_adapter_carries_its_rule_and_shows_it(zoo):
    problems = check_adapter_dir("tenant-v1", zoo.adapter("rank-32"), Reference(zoo.base_facts, 16))
    assert [p.rule for p in problems] == ["rank-limit"]
    assert str(problems[0]).startswith("adapter 'tenant-v1': r: rank 32 exceeds max_lora_rank 16")
    assert str(problems[0]).endswith(" [rank-limit]")


def test_problems_without_a_rule_read_as_before():
    assert str(Problem("E", "image", "is wrong")) == "E: image: is wrong"
    assert Problem("E", "image", "is wrong") != Problem("E", "image", "is wrong", rule="rank-limit")


def test_only_rules_nothing_rechecks_can_be_acknowledged():
    # Adapter rules run again in the serving container at registration; duplicate names clash in SageMaker.
    assert acknowledgeable_rules() == ["identical-target-modules", "version-suffix"]
    assert rule_error("identical-target-modules") is None


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        (
            "rank-limits",
            "'rank-limits' is not a rule of the gate; rules that can be acknowledged: identical-target-modules, version-suffix",
        ),
        ("rank-limit", "'rank-limit' cannot be acknowledged: the adapter would still fail later"),
        ("unique-names", "'unique-names' cannot be acknowledged"),
    ],
)
def test_unknown_and_unacknowledgeable_rules_are_refused(rule, says):
    assert says in rule_error(rule)


@pytest.mark.parametrize("reason", [None, "", "   ", "ok"])
def test_an_acknowledgment_needs_a_reason(reason):
    assert "must say why the rule does not apply" in reason_error(reason)
