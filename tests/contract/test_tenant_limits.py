"""The fair-share settings' codec: what the construct (or an operator) writes, the container reads back."""

from __future__ import annotations

from cdk_adapters.contract import tenant_limits


def test_engine_headroom_round_trips_and_defaults_by_the_engines_budget():
    limits, problems = tenant_limits.decode(tenant_limits.environment(engine_in_flight=8, engine_headroom=2))
    assert problems == [] and (limits.engine_in_flight, limits.engine_headroom) == (8, 2)
    limits, problems = tenant_limits.decode(tenant_limits.environment(engine_headroom=0))
    assert problems == [] and limits.engine_headroom == 0
    assert tenant_limits.decode({})[0].engine_headroom is None  # the container picks `default_headroom`
    assert [tenant_limits.default_headroom(n) for n in (1, 2, 3, 4, 16)] == [0, 0, 0, 1, 1]


def test_bad_engine_settings_are_all_named():
    _, problems = tenant_limits.decode({tenant_limits.ENGINE_HEADROOM_ENV: "-1", tenant_limits.ENGINE_IN_FLIGHT_ENV: "zero"})
    assert [(p.subject, p.field) for p in problems] == [
        (tenant_limits.ENGINE_IN_FLIGHT_ENV, "value"), (tenant_limits.ENGINE_HEADROOM_ENV, "value"),
    ]
    assert "whole number >= 0, got '-1'" in str(problems[1])
