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
        assert (record.prompt_tokens, record.completion_tokens) == (answer.usage["prompt_tokens"], answer.usage["completion_tokens"])
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
    assert all(json.loads(line[line.index("{"):])["adapter"] == CAPTURED_ADAPTER
               for line in log.read_text().splitlines() if MARKER in line)
