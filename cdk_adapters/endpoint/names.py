"""Name rules for SageMaker inference components and the endpoint that hosts them.

SageMaker names (endpoint, inference component) are at most 63 characters matching
`SAGEMAKER_NAME_PATTERN`, and must be unique within an account and region. CloudFormation gives an
inference component no name attribute (``Ref`` is its ARN), so adapter components need explicit
names; those names must also be stable, or every deploy would rename (and break) live adapters.

The scheme: ``<prefix>-<adapter>``, where the prefix is a truncated, lower-cased stack name plus a
short hash of (stack name, endpoint construct path). Stack names are unique per account and region,
construct paths are unique per stack, so two endpoints never clash, and the same code always
produces the same names. The base component is ``<prefix>-base``; the endpoint itself is ``<prefix>``.
Standard-library only: the manifest gate validates adapter names without aws-cdk-lib. How names
compare (`adapter_name_key`) and the SageMaker name rule are shared with the container and the
client, so they live in `cdk_adapters.contract.adapter_names`.
"""

from __future__ import annotations

import hashlib
import re

from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_MAX_LENGTH, SAGEMAKER_NAME_PATTERN, adapter_name_key
from cdk_adapters.problems import Problem

STACK_PART_MAX_LENGTH = 14
HASH_LENGTH = 8
PREFIX_MAX_LENGTH = STACK_PART_MAX_LENGTH + 1 + HASH_LENGTH
"""``<stack part ≤14>-<8 hex>``: short enough to leave most of the 63 characters to the adapter."""

MAX_ADAPTER_NAME_LENGTH = SAGEMAKER_NAME_MAX_LENGTH - PREFIX_MAX_LENGTH - 1
"""Longest adapter name whose inference component name still fits in 63 characters (39)."""

BASE_COMPONENT_SUFFIX = "base"
RESERVED_ADAPTER_NAMES = frozenset({BASE_COMPONENT_SUFFIX})
"""``base`` would give an adapter the base component's name."""
TIER_NAME = re.compile(rf"{BASE_COMPONENT_SUFFIX}-r[0-9]+")
"""``base-r64`` would give an adapter a rank tier's base component name (`tier_component_name`)."""


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
                "must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$ (letters, digits and inner hyphens; no dots, underscores or spaces)",
            )
        )
    if adapter_name_key(name) in RESERVED_ADAPTER_NAMES or TIER_NAME.fullmatch(adapter_name_key(name)):
        problems.append(Problem(about, "name", f"{name!r} is reserved for the base inference component"))
    return problems


def component_prefix(stack_name: str, construct_path: str) -> str:
    """Deterministic, collision-free prefix for everything one endpoint construct names.

    Lower-cased because SageMaker ARNs (and so IAM policies) use the lower-cased name.
    """
    digest = hashlib.sha256(f"{stack_name}\0{construct_path}".encode()).hexdigest()[:HASH_LENGTH]
    stack_part = re.sub(r"[^a-z0-9]+", "-", stack_name.lower()).strip("-")[:STACK_PART_MAX_LENGTH]
    stack_part = stack_part.strip("-") or "ep"
    return f"{stack_part}-{digest}"


def base_component_name(prefix: str) -> str:
    return f"{prefix}-{BASE_COMPONENT_SUFFIX}"


def tier_component_name(prefix: str, max_lora_rank: int) -> str:
    """The base component of a rank tier above the first: ``<prefix>-base-r<rank>``."""
    return f"{prefix}-{tier_suffix(max_lora_rank, first_rank=0)}"


def tier_suffix(max_lora_rank: int, *, first_rank: int) -> str:
    """A tier's base component name after the prefix: the first tier's ``base`` (the endpoint's
    own base component), a later tier's ``base-r<rank>``. Which base an adapter is on is this, not the rank."""
    return BASE_COMPONENT_SUFFIX if max_lora_rank == first_rank else f"{BASE_COMPONENT_SUFFIX}-r{max_lora_rank}"
