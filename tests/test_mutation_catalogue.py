"""`make mutate` edits code by exact text: a refactor or the formatter must not leave a mutant stale."""

from pathlib import Path

from mutation.catalogue import MUTANTS

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_every_mutant_finds_its_text_exactly_once_and_its_tests_exist():
    stale = []
    for mutant in MUTANTS:
        text = (REPO_ROOT / mutant.path).read_text()
        if text.count(mutant.original) != 1:
            stale.append(f"{mutant.id}: {mutant.path} holds its text {text.count(mutant.original)} time(s)")
        stale += [f"{mutant.id}: no test file {test}" for test in mutant.tests if not (REPO_ROOT / test.split("::")[0]).exists()]
    assert not stale, "\n".join(stale)
