"""The names of the alarm settings and what each one's value may be, standard library only.

`cdk_adapters.monitoring.alarms.AlarmThresholds` (the construct side) and a manifest row's
``alarms:`` map (`cdk_adapters.manifest.schema`, which must not start the CDK's runtime just to read
a YAML file) both take their keys and per-value rules from here, so a new threshold is accepted by
both or by neither. Rules between fields (``datapoints_to_alarm <= evaluation_periods``) need the
endpoint's defaults and are checked where the thresholds are complete (`AlarmThresholds.problems`).
"""

from __future__ import annotations

from typing import TypeGuard

PERCENT_FIELDS = ("error_rate_percent", "cold_start_share_percent", "throttled_share_percent")
"""Thresholds that are a share of requests: above 0 and below 100, or None (that alarm off)."""
MILLISECOND_FIELDS = ("latency_p95_ms", "queue_wait_p95_ms")
"""Thresholds in milliseconds: positive, or None (that alarm off)."""
PERIOD_FIELD = "period"
"""The evaluated period (a Duration of whole minutes in Python, ``period_minutes`` in a manifest)."""
COUNT_FIELDS = ("evaluation_periods", "datapoints_to_alarm")
"""Positive integers; never None."""
THRESHOLD_FIELDS = (
    "error_rate_percent",
    "latency_p95_ms",
    "cold_start_share_percent",
    "throttled_share_percent",
    "queue_wait_p95_ms",
    PERIOD_FIELD,
    *COUNT_FIELDS,
)
"""Every `AlarmThresholds` field, in its order (a test holds the dataclass to this list)."""
NULLABLE_FIELDS = PERCENT_FIELDS + MILLISECOND_FIELDS
"""The fields whose None turns one alarm off."""


def value_error(name: str, value: object) -> str | None:
    """What is wrong with `value` for the threshold field `name` on its own (None: nothing).

    `PERIOD_FIELD` is not judged here: its type differs between Python (Duration) and a manifest (minutes).
    """
    if name not in THRESHOLD_FIELDS:
        return f"is not an alarm setting; known: {', '.join(THRESHOLD_FIELDS)}"
    if value is None:
        if name in NULLABLE_FIELDS:
            return None
        return "cannot be null (only the alarm thresholds can be turned off)"
    if name in PERCENT_FIELDS and (not _is_number(value) or not 0 < value < 100):
        return f"must be a percentage above 0 and below 100 (or None to turn the alarm off), got {value!r}"
    if name in MILLISECOND_FIELDS and (not _is_number(value) or value <= 0):
        return f"must be a positive number of milliseconds (or None), got {value!r}"
    if name in COUNT_FIELDS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        return f"must be a positive integer, got {value!r}"
    return None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
