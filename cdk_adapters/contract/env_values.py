"""Reading one container variable strictly: the value rules every codec in `contract` shares.

Standard library only (the serving image copies this package).
"""

from __future__ import annotations

from collections.abc import Mapping

from cdk_adapters.problems import Problem

_TRUE = "true"
_FALSE = "false"


def parse_bool(environ: Mapping[str, str], name: str, default: bool, problems: list[Problem]) -> bool:
    """``true``/``false`` (any case); unset or empty is `default`; anything else is a problem naming the variable."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in (_TRUE, _FALSE):
        return value == _TRUE
    problems.append(Problem(name, "value", f"must be 'true' or 'false', got {raw!r}"))
    return default


def parse_whole_number(environ: Mapping[str, str], name: str, minimum: int, problems: list[Problem]) -> int | None:
    """A whole number of at least `minimum`; unset or empty is ``None``; anything else is a problem naming the variable."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if raw.isdigit() and int(raw) >= minimum:
        return int(raw)
    problems.append(Problem(name, "value", f"must be a whole number >= {minimum}, got {raw!r}"))
    return None
