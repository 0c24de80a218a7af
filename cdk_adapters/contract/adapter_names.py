"""How adapter and inference component names compare and are formed, for every side at once.

SageMaker names an inference component with at most 63 characters matching
`SAGEMAKER_NAME_PATTERN` and compares those names case-insensitively, so two adapter names that
differ only in case would be one component. The construct names components by
`adapter_component_name`, the gate and the construct refuse duplicates by `adapter_name_key`, the
container accepts a registered name by `validate_component_name` and keys tenant limits by
`adapter_name_key`, and the client finds a component by the same rule the discovery record
publishes. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cdk_adapters.problems import Problem

SAGEMAKER_NAME_MAX_LENGTH = 63
SAGEMAKER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
"""SageMaker's pattern for endpoint and inference component names."""
VERSION_SUFFIX = re.compile(r"^(?P<family>.+)-v(?P<version>[1-9][0-9]*)$", re.IGNORECASE)
"""``support-triage-v3``: a published name's content never changes, so every change gets a new name;
the part before ``-v<N>`` is the adapter's family. Case-insensitive, as SageMaker's component
names are (``-V3`` is ``-v3``)."""


def adapter_name_key(name: str) -> str:
    """What two adapter names are compared by: SageMaker compares inference component names
    case-insensitively, so ``SupportEN-v1`` and ``supporten-v1`` would be one component."""
    return name.lower()


def adapter_component_name(prefix: str, adapter_name: str) -> str:
    """The one naming rule: ``<prefix>-<adapter name key>``.

    Lower-cased (the key) because SageMaker compares these names case-insensitively and IAM ARNs
    carry them lower-cased.
    """
    return f"{prefix}-{adapter_name_key(adapter_name)}"


def validate_component_name(name: object, subject: str) -> list[Problem]:
    """Every problem with `name` as a SageMaker inference component name (empty when it is fine).

    What the serving container accepts as a registered adapter's name: SageMaker registers each
    adapter component under a name this rule allows, so anything else did not come from SageMaker.
    Looser than `cdk_adapters.endpoint.names.validate_adapter_name`, which leaves room for the endpoint prefix.
    """
    if not isinstance(name, str) or not name:
        return [Problem(subject, "name", "must be a non-empty string")]
    problems: list[Problem] = []
    if len(name) > SAGEMAKER_NAME_MAX_LENGTH:
        problems.append(
            Problem(subject, "name", f"is {len(name)} characters; SageMaker names are at most {SAGEMAKER_NAME_MAX_LENGTH}")
        )
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
