"""The eval verdict `promote` trusts: pass rates, the margin at its edge, failed calls, and the
latency percentiles, on hand-built results (no server), each at the boundary a bug would move."""

from __future__ import annotations

import pytest

from cdk_adapters.evaluation.runner import ALL, CaseResult, TargetResult, compare, percentile


def case(case_id: str, *, contains: bool | None = None, error: str | None = None, latency_ms: float = 10.0) -> CaseResult:
    checks = {} if contains is None else {"contains": contains}
    if error is not None and contains is not None:
        checks = {"contains": False}
    return CaseResult(case_id, "" if error else "text", checks, latency_ms, error=error)


def result(target: str, *cases: CaseResult) -> TargetResult:
    return TargetResult(target, list(cases))


def test_a_candidate_exactly_at_the_margin_passes_and_just_past_it_fails():
    reference = result("v1", *(case(f"c{i}", contains=True) for i in range(20)))
    at_margin = result("v2", *(case(f"c{i}", contains=i != 0) for i in range(20)))  # 19/20: 0.05 below
    past_margin = result("v3", *(case(f"c{i}", contains=i > 1) for i in range(20)))  # 18/20: 0.10 below
    verdicts = {v.candidate: v for v in compare({"v1": reference, "v2": at_margin, "v3": past_margin}, "v1", 0.05)}
    assert verdicts["v2"].passed, verdicts["v2"].worse
    assert not verdicts["v3"].passed
    assert verdicts["v3"].worse == {"contains": (0.9, 1.0), ALL: (0.9, 1.0)}


def test_the_margin_is_the_one_given_not_a_multiple_of_it():
    reference = result("v1", *(case(f"c{i}", contains=True) for i in range(10)))
    candidate = result("v2", *(case(f"c{i}", contains=i > 1) for i in range(10)))  # 0.8: 0.2 below
    assert not compare({"v1": reference, "v2": candidate}, "v1", 0.15)[0].passed
    assert compare({"v1": reference, "v2": candidate}, "v1", 0.2)[0].passed


def test_a_failed_call_on_a_case_without_checks_still_fails_the_case():
    """A case that asks for nothing is counted in ALL only when its call failed."""
    target = result("v1", case("plain"), case("broken", error="InvocationFailed: 500"), case("checked", contains=True))
    assert target.rates() == {"contains": (1, 1), ALL: (1, 2)}
    reference = result("v0", case("plain"), case("broken"), case("checked", contains=True))
    assert reference.rates() == {"contains": (1, 1), ALL: (1, 1)}
    [verdict] = compare({"v0": reference, "v1": target}, "v0", 0.05)
    assert verdict.worse == {ALL: (0.5, 1.0)}


def test_a_check_the_candidate_never_scored_counts_as_lost():
    reference = result("v1", case("a", contains=True))
    candidate = result("v2", case("a"))
    [verdict] = compare({"v1": reference, "v2": candidate}, "v1", 0.05)
    assert verdict.worse["contains"] == (0.0, 1.0)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, 0.0),
        ([7.0], 95, 7.0),
        ([1.0, 2.0], 50, 1.0),  # ceil(2 * 0.5) = 1st
        ([1.0, 2.0, 3.0], 50, 2.0),  # ceil(1.5) = 2nd
        ([float(i) for i in range(1, 21)], 95, 19.0),  # ceil(19) = 19th, not the 20th
        ([float(i) for i in range(1, 22)], 95, 20.0),  # ceil(19.95) = 20th
        ([float(i) for i in range(1, 101)], 50, 50.0),
    ],
)
def test_percentiles_are_nearest_rank(values, q, expected):
    assert percentile(values, q) == expected


def test_the_summary_reports_p50_and_p95_of_the_latencies():
    target = result("v1", *(case(f"c{i}", contains=True, latency_ms=float(i)) for i in range(20, 0, -1)))
    assert target.summary()["latency_ms"] == {"p50": 10.0, "p95": 19.0}
