"""Captured requests as a golden set: each case's ``expected`` is the answer the adapter gave then.

Replaying them on a candidate (``cdk-adapters eval --from-capture FILE --target NEW``) says how
often it answers live traffic exactly as the version that served it did; replaying on that same
version checks that serving is still deterministic. The file is the container's log (only capture
lines are read) or capture lines saved from CloudWatch Logs. Records whose request or answer was
truncated or redacted cannot be replayed and are skipped (counted on the command's output).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cdk_adapters.contract.capture_record import CaptureRecord, decode_line
from cdk_adapters.evaluation.golden import GoldenCase, GoldenSet, case_from_document
from cdk_adapters.problems import Problem


def read_records(path: Path) -> tuple[list[CaptureRecord], list[Problem]]:
    """Every capture record in `path`, and a problem for each marked line that cannot be read."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        return [], [Problem(f"capture file '{path}'", "(file)", f"cannot be read: {error.strerror or error}")]
    records, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        record, reason = decode_line(line)
        if reason is not None:
            problems.append(Problem(f"capture file '{path}:{number}'", "(line)", reason))
        elif record is not None:
            records.append(record)
    return records, problems


def load_capture(path: Path) -> tuple[GoldenSet | None, list[Problem]]:
    """The replayable records of `path` as a golden set (expected = the captured answer)."""
    records, problems = read_records(path)
    cases: list[GoldenCase] = []
    for index, record in enumerate(records, start=1):
        if not record.replayable or record.status != 200:
            continue
        document = {**(record.case or {}), "expected": record.response, "id": record.request_id or f"capture-{index}"}
        if any(case.id == document["id"] for case in cases):
            document["id"] = f"{document['id']}-{index}"
        case, found = case_from_document(document, subject=f"capture file '{path}' record {index}", base_dir=None, default_id="")
        problems.extend(found)
        if case is not None:
            cases.append(case)
    if not problems and not cases:
        problems.append(
            Problem(f"capture file '{path}'", "(file)",
                    f"has no replayable capture record ({len(records)} record(s); truncated, redacted or failed ones are skipped)")
        )
    if problems:
        return None, problems
    digest = hashlib.sha256("\n".join(repr(case.to_document()) for case in cases).encode()).hexdigest()
    return GoldenSet(Path(path), tuple(cases), "sha256:" + digest), []
