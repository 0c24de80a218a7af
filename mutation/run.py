"""Run every mutant of `catalogue` against its tests: write the bug, run the tests, put the code back.

    .venv/bin/python -m mutation.run [--only ID ...] [--list]

A mutant is *killed* when its tests fail, *survives* when they pass, is *untested* when none of
its test files exists (a survivor too), and is *stale* when its original text is not found exactly
once (the code moved: update the catalogue). The file is
restored after each mutant, also when the run is interrupted. Exit status 1 if any mutant
survived or is stale.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from mutation.catalogue import MUTANTS, Mutant

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600
TEST_TIMEOUT_S = 60
"""A test that runs past this under a mutant has been broken by it (e.g. a bound removed): killed."""


def run_one(mutant: Mutant) -> tuple[str, float]:
    path = REPO_ROOT / mutant.path
    original = path.read_text()
    if original.count(mutant.original) != 1:
        return "stale", 0.0
    tests = [test for test in mutant.tests if (REPO_ROOT / test.split("::")[0]).exists()]
    if not tests:
        return "untested", 0.0  # nothing that could catch it exists: a survivor
    started = time.monotonic()
    try:
        path.write_text(original.replace(mutant.original, mutant.replacement, 1))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "--no-header",
                "-p",
                "no:cacheprovider",
                f"--timeout={TEST_TIMEOUT_S}",
                *tests,
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        outcome = "survived" if done.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        outcome = "killed (timeout)"
    finally:
        path.write_text(original)
    return outcome, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, metavar="ID", help="run these mutants only")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only is None or m.id in args.only]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.area:<10} {mutant.id:<36} {mutant.path}")
        return 0
    results: dict[str, list[str]] = {}
    for mutant in chosen:
        outcome, seconds = run_one(mutant)
        results.setdefault(outcome.split()[0], []).append(mutant.id)
        print(f"{outcome:<17} {mutant.area:<10} {mutant.id:<36} {seconds:6.1f} s", flush=True)
    killed = len(results.get("killed", []))
    scored = killed + len(results.get("survived", [])) + len(results.get("untested", []))
    print(f"\nscore: {killed}/{scored} killed" + (f" ({killed / scored:.0%})" if scored else ""))
    for kind in ("survived", "untested", "stale"):
        if results.get(kind):
            print(f"{kind}: {', '.join(results[kind])}")
    return 1 if results.get("survived") or results.get("untested") or results.get("stale") else 0


if __name__ == "__main__":
    sys.exit(main())
