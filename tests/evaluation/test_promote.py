"""`cdk-adapters promote`: the alias row and nothing else changes, and only after a passed evaluation
(rollback needs none). The evaluation record is the one `eval` writes (`write_verdicts`)."""

from __future__ import annotations

import difflib
import io
import json
import shutil
from pathlib import Path

import pytest

from cdk_adapters.cli import main
from cdk_adapters.evaluation.golden import load_golden
from cdk_adapters.evaluation.record import record_path_for, write_verdicts
from cdk_adapters.evaluation.runner import CaseResult, TargetResult, Verdict

REPO = Path(__file__).resolve().parents[2]
ALIASES = """
aliases:
  # the English support alias: a canary of v2 is next
  support-en: support-en-v1   # owned by support-ml
  support-de:
    support-de-v1: 100

# trailing comment stays
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path) -> Path:
    """The example manifest (comments, lock file and all) with two more rows and an aliases block."""
    manifest = tmp_path / "example.yaml"
    text = (REPO / "manifests/example.yaml").read_text()
    rows = (
        "  - name: support-en-v2\n    source: s3://example-ml-adapters/adapters/support-en-v2/adapter.tar.gz\n"
        "  - name: support-de-v2\n    source: s3://example-ml-adapters/adapters/support-de-v2/adapter.tar.gz\n"
    )
    marker = "  # A local PEFT output directory"
    assert marker in text
    manifest.write_text(text.replace(marker, rows + marker) + ALIASES)
    shutil.copy(REPO / "manifests/example.lock.json", tmp_path / "example.lock.json")
    (tmp_path / "golden.jsonl").write_text(json.dumps({"prompt": "Hallo", "contains": "Danke"}) + "\n")
    return manifest


def record(project: Path, candidate: str, reference: str, *, passed: bool) -> None:
    golden, problems = load_golden(project.parent / "golden.jsonl")
    assert not problems
    results = {
        name: TargetResult(name, [CaseResult("line-1", "Danke" if ok else "Nein", {"contains": ok}, 10.0)])
        for name, ok in ((candidate, passed), (reference, True))
    }
    worse = {} if passed else {"contains": (0.0, 1.0), "all": (0.0, 1.0)}
    write_verdicts(
        record_path_for(project),
        golden_set="golden.jsonl",
        digest=golden.digest,
        verdicts=[Verdict(candidate, reference, 0.05, worse)],
        results=results,
    )


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def promote(project: Path, *extra: str) -> tuple[int, str, str]:
    return run("promote", "support-en", "--to", "support-en-v2", "--from", "support-en-v1", "--manifest", str(project), *extra)


def test_without_an_evaluation_the_promotion_is_refused_and_nothing_changes(project):
    before = project.read_text()
    status, out, err = promote(project, "--weights", "10,90", "--golden", str(project.parent / "golden.jsonl"))
    assert status == 1 and out == ""
    assert "cdk-adapters: promotion refused; nothing was changed" in err
    assert "alias 'support-en': --to: support-en-v2 has no evaluation against support-en-v1 on" in err
    assert "run: cdk-adapters eval" in err
    assert project.read_text() == before


def test_a_failed_evaluation_refuses_the_promotion(project):
    record(project, "support-en-v2", "support-en-v1", passed=False)
    before = project.read_text()
    status, _, err = promote(project, "--weights", "10,90", "--golden", str(project.parent / "golden.jsonl"))
    assert status == 1 and project.read_text() == before
    assert (
        "the last evaluation of support-en-v2 against support-en-v1" in err
        and "failed: all 0.00 < 1.00, contains 0.00 < 1.00;" in err
    )


def test_an_evaluation_on_another_golden_set_does_not_count(project):
    record(project, "support-en-v2", "support-en-v1", passed=True)
    (project.parent / "golden.jsonl").write_text(json.dumps({"prompt": "Hallo", "contains": "Bitte"}) + "\n")
    status, _, err = promote(project, "--weights", "10,90", "--golden", str(project.parent / "golden.jsonl"))
    assert status == 1 and "has no evaluation against support-en-v1" in err


def test_raising_the_new_share_needs_the_golden_set(project):
    status, _, err = promote(project, "--weights", "10,90")
    assert status == 1 and "--golden: raising support-en-v2's share from 0% to 10% needs the golden set" in err


def test_a_passed_evaluation_moves_exactly_the_alias_row(project):
    record(project, "support-en-v2", "support-en-v1", passed=True)
    lock = (project.parent / "example.lock.json").read_bytes()
    before = project.read_text()
    status, out, err = promote(project, "--weights", "10,90", "--golden", str(project.parent / "golden.jsonl"))
    assert status == 0, err
    after = project.read_text()
    assert changed_lines(before, after) == [
        "-  support-en: support-en-v1   # owned by support-ml",
        "+  support-en: {support-en-v2: 10, support-en-v1: 90}  # owned by support-ml",
    ]
    assert (
        out
        == "- support-en: support-en-v1   # owned by support-ml\n+ support-en: {support-en-v2: 10, support-en-v1: 90}  # owned by support-ml\n"
    )
    assert "evaluation of support-en-v2 against support-en-v1 passed" in err
    assert (project.parent / "example.lock.json").read_bytes() == lock
    # The same evaluation lets the whole alias move; 0 drops the old version from the row.
    status, _, err = promote(project, "--weights", "100,0", "--golden", str(project.parent / "golden.jsonl"))
    assert status == 0, err
    assert changed_lines(after, project.read_text()) == [
        "-  support-en: {support-en-v2: 10, support-en-v1: 90}  # owned by support-ml",
        "+  support-en: support-en-v2  # owned by support-ml",
    ]


def test_rollback_needs_no_evaluation(project):
    record(project, "support-en-v2", "support-en-v1", passed=True)
    golden = str(project.parent / "golden.jsonl")
    assert promote(project, "--weights", "50,50", "--golden", golden)[0] == 0
    record_path_for(project).unlink()  # the evaluation is gone: rolling back must still work
    before = project.read_text()
    status, _, err = promote(project, "--weights", "0,100")
    assert status == 0, err
    assert "rollback, no evaluation needed" in err
    assert changed_lines(before, project.read_text()) == [
        "-  support-en: {support-en-v2: 50, support-en-v1: 50}  # owned by support-ml",
        "+  support-en: support-en-v1  # owned by support-ml",
    ]


def test_a_block_style_alias_becomes_one_line_and_the_rest_stays(project):
    record(project, "support-de-v2", "support-de-v1", passed=True)
    before = project.read_text()
    status, _, err = run(
        "promote",
        "support-de",
        "--to",
        "support-de-v2",
        "--from",
        "support-de-v1",
        "--weights",
        "25,75",
        "--golden",
        str(project.parent / "golden.jsonl"),
        "--manifest",
        str(project),
    )
    assert status == 0, err
    assert changed_lines(before, project.read_text()) == [
        "-  support-de:",
        "-    support-de-v1: 100",
        "+  support-de: {support-de-v2: 25, support-de-v1: 75}",
    ]
    assert project.read_text().endswith("\n# trailing comment stays\n")


def test_bad_promotions_name_every_problem(project):
    status, _, err = run(
        "promote",
        "support-fr",
        "--to",
        "support-fr-v2",
        "--from",
        "support-en-v1",
        "--weights",
        "10,90",
        "--manifest",
        str(project),
    )
    assert status == 1
    assert "alias 'support-fr': aliases.support-fr: is not an alias of" in err
    assert "alias 'support-fr': --to: 'support-fr-v2' is not an adapter row of" in err
    status, _, err = promote(project, "--weights", "10,80")
    assert status == 2 and "--weights: must be two percentages NEW,OLD from 0 to 100 summing to 100" in err
