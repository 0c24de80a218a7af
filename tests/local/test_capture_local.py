"""Per-adapter capture on the real server: the served manifest turns it on for one row only; its
records decode from the server log, and replaying them (`eval --from-capture`) gives the same text
and token counts."""

from __future__ import annotations

import io
import json

import pytest

from cdk_adapters.cli import main
from cdk_adapters.client import AdapterClient
from cdk_adapters.contract.capture_record import MARKER
from cdk_adapters.evaluation.replay import read_records
from tests.local.conftest import CAPTURED_ADAPTER

pytestmark = pytest.mark.vllm

REQUESTS = (
    {"prompt": "Invoices are due", "max_tokens": 8, "temperature": 0},
    {"prompt": "Route the request to", "max_tokens": 6, "temperature": 0},
    {"messages": [{"role": "user", "content": "Summaries should be"}], "max_tokens": 8, "temperature": 0},
)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_captured_records_decode_and_replay_to_the_same_text_and_tokens(local_mode, tmp_path):
    client = AdapterClient.from_local(local_mode.url)
    log = local_mode.work_dir / "adapter-server.log"
    offset = len(log.read_bytes())
    answers = [client.invoke(CAPTURED_ADAPTER, **request) for request in REQUESTS]
    streamed = "".join(client.stream(CAPTURED_ADAPTER, **REQUESTS[0]).text())
    client.invoke("support-en-v1", **REQUESTS[0])  # capture is off for this row
    mine = tmp_path / "captured.log"
    mine.write_bytes(log.read_bytes()[offset:])

    records, problems = read_records(mine)
    assert problems == []
    assert [r.adapter for r in records] == [CAPTURED_ADAPTER] * 4  # nothing from support-en-v1
    for record, request, answer in zip(records, REQUESTS, answers):
        assert record.response == answer.text and record.status == 200 and record.replayable
        assert (record.prompt_tokens, record.completion_tokens) == (
            answer.usage["prompt_tokens"],
            answer.usage["completion_tokens"],
        )
        asked = {k: v for k, v in request.items() if k in ("prompt", "messages", "max_tokens")}
        assert record.case == asked and record.parameters == {"temperature": 0}
    assert records[3].response == streamed == answers[0].text  # a stream is captured as the text it carried

    status, out, err = run("eval", "--from-capture", str(mine), "--target", CAPTURED_ADAPTER, "--local", local_mode.url, "--json")
    assert status == 0, err
    replay = json.loads(out)["targets"][CAPTURED_ADAPTER]
    assert replay["passed"]["exact"] == [4, 4]
    assert [c["completion_tokens"] for c in replay["cases"]] == [r.completion_tokens for r in records]
    # Another version, replayed on the same traffic, does not answer it as the captured one did.
    status, out, _ = run("eval", "--from-capture", str(mine), "--target", "support-en-v1", "--local", local_mode.url)
    assert status == 0 and out.splitlines()[1].split()[0] == "exact" and "4/4" not in out.splitlines()[1]
    # The replayed requests were captured again: the log holds marked lines only for the captured row.
    assert all(
        json.loads(line[line.index("{") :])["adapter"] == CAPTURED_ADAPTER
        for line in log.read_text().splitlines()
        if MARKER in line
    )


def test_the_replay_gate_refuses_a_candidate_that_reproduces_too_few_captured_answers(local_mode, tmp_path):
    client = AdapterClient.from_local(local_mode.url)
    log = local_mode.work_dir / "adapter-server.log"
    offset = len(log.read_bytes())
    for request in REQUESTS:
        client.invoke(CAPTURED_ADAPTER, **request)
    greedy = tmp_path / "greedy.log"
    greedy.write_bytes(log.read_bytes()[offset:])
    sampled = {"prompt": "Invoices are due", "max_tokens": 8, "temperature": 1.0, "seed": 11}
    client.invoke(CAPTURED_ADAPTER, **sampled)
    client.invoke(CAPTURED_ADAPTER, prompt="Route the request to", max_tokens=6)  # the server's default sampling
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes(log.read_bytes()[offset:])

    # The version that served the traffic reproduces all of it; the gate lets it through.
    status, out, err = run(
        "eval", "--from-capture", str(greedy), "--target", CAPTURED_ADAPTER, "--local", local_mode.url, "--min-match", "0.95"
    )
    assert status == 0, err
    assert f"{CAPTURED_ADAPTER}: reproduces 3/3 captured answers (1.00), at least --min-match 0.95" in out
    assert "replayed 3 of 3 capture record(s); 0 skipped" in out and "not answered greedily" not in out
    # Another version does not: exit 1, naming the target, its count and the threshold.
    status, out, err = run(
        "eval",
        "--from-capture",
        str(greedy),
        "--target",
        "support-en-v1",
        "--local",
        local_mode.url,
        "--min-match",
        "0.95",
        "--json",
    )
    assert status == 1
    assert "1 target(s) reproduce fewer than 0.95 of the captured answers" in err
    (gate,) = json.loads(out)["replay"]["min_match"]
    assert gate["target"] == "support-en-v1" and gate["replayed"] == 3 and gate["matched"] < 3 and gate["passed"] is False
    assert f"target 'support-en-v1': --min-match: support-en-v1: reproduces only {gate['matched']}/3" in err
    # Without --min-match a replay has no gate, as before.
    status, _, err = run("eval", "--from-capture", str(greedy), "--target", "support-en-v1", "--local", local_mode.url)
    assert status == 0, err

    # Records captured with sampling are counted, so a reader knows why they may differ.
    status, out, err = run(
        "eval", "--from-capture", str(mixed), "--target", CAPTURED_ADAPTER, "--local", local_mode.url, "--json"
    )
    assert status == 0, err
    replay = json.loads(out)["replay"]
    assert (replay["records"], replay["replayed"], replay["not_greedy"], replay["temperature"]) == (5, 5, 2, 0.0)
    records, _ = read_records(mixed)
    assert [r.parameters.get("temperature") for r in records[3:]] == [1.0, None] and records[3].parameters["seed"] == 11
    status, out, _ = run("eval", "--from-capture", str(mixed), "--target", CAPTURED_ADAPTER, "--local", local_mode.url)
    assert "2 replayed record(s) were not answered greedily" in out and "replayed at temperature 0" in out
