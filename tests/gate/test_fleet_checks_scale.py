"""The endpoint-wide checks at fleet size: every finding reported, each message of bounded size.

One message per differing adapter that listed every peer grew with the square of the fleet; the
growth of the checks' time itself is measured in benchmarks/bench_fleet_checks.py.
"""

from __future__ import annotations

from cdk_adapters.gate import CoHostedAdapter
from cdk_adapters.gate.checks.co_hosted import CO_HOSTED_CHECKS

ATTENTION = ("k_proj", "o_proj", "q_proj", "v_proj")


def fleet(count: int) -> list[CoHostedAdapter]:
    """`count` adapters; every third targets only q_proj/v_proj, one name is given twice in another case."""
    adapters = [CoHostedAdapter(f"tenant-{i:05d}-v1", ATTENTION if i % 3 else ("q_proj", "v_proj")) for i in range(count)]
    return [*adapters, CoHostedAdapter("TENANT-00001-v1", ATTENTION)]


def test_a_thousand_adapters_get_every_finding_in_messages_of_bounded_size():
    adapters = fleet(1000)
    problems = [problem for check in CO_HOSTED_CHECKS for problem in check(adapters)]
    differing = [p for p in problems if p.field == "target_modules"]
    assert len(differing) == len(range(0, 1000, 3))  # every differing adapter is named
    assert {p.rule for p in differing} == {"identical-target-modules"}
    assert all("and 663 more target k_proj, o_proj, q_proj, v_proj" in p.message for p in differing)
    assert max(len(p.message) for p in problems) < 500
    [duplicate] = [p for p in problems if p.field == "name"]
    assert duplicate.subject == "adapter 'tenant-00001-v1'" and "'TENANT-00001-v1'" in duplicate.message
