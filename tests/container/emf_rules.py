"""CloudWatch's Embedded Metric Format rules, checked on a log line the way CloudWatch Logs reads it.

Written from AWS's specification (see `cdk_adapters.contract.request_metrics`), independently of
the container's encoder, and checked against the shared schema: which metrics, units and
dimensions a request line must carry.
"""

from __future__ import annotations

import json
import time

from cdk_adapters.contract import request_metrics as rm

CLOUDWATCH_UNITS = frozenset(
    [
        "Seconds",
        "Microseconds",
        "Milliseconds",
        "Bytes",
        "Kilobytes",
        "Megabytes",
        "Gigabytes",
        "Terabytes",
        "Bits",
        "Kilobits",
        "Megabits",
        "Gigabits",
        "Terabits",
        "Percent",
        "Count",
        "Bytes/Second",
        "Kilobytes/Second",
        "Megabytes/Second",
        "Gigabytes/Second",
        "Terabytes/Second",
        "Bits/Second",
        "Kilobits/Second",
        "Megabits/Second",
        "Gigabits/Second",
        "Terabits/Second",
        "Count/Second",
        "None",
    ]
)
MAX_EVENT_BYTES = 1_048_576


def _is_number(value: object) -> bool:
    return type(value) in (int, float)  # JSON true/false parse to bool, which EMF does not take as a number


def emf_problems(line: str, *, namespace: str, endpoint_name: str) -> list[str]:
    """Everything about `line` that breaks EMF or the request-metrics schema (empty: a valid document)."""
    if len(line.encode()) > MAX_EVENT_BYTES:
        return [f"the event is {len(line.encode())} bytes; CloudWatch Logs takes 1 MB"]
    try:
        root = json.loads(line)
    except json.JSONDecodeError as error:
        return [f"not one JSON document: {error}"]
    if not isinstance(root, dict):
        return ["the root is not a JSON object"]
    problems = [f"log field {name!r} is missing" for name in rm.LOG_FIELDS if name not in root]
    metadata = root.get("_aws")
    if not isinstance(metadata, dict):
        return [*problems, "no '_aws' object at the root"]
    timestamp = metadata.get("Timestamp")
    if not _is_number(timestamp):
        problems.append(f"_aws.Timestamp must be a number, got {timestamp!r}")
    elif abs(timestamp - time.time() * 1000) > 15 * 60 * 1000:
        problems.append(f"_aws.Timestamp {timestamp} is not milliseconds since the epoch of about now")
    directives = metadata.get("CloudWatchMetrics")
    if not isinstance(directives, list) or len(directives) != 1:
        return [*problems, f"_aws.CloudWatchMetrics must be a list of one directive, got {directives!r}"]
    directive = directives[0]
    if set(directive) != {"Namespace", "Dimensions", "Metrics"}:
        problems.append(f"directive members are {sorted(directive)}")
    if directive.get("Namespace") != namespace:
        problems.append(f"Namespace {directive.get('Namespace')!r} is not {namespace!r}")
    dimension_sets = directive.get("Dimensions")
    if dimension_sets != [list(dimension_set) for dimension_set in rm.DIMENSION_SETS]:
        problems.append(f"Dimensions {dimension_sets!r} are not the schema's {rm.DIMENSION_SETS!r}")
    for dimension_set in dimension_sets if isinstance(dimension_sets, list) else []:
        if len(dimension_set) > rm.EMF_MAX_DIMENSIONS_PER_SET:
            problems.append(f"a dimension set has {len(dimension_set)} dimensions; EMF takes 30")
        for name in dimension_set:
            value = root.get(name)
            if not isinstance(value, str) or not value.strip() or not value.isascii():
                problems.append(f"dimension {name!r} has no non-blank ASCII string value at the root: {value!r}")
    if root.get(rm.ENDPOINT_DIMENSION) != endpoint_name:
        problems.append(f"{rm.ENDPOINT_DIMENSION} is {root.get(rm.ENDPOINT_DIMENSION)!r}, not {endpoint_name!r}")
    definitions = directive.get("Metrics")
    if not isinstance(definitions, list) or not 1 <= len(definitions) <= rm.EMF_MAX_METRICS_PER_DIRECTIVE:
        return [*problems, f"Metrics must hold 1-100 definitions, got {definitions!r}"]
    for definition in definitions:
        name = definition.get("Name")
        spec = rm.METRICS_BY_NAME.get(name)
        if spec is None:
            problems.append(f"metric {name!r} is not in the schema")
            continue
        if set(definition) - {"Name", "Unit", "StorageResolution"}:
            problems.append(f"metric {name!r} has members {sorted(definition)}")
        if definition.get("Unit") != spec.unit or spec.unit not in CLOUDWATCH_UNITS:
            problems.append(f"metric {name!r} has unit {definition.get('Unit')!r}, the schema says {spec.unit!r}")
        if definition.get("StorageResolution", 60) not in (1, 60):
            problems.append(f"metric {name!r} has StorageResolution {definition.get('StorageResolution')!r}")
        if not _is_number(root.get(name)):
            problems.append(f"metric {name!r} has no number at the root: {root.get(name)!r}")
    return problems


def declared_metrics(line: str) -> list[str]:
    """The metric names a valid EMF line declares."""
    return [definition["Name"] for definition in json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
