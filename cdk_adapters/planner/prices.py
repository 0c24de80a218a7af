"""Hourly prices of SageMaker real-time inference instances: shipped, or the user's own.

Prices are never fetched at run time: the planner must give the same answer offline, in CI and in
review. The shipped table holds only figures we could trace to a public source (each row says which
and when); every other type needs ``--price-per-hour`` or ``--price-file``, because a guessed price
would make the savings figure look more certain than it is. Prices change and differ by region:
check the AWS SageMaker pricing page before you decide on money.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from cdk_adapters.problems import ConfigurationError, Problem

PRICE_FILE_COLUMNS = ("instance_type", "usd_per_hour")
"""Required CSV header columns; ``source`` is optional."""


@dataclass(frozen=True)
class InstancePrice:
    instance_type: str
    usd_per_hour: float
    source: str
    checked_on: str | None = None


SHIPPED_PRICES: dict[str, InstancePrice] = {
    price.instance_type: price
    for price in (
        InstancePrice(
            "ml.g6.2xlarge",
            1.20,
            "the figure ('about $1.20/hour') of the twelve-tenant consolidation example this planner reproduces, not an AWS price list",
            "2026-12-01",
        ),
        InstancePrice(
            "ml.g5.xlarge",
            1.41,
            "zircon.tech, 'The real cost of running AI models on AWS SageMaker' (us-east-1, as of October 2025)",
            "2026-12-01",
        ),
        InstancePrice(
            "ml.g5.2xlarge",
            1.52,
            "wring.co, 'AWS SageMaker inference guide', real-time endpoint table (region not stated)",
            "2026-12-01",
        ),
        InstancePrice(
            "ml.p4d.24xlarge",
            37.69,
            "wring.co, 'AWS SageMaker inference guide', real-time endpoint table (region not stated)",
            "2026-12-01",
        ),
    )
}
"""Public figures for on-demand real-time inference; the other supported types have none shipped."""


def load_price_file(path: Path) -> dict[str, InstancePrice]:
    """Read a CSV with columns ``instance_type,usd_per_hour[,source]``; every bad row is a problem."""
    subject = f"price file '{path}'"
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ConfigurationError([Problem(subject, "(file)", f"cannot be read: {error.strerror or error}")]) from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            [Problem(subject, "(file)", f"is not UTF-8 text (byte {error.start}: {error.reason}); save the CSV as UTF-8")]
        ) from None
    reader = csv.DictReader(text.splitlines())
    header = [name.strip() for name in (reader.fieldnames or [])]
    missing = [column for column in PRICE_FILE_COLUMNS if column not in header]
    if missing:
        raise ConfigurationError(
            [
                Problem(
                    subject,
                    column,
                    f"column is missing; the header must name {', '.join(PRICE_FILE_COLUMNS)} (found: {', '.join(header) or 'nothing'})",
                )
                for column in missing
            ]
        )
    prices: dict[str, InstancePrice] = {}
    problems: list[Problem] = []
    for line, row in enumerate(reader, start=2):
        if None in row:  # csv puts fields beyond the header under None, as a list
            problems.append(
                Problem(
                    subject, f"line {line}", f"has more columns than the header ({', '.join(header)}); quote a value with commas"
                )
            )
            continue
        row = {(key or "").strip(): (value or "").strip() for key, value in row.items()}
        name = row["instance_type"]
        try:
            value = float(row["usd_per_hour"])
        except ValueError:
            problems.append(Problem(subject, f"line {line}: usd_per_hour", f"{row['usd_per_hour']!r} is not a number"))
            continue
        if not name:
            problems.append(Problem(subject, f"line {line}: instance_type", "is empty"))
        elif not math.isfinite(value):  # float() reads "nan" and "inf"
            problems.append(
                Problem(subject, f"line {line}: usd_per_hour", f"must be a finite number, got {row['usd_per_hour']!r}")
            )
        elif value <= 0:
            problems.append(Problem(subject, f"line {line}: usd_per_hour", f"must be > 0, got {value:g}"))
        else:
            prices[name] = InstancePrice(name, value, row.get("source") or f"{path}, line {line}")
    if problems:
        raise ConfigurationError(problems)
    return prices


def resolve_price(instance_type: str, *, price_per_hour: float | None = None, price_file: Path | None = None) -> InstancePrice:
    """The price to plan with: the flag, else the file's row, else the shipped row; else a clear error."""
    if price_per_hour is not None:
        if price_per_hour <= 0:
            raise ConfigurationError([Problem("plan", "--price-per-hour", f"must be > 0, got {price_per_hour:g}")])
        return InstancePrice(instance_type, price_per_hour, "--price-per-hour")
    if price_file is not None:
        prices = load_price_file(price_file)
        if instance_type in prices:
            return prices[instance_type]
    if instance_type in SHIPPED_PRICES:
        return SHIPPED_PRICES[instance_type]
    where = (
        f"neither {price_file} nor the shipped table lists it" if price_file is not None else "the shipped table does not list it"
    )
    raise ConfigurationError(
        [
            Problem(
                f"instance type '{instance_type}'",
                "price",
                f"has no price: {where} (shipped: {', '.join(sorted(SHIPPED_PRICES))}); pass "
                "--price-per-hour USD or --price-file CSV (columns instance_type,usd_per_hour)",
            )
        ]
    )


__all__ = ["PRICE_FILE_COLUMNS", "SHIPPED_PRICES", "InstancePrice", "load_price_file", "resolve_price"]
