"""Every bad golden-set line is refused before anything is sent: file:line and field, all at once, exit 1."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cdk_adapters.cli import main
from cdk_adapters.evaluation.golden import load_golden

UNREACHABLE = "http://127.0.0.1:9"
"""Never contacted: a refused golden set stops the command before the client is built."""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_every_bad_line_and_field_is_named_at_once(tmp_path):
    golden = write(
        tmp_path / "golden.jsonl",
        {"id": "ok", "prompt": "Invoices are due", "contains": "days"},
        "{not json",
        {"id": "no-request", "expected": "x"},
        {"id": "schema", "prompt": "p", "json_schema": {"type": "objekt"}},
        {"id": "image", "prompt": "p", "image": "pictures/missing.png"},
        {"id": "regex", "prompt": "p", "regex": "(unclosed"},
        {"id": "ok", "prompt": "again"},
        {"prompt": "p", "colour": "blue", "max_tokens": -1},
    )
    status, out, err = run("eval", str(golden), "support-en-v1", "--local", UNREACHABLE)
    assert status == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"cdk-adapters: 8 problem(s) in '{golden}'; nothing was sent"
    where = f"golden set '{golden}"
    expected = [
        f"{where}:2': (line): is not JSON",
        f"{where}:3': prompt: a case needs prompt (a completion) or messages (a chat)",
        f"{where}:4': json_schema: not a valid JSON Schema at type: 'objekt' is not valid",
        f"{where}:5': image: 'pictures/missing.png' does not exist (looked for {tmp_path / 'pictures/missing.png'})",
        f"{where}:6': regex: does not compile: missing ), unterminated subpattern",
        f"{where}:7': id: 'ok' is also the id of line 1; ids must be unique",
        f"{where}:8': colour: is not a golden-set field",
        f"{where}:8': max_tokens: must be a positive integer, got -1",
    ]
    assert len(lines) == 1 + len(expected)
    for line, start in zip(lines[1:], expected):
        assert line.startswith(f"  - {start}"), (line, start)


def test_a_schema_that_does_not_parse_is_refused_by_jsonschemas_own_check(tmp_path):
    golden = write(
        tmp_path / "g.jsonl", {"prompt": "p", "json_schema": {"type": "object", "properties": {"a": {"minLength": "three"}}}}
    )
    status, _, err = run("eval", str(golden), "v1", "--local", UNREACHABLE)
    assert status == 1
    assert (
        f"golden set '{golden}:1': json_schema: not a valid JSON Schema at properties/a/minLength: 'three' is not of type 'integer'"
        in err
    )


def test_an_image_is_resolved_beside_the_golden_set(tmp_path):
    (tmp_path / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    golden, problems = load_golden(
        write(tmp_path / "g.jsonl", {"prompt": "what is it?", "image": "cat.png", "contains": ["cat"]})
    )
    assert problems == [] and golden is not None
    (case,) = golden.cases
    assert case.image == tmp_path / "cat.png" and case.contains == ("cat",) and case.checks == ("contains",)
    assert golden.digest.startswith("sha256:") and len(golden.digest) == 71


def test_a_missing_or_empty_golden_set_is_refused(tmp_path):
    status, _, err = run("eval", str(tmp_path / "nope.jsonl"), "v1", "--local", UNREACHABLE)
    assert status == 1 and f"golden set '{tmp_path / 'nope.jsonl'}': (file): cannot be read: No such file or directory" in err
    empty = write(tmp_path / "empty.jsonl", "", "   ")
    status, _, err = run("eval", str(empty), "v1", "--local", UNREACHABLE)
    assert status == 1 and "has no cases (one JSON object per line)" in err


def test_usage_errors_exit_2(tmp_path):
    golden = write(tmp_path / "g.jsonl", {"prompt": "p"})
    status, _, err = run("eval", str(golden), "--local", UNREACHABLE)
    assert status == 2 and "TARGET: name at least one target" in err
    status, _, err = run("eval", str(golden), "v1", "v2", "--reference", "v3", "--local", UNREACHABLE)
    assert status == 2 and "--reference: 'v3' is not one of the targets (v1, v2)" in err
    status, _, err = run("eval", str(golden), "v1", "v2", "--reference", "v1", "--margin", "5", "--local", UNREACHABLE)
    assert status == 2 and "--margin: must be between 0 and 1, got 5.0" in err


def test_min_match_gates_only_a_replay_and_must_be_a_share(tmp_path):
    golden = write(tmp_path / "g.jsonl", {"prompt": "p"})
    status, _, err = run("eval", str(golden), "v1", "--min-match", "0.9", "--local", UNREACHABLE)
    assert status == 2 and "--min-match: gates a replay: use it with --from-capture" in err
    capture = write(
        tmp_path / "capture.log",
        {
            "cdk_adapters_capture": 1,
            "adapter": "v1",
            "time": "t",
            "status": 200,
            "case": {"prompt": "p", "max_tokens": 4},
            "response": "x",
        },
    )
    status, _, err = run("eval", "--from-capture", str(capture), "--target", "v1", "--min-match", "95", "--local", UNREACHABLE)
    assert status == 2 and "--min-match: must be between 0 and 1, got 95.0" in err


def test_a_golden_file_beside_from_capture_is_a_usage_error_not_a_target(tmp_path):
    """It was taken as a target ("adapter 'golden.jsonl' is not served") after the capture was read."""
    golden = write(tmp_path / "golden.jsonl", {"prompt": "p"})
    capture = write(
        tmp_path / "capture.log",
        {
            "cdk_adapters_capture": 1,
            "adapter": "v1",
            "time": "t",
            "status": 200,
            "case": {"prompt": "p", "max_tokens": 4},
            "response": "x",
        },
    )
    status, out, err = run("eval", str(golden), "--from-capture", str(capture), "--target", "v1", "--local", UNREACHABLE)
    assert status == 2 and out == ""
    assert f"GOLDEN: '{golden}' is a file, but --from-capture already gives the cases" in err
    assert "is not served" not in err and "Traceback" not in err
    # A word that is an adapter name stays a target, as before.
    status, _, err = run("eval", "v1", "--from-capture", str(tmp_path / "missing.log"), "--local", UNREACHABLE)
    assert "GOLDEN" not in err
