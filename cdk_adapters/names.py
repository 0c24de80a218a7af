"""Name rules for SageMaker inference components and the endpoint that hosts them.

SageMaker names (endpoint, inference component) are at most 63 characters matching
`SAGEMAKER_NAME_PATTERN`, and must be unique within an account and region. CloudFormation gives an
inference component no name attribute (``Ref`` is its ARN), so adapter components need explicit
names; those names must also be stable, or every deploy would rename (and break) live adapters.

The scheme: ``<prefix>-<adapter>``, where the prefix is a truncated, lower-cased stack name plus a
short hash of (stack name, endpoint construct path). Stack names are unique per account and region,
construct paths are unique per stack, so two endpoints never clash, and the same code always
produces the same names. The base component is ``<prefix>-base``; the endpoint itself is ``<prefix>``.
Standard-library only: the manifest gate validates adapter names without aws-cdk-lib.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from cdk_adapters.contract import discovery
from cdk_adapters.problems import Problem

SAGEMAKER_NAME_MAX_LENGTH = 63
SAGEMAKER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
"""SageMaker's pattern for endpoint and inference component names."""

STACK_PART_MAX_LENGTH = 14
HASH_LENGTH = 8
PREFIX_MAX_LENGTH = STACK_PART_MAX_LENGTH + 1 + HASH_LENGTH
"""``<stack part ≤14>-<8 hex>``: short enough to leave most of the 63 characters to the adapter."""

MAX_ADAPTER_NAME_LENGTH = SAGEMAKER_NAME_MAX_LENGTH - PREFIX_MAX_LENGTH - 1
"""Longest adapter name whose inference component name still fits in 63 characters (39)."""

BASE_COMPONENT_SUFFIX = "base"
RESERVED_ADAPTER_NAMES = frozenset({BASE_COMPONENT_SUFFIX})
"""``base`` would give an adapter the base component's name."""


def validate_adapter_name(name: object, subject: str | None = None) -> list[Problem]:
    """Every problem with `name` as an adapter name (empty when it is fine).

    `subject` names what the problems are about in messages; default ``adapter '<name>'``.
    """
    about = subject or f"adapter {name!r}"
    if not isinstance(name, str) or not name:
        return [Problem(about, "name", "must be a non-empty string")]
    problems: list[Problem] = []
    if len(name) > MAX_ADAPTER_NAME_LENGTH:
        problems.append(
            Problem(
                about,
                "name",
                f"is {len(name)} characters; at most {MAX_ADAPTER_NAME_LENGTH} fit, because the "
                f"inference component name '<endpoint prefix>-{name}' must stay within "
                f"{SAGEMAKER_NAME_MAX_LENGTH}",
            )
        )
    if not SAGEMAKER_NAME_PATTERN.fullmatch(name):  # fullmatch: "$" alone would let a final newline through
        problems.append(
            Problem(
                about,
                "name",
                "must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$ (letters, digits and inner hyphens; "
                "no dots, underscores or spaces)",
            )
        )
    if name.lower() in RESERVED_ADAPTER_NAMES:
        problems.append(
            Problem(about, "name", f"{name!r} is reserved for the base inference component")
        )
    return problems


def validate_component_name(name: object, subject: str) -> list[Problem]:
    """Every problem with `name` as a SageMaker inference component name (empty when it is fine).

    What the serving container accepts as a registered adapter's name: SageMaker registers each
    adapter component under a name this rule allows, so anything else did not come from SageMaker.
    Looser than `validate_adapter_name`, which leaves room for the endpoint prefix.
    """
    if not isinstance(name, str) or not name:
        return [Problem(subject, "name", "must be a non-empty string")]
    problems: list[Problem] = []
    if len(name) > SAGEMAKER_NAME_MAX_LENGTH:
        problems.append(Problem(subject, "name", f"is {len(name)} characters; SageMaker names are at most {SAGEMAKER_NAME_MAX_LENGTH}"))
    if not SAGEMAKER_NAME_PATTERN.fullmatch(name):  # fullmatch: "$" alone would let a final newline through
        problems.append(
            Problem(
                subject,
                "name",
                "must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$ (letters, digits and inner hyphens; "
                "no slashes, dots, underscores or spaces)",
            )
        )
    return problems


def adapter_name_key(name: str) -> str:
    """What two adapter names are compared by: SageMaker compares inference component names
    case-insensitively (and `adapter_component_name` lower-cases them), so ``SupportEN-v1`` and
    ``supporten-v1`` would be one component."""
    return name.lower()


def duplicate_adapter_names(names: Iterable[str]) -> list[Problem]:
    """One problem per adapter name that is given more than once, ignoring case: the rule every
    gate uses (the manifest gate, the CLI and the construct)."""
    spellings: dict[str, list[str]] = {}
    for name in names:
        spellings.setdefault(adapter_name_key(name), []).append(name)
    problems = []
    for given in spellings.values():
        if len(given) < 2:
            continue
        distinct = list(dict.fromkeys(given))
        if len(distinct) == 1:
            message = f"is listed {len(given)} times; each adapter name must be unique"
        else:
            message = (
                f"is listed {len(given)} times as {', '.join(map(repr, distinct))}; adapter names are compared "
                "ignoring case (SageMaker's inference component names are), so each must be unique ignoring case"
            )
        problems.append(Problem(f"adapter '{given[0]}'", "name", message))
    return problems


def component_prefix(stack_name: str, construct_path: str) -> str:
    """Deterministic, collision-free prefix for everything one endpoint construct names.

    Lower-cased because SageMaker ARNs (and so IAM policies) use the lower-cased name.
    """
    digest = hashlib.sha256(f"{stack_name}\0{construct_path}".encode()).hexdigest()[:HASH_LENGTH]
    stack_part = re.sub(r"[^a-z0-9]+", "-", stack_name.lower()).strip("-")[:STACK_PART_MAX_LENGTH]
    stack_part = stack_part.strip("-") or "ep"
    return f"{stack_part}-{digest}"


def adapter_component_name(prefix: str, adapter_name: str) -> str:
    """``<prefix>-<adapter>``, lower-cased: the rule the discovery record publishes to clients."""
    return discovery.adapter_component_name(prefix, adapter_name)


def base_component_name(prefix: str) -> str:
    return f"{prefix}-{BASE_COMPONENT_SUFFIX}"
