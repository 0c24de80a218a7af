"""Plain-text tables for the CLI's reports (plan, eval, usage): a label column, then numbers."""

from __future__ import annotations

from collections.abc import Sequence


def aligned_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` as lines: the first column left-aligned, the others right-aligned (numbers line up),
    two spaces apart, no trailing space."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width) for column, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]
