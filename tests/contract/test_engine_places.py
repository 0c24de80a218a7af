"""The engine's places for fair share, as both sides read them: how many requests enter vLLM at once
(`CDK_ADAPTERS_ENGINE_IN_FLIGHT`) and how many of those are kept free for adapters with none there
(`CDK_ADAPTERS_ENGINE_HEADROOM`), round-tripped through `tenant_limits` and refused by name."""

from __future__ import annotations

import pytest

from cdk_adapters.contract import tenant_limits


def test_the_settings_round_trip_through_the_container_variables():
    environ = tenant_limits.environment(engine_in_flight=8, engine_headroom=2)
    assert environ == {tenant_limits.ENGINE_IN_FLIGHT_ENV: "8", tenant_limits.ENGINE_HEADROOM_ENV: "2"}
    limits, problems = tenant_limits.decode(environ)
    assert problems == []
    assert (limits.engine_in_flight, limits.engine_headroom) == (8, 2)
    assert limits.headroom_for(8) == 2


def test_zero_headroom_is_a_setting_not_an_absence():
    limits, problems = tenant_limits.decode(tenant_limits.environment(engine_headroom=0))
    assert problems == [] and limits.engine_headroom == 0
    assert limits.headroom_for(256) == 0


@pytest.mark.parametrize(("engine_in_flight", "kept"), [(1, 0), (3, 0), (4, 1), (256, 1)])
def test_by_default_one_place_is_kept_from_a_batch_of_four_up(engine_in_flight, kept):
    limits, _ = tenant_limits.decode({})
    assert limits.engine_headroom is None
    assert limits.headroom_for(engine_in_flight) == kept


@pytest.mark.parametrize("raw", ["-1", "one", "1.5"])
def test_a_bad_headroom_is_refused_naming_the_variable(raw):
    _, problems = tenant_limits.decode({tenant_limits.ENGINE_HEADROOM_ENV: raw})
    assert [(p.subject, p.field) for p in problems] == [(tenant_limits.ENGINE_HEADROOM_ENV, "value")]
    assert f"must be a whole number >= 0, got {raw!r}" in problems[0].message
