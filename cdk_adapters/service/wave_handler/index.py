"""The wave gate's Lambda handlers: hold a later cell's upgrade while the first wave bakes.

They run as the ``onEvent`` and ``isComplete`` handlers of a CDK provider-framework custom resource
(`cdk_adapters.service.wave_gate`) in each later cell's stack, which that cell's model depends on.
When an update changes the cell's ``Fingerprint`` (what the model runs: image, weights,
environment), ``onEvent`` starts a bake of ``BakeSeconds``; ``isComplete`` then checks the first
wave's alarms every minute and raises, failing this cell's update before its model changes, as
soon as one is in ALARM, and completes once the bake time passed quietly. A create, a delete, an
update that leaves the fingerprint alone, and the update a rollback sends bake nothing.

Standard library and boto3 only (the Lambda Python runtime's). `cdk-adapters bake` uses
`watched_alarms` too, so the gate and the command watch the same alarms.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ALARM = "ALARM"


class WaveStopped(Exception):
    """An alarm of the first wave fired during the bake: this cell's upgrade stops."""


def watched_alarms(cloudwatch: Any, prefixes: Sequence[str]) -> dict[str, str]:
    """Alarm name -> state, for the alarms of each component prefix: ``<prefix>/...`` (the endpoint's)
    and ``<prefix>-<adapter>/...`` (each adapter's), not another endpoint whose name merely starts alike."""
    found = {}
    for prefix in prefixes:
        for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]):
            for alarm in page["MetricAlarms"]:
                name = alarm["AlarmName"]
                rest = name[len(prefix) :]
                if rest.startswith("/") or (rest.startswith("-") and "/" in rest):
                    found[name] = alarm["StateValue"]
    return found


def rolling_back(cloudformation: Any, stack_id: str) -> bool:
    """Whether the stack is rolling back (baking then would hold, or fail, the rollback)."""
    [stack] = cloudformation.describe_stacks(StackName=stack_id)["Stacks"]
    return str(stack["StackStatus"]).endswith("ROLLBACK_IN_PROGRESS")


def start(event: Mapping[str, Any], cloudformation: Any, now: Callable[[], float] = time.time) -> dict[str, Any]:
    """``onEvent``: when the bake ends (``Data.BakeUntil``, epoch seconds; 0: no bake)."""
    properties = event["ResourceProperties"]
    physical = event.get("PhysicalResourceId") or f"wave-gate-{properties['Cell']}"
    changed = (
        event["RequestType"] == "Update"
        and (event.get("OldResourceProperties") or {}).get("Fingerprint") != properties["Fingerprint"]
    )
    until = now() + float(properties["BakeSeconds"]) if changed and not rolling_back(cloudformation, event["StackId"]) else 0.0
    print(json.dumps({"event": "cdk_adapters.wave_gate", "request": event["RequestType"], "bake_until": until}))
    return {"PhysicalResourceId": physical, "Data": {"BakeUntil": str(until)}}


def check(event: Mapping[str, Any], cloudwatch: Any, now: Callable[[], float] = time.time) -> dict[str, Any]:
    """``isComplete``: raise `WaveStopped` naming the first wave's alarms in ALARM; complete once the bake passed."""
    until = float((event.get("Data") or {}).get("BakeUntil") or 0)
    if until == 0:
        return {"IsComplete": True}
    prefixes = list(event["ResourceProperties"]["WatchedPrefixes"])
    alarms = watched_alarms(cloudwatch, prefixes)
    if not alarms:
        raise WaveStopped(f"no alarm is named after the first wave ({', '.join(prefixes)}): a bake without alarms proves nothing")
    fired = sorted(name for name, state in alarms.items() if state == ALARM)
    if fired:
        raise WaveStopped(f"the first wave's alarms are in ALARM ({', '.join(fired)}): this cell's upgrade stops")
    return {"IsComplete": now() >= until}


def on_event(event: dict[str, Any], _context: object) -> dict[str, Any]:
    import boto3

    return start(event, boto3.client("cloudformation"))


def is_complete(event: dict[str, Any], _context: object) -> dict[str, Any]:
    import boto3

    return check(event, boto3.client("cloudwatch"))
