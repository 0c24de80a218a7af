"""Checks across the adapters that share one endpoint (cdk-nag style: one rule per function below)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from cdk_adapters.problems import Problem

VERSION_SUFFIX = re.compile(r"^(?P<family>.+)-v(?P<version>[1-9][0-9]*)$")
"""``support-triage-v3``: a published name's content never changes, so every change gets a new name."""


@dataclass(frozen=True)
class CoHostedAdapter:
    """One adapter as the co-hosting checks see it."""

    name: str
    target_modules: tuple[str, ...]
    target_modules_differ_reason: str | None = None


def version_suffix(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    for adapter in adapters:
        if not VERSION_SUFFIX.match(adapter.name):
            yield Problem(
                f"adapter '{adapter.name}'",
                "name",
                "must end with a version suffix -v<N> (for example "
                f"'{adapter.name.rstrip('-')}-v1'): a published name never changes content, so a new "
                "version is a new name",
            )


def unique_names(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    counts = Counter(adapter.name for adapter in adapters)
    for name, count in counts.items():
        if count > 1:
            yield Problem(f"adapter '{name}'", "name", f"is listed {count} times; each adapter name must be unique")


def identical_target_modules(adapters: Sequence[CoHostedAdapter]) -> Iterable[Problem]:
    """Co-hosted adapters should adapt the same modules; a stated reason opts one out."""
    checked = [adapter for adapter in adapters if adapter.target_modules_differ_reason is None]
    if len(checked) < 2:
        return
    sets = Counter(frozenset(adapter.target_modules) for adapter in checked)
    # The most common set is the reference; on a tie, the one listed first.
    order = {}
    for adapter in checked:
        order.setdefault(frozenset(adapter.target_modules), adapter.name)
    reference = max(sets, key=lambda modules: (sets[modules], -list(order).index(modules)))
    reference_names = [a.name for a in checked if frozenset(a.target_modules) == reference]
    for adapter in checked:
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
            f"targets {', '.join(sorted(modules))} but co-hosted adapter(s) {', '.join(reference_names)} target "
            f"{', '.join(sorted(reference))} ({detail}); retrain with the same target_modules, or state why "
            "they differ with target_modules_differ_reason in its manifest row",
        )


CO_HOSTED_CHECKS: tuple[Callable[[Sequence[CoHostedAdapter]], Iterable[Problem]], ...] = (
    unique_names,
    version_suffix,
    identical_target_modules,
)
