"""Captured requests as a golden set: each case's ``expected`` is the answer the adapter gave then.

Replaying them on a candidate (``cdk-adapters eval --from-capture FILE --target NEW``) says how
often it answers live traffic exactly as the version that served it did; replaying on that same
version checks that serving is still deterministic. The file is the container's log (only capture
lines are read) or capture lines saved from CloudWatch Logs. Records whose request or answer was
truncated or redacted cannot be replayed and are skipped (counted on the command's output).

`match_verdicts` is the replay's gate (``--min-match``): the share of captured answers a target
reproduces exactly. The replay decodes at one temperature (default 0); records captured with other
sampling are counted (`Replay.not_greedy`), since they may differ for that reason alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk_adapters.contract.capture_record import CaptureRecord, decode_line
from cdk_adapters.evaluation.golden import GoldenCase, GoldenSet, case_from_document
from cdk_adapters.evaluation.runner import TargetResult
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


@dataclass(frozen=True)
class Replay:
    """A capture file read for replay: the cases, and what a reader of the result must know."""

    golden: GoldenSet
    records: int
    """Capture records in the file."""
    skipped: int
    """Records that cannot be replayed (truncated, redacted, or not answered 200)."""
    not_greedy: tuple[str, ...]
    """Ids of replayed cases whose captured request was not greedy (`is_greedy`): a replay at
    temperature 0 may answer them differently even on the version that served them."""


def is_greedy(parameters: Mapping[str, Any]) -> bool:
    """The captured request asked for temperature 0. Without a ``temperature`` the server's default
    applied (vLLM's is 1, or the model's generation config), which is not known to be greedy."""
    temperature = parameters.get("temperature")
    return isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature == 0


def load_capture(path: Path) -> tuple[GoldenSet | None, list[Problem]]:
    """The replayable records of `path` as a golden set (expected = the captured answer)."""
    replay, problems = load_replay(path)
    return (replay.golden if replay is not None else None), problems


def load_replay(path: Path) -> tuple[Replay | None, list[Problem]]:
    """`load_capture`, with the counts ``eval --from-capture`` reports."""
    records, problems = read_records(path)
    cases: list[GoldenCase] = []
    not_greedy: list[str] = []
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
            if not is_greedy(record.parameters):
                not_greedy.append(case.id)
    if not problems and not cases:
        problems.append(
            Problem(
                f"capture file '{path}'",
                "(file)",
                f"has no replayable capture record ({len(records)} record(s); truncated, redacted or failed ones are skipped)",
            )
        )
    if problems:
        return None, problems
    digest = hashlib.sha256("\n".join(repr(case.to_document()) for case in cases).encode()).hexdigest()
    golden = GoldenSet(Path(path), tuple(cases), "sha256:" + digest)
    return Replay(golden, len(records), len(records) - len(cases), tuple(not_greedy)), []


@dataclass(frozen=True)
class MatchVerdict:
    """A target's share of captured answers reproduced exactly, held against ``--min-match``."""

    target: str
    matched: int
    replayed: int
    min_match: float

    @property
    def rate(self) -> float:
        return self.matched / self.replayed if self.replayed else 0.0

    @property
    def passed(self) -> bool:
        return self.rate >= self.min_match - 1e-9

    def line(self) -> str:
        verb = "reproduces" if self.passed else "reproduces only"
        relation = "at least" if self.passed else "below"
        return (
            f"{self.target}: {verb} {self.matched}/{self.replayed} captured answers ({self.rate:.2f}), "
            f"{relation} --min-match {self.min_match:g}"
        )


def match_verdicts(results: Mapping[str, TargetResult], min_match: float) -> list[MatchVerdict]:
    """One `MatchVerdict` per target of `runner.run`'s results on a replay (every case asks ``exact``)."""
    verdicts = []
    for target, result in results.items():
        matched, replayed = result.rates().get("exact", (0, 0))
        verdicts.append(MatchVerdict(target, matched, replayed, min_match))
    return verdicts
