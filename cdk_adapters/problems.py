"""Problems found while checking configuration, reported all at once.

Every gate in this project (construct validation at synth, the manifest's compatibility gate, the
`cdk-adapters validate` command and the serving container's register-time check) collects
`Problem`s instead of raising on the first one, so a user fixes everything in one round trip.
This module is standard-library only: the serving container imports it without aws-cdk-lib.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong, naming what it is about (`subject`) and which setting (`field`).

    `rule` is the id of the compatibility-gate rule that found it (cdk-nag style, e.g.
    ``rank-limit``): what a manifest row names to acknowledge it. Other checks leave it None.
    """

    subject: str
    field: str
    message: str
    rule: str | None = None

    def __str__(self) -> str:
        text = f"{self.subject}: {self.field}: {self.message}"
        return f"{text} [{self.rule}]" if self.rule else text


class ConfigurationError(ValueError):
    """Raised with every problem found, one per line, so none is hidden behind the first."""

    def __init__(self, problems: Iterable[Problem], heading: str = "invalid configuration") -> None:
        self.problems = tuple(problems)
        self.heading = heading
        if not self.problems:
            raise ValueError("ConfigurationError needs at least one problem")
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{heading} ({len(self.problems)} problem(s)):\n{lines}")


def wrong_kind(subject: str, field: str, value: object, kind: type) -> list[Problem]:
    """A problem when `value` (not None) is not a `kind`: an option object given as something else is
    named, never read. The one wording every construct uses for it."""
    if value is None or isinstance(value, kind):
        return []
    article = "an" if kind.__name__[:1].upper() in "AEIOU" else "a"
    return [Problem(subject, field, f"must be {article} {kind.__name__}, got {type(value).__name__}")]


def raise_if_any(problems: Iterable[Problem], heading: str = "invalid configuration") -> None:
    """Raise `ConfigurationError` when `problems` is not empty."""
    collected = list(problems)
    if collected:
        raise ConfigurationError(collected, heading)
