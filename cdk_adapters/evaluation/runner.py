"""Run a golden set against named targets through `AdapterClient`, and score every answer.

Cases go round the targets in turn (case 1 on every target, then case 2, ...), so a target that
does not exist is found on the first case, and load changes during a run touch every target alike.
A target is an adapter or alias name, or `BASE_TARGET` for the base model (where the endpoint
allows it). Decoding is greedy (temperature 0) unless asked otherwise, so a deterministic server
gives the same answers run after run.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_adapters.evaluation.golden import CHECKS, GoldenCase

BASE_TARGET = "base"
"""The target name that means the base model (``base_model=True``), not an adapter."""

ALL = "all"
"""The pass rate of a whole case: every check it asks for passed."""


class TargetUnavailable(Exception):
    """A target the endpoint does not serve (unknown adapter, or the base model where it is off)."""

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(f"{target}: {reason}")
        self.target, self.reason = target, reason


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    text: str
    checks: dict[str, bool]
    """Each check the case asks for: passed or not (all fail when the call failed)."""
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    served_by: str | None = None
    """The adapter that answered (an alias resolves to one of its versions)."""
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(self.checks.values())


@dataclass
class TargetResult:
    target: str
    cases: list[CaseResult] = field(default_factory=list)

    def rates(self) -> dict[str, tuple[int, int]]:
        """check -> (passed, asked), for the checks some case asks for, plus `ALL` over the cases that
        ask for one (or failed: a failed call fails its case)."""
        counts = {name: [0, 0] for name in CHECKS}
        for case in self.cases:
            for name, ok in case.checks.items():
                counts[name][0] += ok
                counts[name][1] += 1
        found = {name: (p, n) for name, (p, n) in counts.items() if n}
        scored = [case for case in self.cases if case.checks or case.error is not None]
        found[ALL] = (sum(case.passed for case in scored), len(scored))
        return found

    def summary(self) -> dict[str, Any]:
        latencies = sorted(case.latency_ms for case in self.cases)
        return {
            "pass_rate": {name: (round(p / n, 4) if n else 0.0) for name, (p, n) in self.rates().items()},
            "passed": {name: [p, n] for name, (p, n) in self.rates().items()},
            "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
            "tokens": {
                "prompt": sum(case.prompt_tokens for case in self.cases),
                "completion": sum(case.completion_tokens for case in self.cases),
            },
            "errors": sum(case.error is not None for case in self.cases),
        }


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100)
    return round(float(ordered[int(rank) - 1]), 3)


def score(case: GoldenCase, text: str) -> dict[str, bool]:
    """Each check `case` asks for, applied to the answer `text`."""
    results: dict[str, bool] = {}
    if case.expected is not None:
        results["exact"] = text.strip() == case.expected.strip()
    if case.contains:
        results["contains"] = all(needle in text for needle in case.contains)
    if case.regex is not None:
        results["regex"] = re.search(case.regex, text) is not None
    value: Any = None
    parsed = False
    if case.json or case.json_schema is not None:
        with contextlib.suppress(ValueError):
            value, parsed = json.loads(text), True
    if case.json:
        results["json"] = parsed
    if case.json_schema is not None:
        results["schema"] = parsed and _matches(value, case.json_schema)
    return results


def _matches(value: Any, schema: dict[str, Any]) -> bool:
    from jsonschema import validators

    valid: bool = validators.validator_for(schema)(schema).is_valid(value)  # jsonschema ships no types
    return valid


def run(
    client: Any,
    targets: Sequence[str],
    cases: Sequence[GoldenCase],
    *,
    temperature: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, TargetResult]:
    """Every case on every target; raises `TargetUnavailable` as soon as a target is not served."""
    results = {target: TargetResult(target) for target in targets}
    for case in cases:
        for target in targets:
            results[target].cases.append(run_case(client, target, case, temperature=temperature, clock=clock))
    return results


def run_case(
    client: Any, target: str, case: GoldenCase, *, temperature: float = 0.0, clock: Callable[[], float] = time.perf_counter
) -> CaseResult:
    """One call and its score. A failed call is a failed case (its error kept); a target that is not
    served stops the run."""
    from cdk_adapters.client import AdapterClientError, AdapterNotFound, AdapterRequired, BaseModelNotAllowed

    base = target == BASE_TARGET
    call: dict[str, Any] = {"max_tokens": case.max_tokens, "temperature": temperature}
    if case.json_schema is not None:
        call["json_schema"] = case.json_schema
    if case.messages is not None:
        call["messages"] = [dict(message) for message in case.messages]
    else:
        call["prompt"] = case.prompt
    if case.image is not None:
        call["images"] = [case.image]  # with a prompt, the client sends it as one user message
    started = clock()
    try:
        answer = client.invoke(None if base else target, base_model=base, **call)
    except (AdapterNotFound, BaseModelNotAllowed, AdapterRequired) as error:
        raise TargetUnavailable(target, str(error)) from None
    except AdapterClientError as error:
        elapsed = (clock() - started) * 1000
        return CaseResult(case.id, "", dict.fromkeys(case.checks, False), elapsed, error=str(error))
    elapsed = (clock() - started) * 1000
    usage = answer.usage
    return CaseResult(
        case.id,
        answer.text,
        score(case, answer.text),
        elapsed,
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=usage["completion_tokens"],
        served_by=answer.adapter,
    )


@dataclass(frozen=True)
class Verdict:
    """A candidate held against the reference: which checks' pass rates fell by more than the margin."""

    candidate: str
    reference: str
    margin: float
    worse: dict[str, tuple[float, float]]
    """check -> (candidate rate, reference rate), for each check it lost by more than `margin`."""

    @property
    def passed(self) -> bool:
        return not self.worse


def compare(results: dict[str, TargetResult], reference: str, margin: float) -> list[Verdict]:
    """A `Verdict` for every target but `reference`, over every check either was scored on."""
    ref = results[reference].summary()["pass_rate"]
    verdicts = []
    for target, result in results.items():
        if target == reference:
            continue
        rates = result.summary()["pass_rate"]
        worse = {name: (rates.get(name, 0.0), ref[name]) for name in ref if rates.get(name, 0.0) < ref[name] - margin - 1e-9}
        verdicts.append(Verdict(target, reference, margin, worse))
    return verdicts
