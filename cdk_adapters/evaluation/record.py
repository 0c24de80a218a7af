"""The evaluation record beside the manifest (``<manifest stem>.eval.json``), read by ``promote``.

``cdk-adapters eval --reference OLD`` writes, for each candidate, the verdict of that candidate
against OLD on one golden set, keyed by the set's digest, the candidate and the reference, so the
last evaluation of that pair on that exact set is what a promotion finds. It is committed and
reviewed in the pull request that moves the alias, like the lock file: the reviewer sees the
evaluation that allowed the move. Key-sorted JSON with one entry per key keeps diffs small.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdk_adapters.evaluation.runner import TargetResult, Verdict

RECORD_SUFFIX = ".eval.json"
RECORD_VERSION = 1


def record_path_for(manifest_path: Path) -> Path:
    """``manifests/example.yaml`` -> ``manifests/example.eval.json``."""
    return manifest_path.with_name(manifest_path.stem + RECORD_SUFFIX)


def record_key(digest: str, candidate: str, reference: str) -> str:
    return f"{digest} {candidate} vs {reference}"


@dataclass(frozen=True)
class Evaluation:
    """One stored verdict."""

    candidate: str
    reference: str
    digest: str
    passed: bool
    margin: float
    evaluated_at: str
    golden_set: str
    worse: dict[str, Any]


def read_record(path: Path) -> dict[str, Any]:
    """The record's evaluations (empty when the file does not exist); `ValueError` when unreadable."""
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path} is not JSON: {error}") from None
    if (
        not isinstance(document, dict)
        or document.get("version") != RECORD_VERSION
        or not isinstance(document.get("evaluations"), dict)
    ):
        raise ValueError(f"{path} is not an evaluation record (version {RECORD_VERSION} with 'evaluations')")
    evaluations: dict[str, Any] = document["evaluations"]
    return evaluations


def write_verdicts(
    path: Path,
    *,
    golden_set: str,
    digest: str,
    verdicts: list[Verdict],
    results: dict[str, TargetResult],
    now: datetime | None = None,
) -> list[str]:
    """Store each verdict (replacing the previous one of the same key); returns the keys written."""
    evaluations = read_record(path)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    keys = []
    for verdict in verdicts:
        key = record_key(digest, verdict.candidate, verdict.reference)
        evaluations[key] = {
            "candidate": verdict.candidate,
            "reference": verdict.reference,
            "golden_set": golden_set,
            "digest": digest,
            "margin": verdict.margin,
            "passed": verdict.passed,
            "evaluated_at": stamp,
            "pass_rate": {
                verdict.candidate: results[verdict.candidate].summary()["pass_rate"],
                verdict.reference: results[verdict.reference].summary()["pass_rate"],
            },
            "worse": {name: {"candidate": c, "reference": r} for name, (c, r) in verdict.worse.items()},
        }
        keys.append(key)
    path.write_text(json.dumps({"version": RECORD_VERSION, "evaluations": evaluations}, indent=2, sort_keys=True) + "\n")
    return keys


def last_evaluation(path: Path, *, digest: str, candidate: str, reference: str) -> Evaluation | None:
    entry = read_record(path).get(record_key(digest, candidate, reference))
    if not isinstance(entry, dict):
        return None
    return Evaluation(
        candidate=candidate,
        reference=reference,
        digest=digest,
        passed=entry.get("passed") is True,
        margin=float(entry.get("margin", 0.0)),
        evaluated_at=str(entry.get("evaluated_at", "")),
        golden_set=str(entry.get("golden_set", "")),
        worse=dict(entry.get("worse") or {}),
    )
