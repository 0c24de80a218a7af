"""Checks across the adapters that share one endpoint (cdk-nag style: one rule per function below)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cdk_adapters.contract.adapter_names import VERSION_SUFFIX, adapter_name_key, duplicate_adapter_names
from cdk_adapters.gate.checks.base import with_rule
from cdk_adapters.problems import Problem

_PARTIAL_SUFFIX = re.compile(r"-+(v[0-9]*)?$", re.IGNORECASE)
"""What a name that tried a suffix ends with (``-``, ``-v``, ``-v0``): dropped from the advice."""


@dataclass(frozen=True)
class CoHostedAdapter:
    """One adapter as the co-hosting checks see it."""

    name: str
    target_modules: tuple[str, ...]
    acknowledged: frozenset[str] = frozenset()
    """Rule ids its manifest row acknowledges; such an adapter is left out of the majority a rule
    compares the others with (its finding is still reported, as acknowledged)."""


@dataclass(frozen=True)
class CoHostedRule:
    """One rule over all adapters of an endpoint, identified by `id`."""

    id: str
    description: str
    run: Callable[[Sequence[CoHostedAdapter]], Iterable[Problem]]
    acknowledgeable: bool = False
    """Whether a manifest row may acknowledge it: these checks run only at synth and in the CLI,
    so an acknowledged finding cannot fail later in the serving container."""

    def __call__(self, adapters: Sequence[CoHostedAdapter]) -> list[Problem]:
        return with_rule(self.id, self.run(adapters))


def _version_suffix(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    taken = {adapter_name_key(adapter.name) for adapter in adapters}
    for adapter in adapters:
        if not VERSION_SUFFIX.match(adapter.name):
            yield Problem(
                f"adapter '{adapter.name}'",
                "name",
                f"must end with a version suffix -v<N> (for example '{_suggested(adapter.name, taken)}'): a "
                "published name never changes content, so a new version is a new name",
            )


def _suggested(name: str, taken: set[str]) -> str:
    """``<family>-v<N>`` with the lowest N whose name no co-hosted adapter has, ignoring case."""
    family = _PARTIAL_SUFFIX.sub("", name) or name
    version = 1
    while adapter_name_key(f"{family}-v{version}") in taken:
        version += 1
    return f"{family}-v{version}"


def _unique_names(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    return duplicate_adapter_names(adapter.name for adapter in adapters)


def _identical_target_modules(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    """Co-hosted adapters should adapt the same modules. The reference is the most common set
    among the adapters that do not acknowledge this rule (on a tie, the one listed first)."""
    if len(adapters) < 2:
        return
    compared = [a for a in adapters if IDENTICAL_TARGET_MODULES.id not in a.acknowledged] or list(adapters)
    sets = Counter(frozenset(adapter.target_modules) for adapter in compared)
    first_seen = {
        modules: position for position, modules in enumerate(dict.fromkeys(frozenset(a.target_modules) for a in compared))
    }
    reference = max(sets, key=lambda modules: (sets[modules], -first_seen[modules]))
    peers = _some_names([a.name for a in compared if frozenset(a.target_modules) == reference])
    for adapter in adapters:
        modules = frozenset(adapter.target_modules)
        if modules == reference:
            continue
        extra = sorted(modules - reference)
        missing = sorted(reference - modules)
        detail = "; ".join(
            part
            for part in (f"adds {', '.join(extra)}" if extra else "", f"lacks {', '.join(missing)}" if missing else "")
            if part
        )
        yield Problem(
            f"adapter '{adapter.name}'",
            "target_modules",
            f"targets {', '.join(sorted(modules))} but co-hosted adapter(s) {peers} target "
            f"{', '.join(sorted(reference))} ({detail}); retrain with the same target_modules, or acknowledge "
            "the rule in its manifest row (acknowledge: {rule: identical-target-modules, reason: ...})",
        )


def _some_names(names: list[str], shown: int = 4) -> str:
    """``a-v1, b-v1, c-v1, d-v1 and 996 more``: a fleet's message names a few peers, not all of them
    (one message per differing adapter listing every peer would grow with the square of the fleet)."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


UNIQUE_NAMES = CoHostedRule(
    id="unique-names",
    description="no adapter name is given twice, ignoring case (SageMaker compares component names so)",
    run=_unique_names,
)
VERSION_SUFFIX_CHECK = CoHostedRule(
    id="version-suffix",
    description="every adapter name ends with -v<N>, so a new version is a new name",
    run=_version_suffix,
    acknowledgeable=True,
)
IDENTICAL_TARGET_MODULES = CoHostedRule(
    id="identical-target-modules",
    description="co-hosted adapters target the same modules as the majority of their peers",
    run=_identical_target_modules,
    acknowledgeable=True,
)

CO_HOSTED_CHECKS: tuple[CoHostedRule, ...] = (UNIQUE_NAMES, VERSION_SUFFIX_CHECK, IDENTICAL_TARGET_MODULES)
