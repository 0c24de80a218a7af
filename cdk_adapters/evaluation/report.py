"""An evaluation's outputs: the side-by-side table a person reads, the JSON a script reads."""

from __future__ import annotations

from typing import Any

from cdk_adapters.evaluation.golden import CHECKS, GoldenSet
from cdk_adapters.evaluation.replay import MatchVerdict, Replay
from cdk_adapters.evaluation.runner import ALL, TargetResult, Verdict
from cdk_adapters.private.text_table import aligned_rows


def table(results: dict[str, TargetResult]) -> str:
    """One column per target: each check's passed/asked and rate, latency percentiles, tokens."""
    summaries = {target: result.summary() for target, result in results.items()}
    checks = [name for name in (*CHECKS, ALL) if any(name in s["passed"] for s in summaries.values())]
    rows: list[list[str]] = [["", *results]]
    for name in checks:
        cells = []
        for summary in summaries.values():
            passed, asked = summary["passed"].get(name, (0, 0))
            cells.append(f"{passed}/{asked} {100 * passed / asked:.0f}%" if asked else "-")
        rows.append([f"{name} (cases)" if name == ALL else name, *cells])
    rows.append(["latency p50 ms", *(f"{s['latency_ms']['p50']:.0f}" for s in summaries.values())])
    rows.append(["latency p95 ms", *(f"{s['latency_ms']['p95']:.0f}" for s in summaries.values())])
    rows.append(["prompt tokens", *(str(s["tokens"]["prompt"]) for s in summaries.values())])
    rows.append(["completion tokens", *(str(s["tokens"]["completion"]) for s in summaries.values())])
    rows.append(["errors", *(str(s["errors"]) for s in summaries.values())])
    return "\n".join(aligned_rows(rows))


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    lines = []
    for verdict in verdicts:
        if verdict.passed:
            lines.append(f"{verdict.candidate}: not worse than {verdict.reference} by more than {verdict.margin:g}")
        else:
            lost = ", ".join(f"{name} {c:.2f} < {r:.2f}" for name, (c, r) in verdict.worse.items())
            lines.append(f"{verdict.candidate}: worse than {verdict.reference} by more than {verdict.margin:g}: {lost}")
    return lines


def document(
    golden: GoldenSet, results: dict[str, TargetResult], verdicts: list[Verdict], *, temperature: float
) -> dict[str, Any]:
    """Everything measured, per target and per case, for ``--json``."""
    return {
        "golden_set": str(golden.path),
        "digest": golden.digest,
        "temperature": temperature,
        "targets": {
            target: {
                **result.summary(),
                "cases": [
                    {
                        "id": case.case_id,
                        "checks": case.checks,
                        "passed": case.passed,
                        "text": case.text,
                        "served_by": case.served_by,
                        "latency_ms": round(case.latency_ms, 3),
                        "prompt_tokens": case.prompt_tokens,
                        "completion_tokens": case.completion_tokens,
                        "error": case.error,
                    }
                    for case in result.cases
                ],
            }
            for target, result in results.items()
        },
        "verdicts": [
            {
                "candidate": v.candidate,
                "reference": v.reference,
                "margin": v.margin,
                "passed": v.passed,
                "worse": {name: {"candidate": c, "reference": r} for name, (c, r) in v.worse.items()},
            }
            for v in verdicts
        ],
    }


def replay_lines(replay: Replay, matches: list[MatchVerdict], *, temperature: float) -> list[str]:
    """What a replay's reader must know beside the table: what was skipped, sampled, and the gate."""
    lines = [
        f"replayed {len(replay.golden.cases)} of {replay.records} capture record(s); "
        f"{replay.skipped} skipped (truncated, redacted or failed)"
    ]
    if replay.not_greedy:
        lines.append(
            f"{len(replay.not_greedy)} replayed record(s) were not answered greedily (their captured temperature is "
            f"above 0 or unset) and are replayed at temperature {temperature:g}: they may differ for that reason alone"
        )
    lines += [match.line() for match in matches]
    return lines


def replay_document(replay: Replay, matches: list[MatchVerdict], *, temperature: float) -> dict[str, Any]:
    """The replay's counts and gate for ``--json``."""
    return {
        "records": replay.records,
        "replayed": len(replay.golden.cases),
        "skipped": replay.skipped,
        "not_greedy": len(replay.not_greedy),
        "not_greedy_ids": list(replay.not_greedy),
        "temperature": temperature,
        "min_match": [
            {
                "target": m.target,
                "matched": m.matched,
                "replayed": m.replayed,
                "rate": round(m.rate, 4),
                "min_match": m.min_match,
                "passed": m.passed,
            }
            for m in matches
        ],
    }
