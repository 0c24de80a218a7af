"""The capture contract: settings rendered and decoded as one rule, records encoded and read back,
redaction and the size bound applied before anything is written."""

from __future__ import annotations

import json

from adapter_server.capture import Capture, answer_text
from cdk_adapters.contract import capture_record as cr
from cdk_adapters.evaluation.replay import is_greedy, load_capture, load_replay


def test_off_by_default_and_what_the_construct_renders_the_container_decodes():
    assert cr.environment(cr.CapturePolicy()) == {}
    policy, problems = cr.decode({})
    assert problems == [] and not policy.enabled and policy.for_adapter("any-v1") is None
    declared = cr.CapturePolicy(
        default=cr.CaptureSettings(sample_rate=0.05), adapters={"Support-v2": cr.CaptureSettings(redact=("response",))}
    )
    decoded, problems = cr.decode(cr.environment(declared))
    assert problems == []
    assert decoded.for_adapter("support-V2") == cr.CaptureSettings(redact=("response",))  # names compare case-insensitively
    assert decoded.for_adapter("other-v1") == cr.CaptureSettings(sample_rate=0.05)


def test_bad_settings_name_the_variable_and_every_field():
    raw = json.dumps({"adapters": {"a-v1": {"sample_rate": 0, "max_bytes": 10, "redact": ["images"], "to": "s3"}}})
    _policy, problems = cr.decode({cr.CAPTURE_ENV: raw})
    assert [(p.subject, p.field) for p in problems] == [
        (cr.CAPTURE_ENV, "adapters.a-v1.to"),
        (cr.CAPTURE_ENV, "adapters.a-v1.sample_rate"),
        (cr.CAPTURE_ENV, "adapters.a-v1.max_bytes"),
        (cr.CAPTURE_ENV, "adapters.a-v1.redact"),
    ]
    assert cr.decode({cr.CAPTURE_ENV: "{"})[1][0].message.startswith("is not JSON")


def test_sampling_is_drawn_per_request_and_only_for_adapters_with_capture_on():
    policy = cr.CapturePolicy(adapters={"a-v1": cr.CaptureSettings(sample_rate=0.25)})
    assert Capture.begin(policy, "a-v1", "/v1/completions", {}, draw=lambda: 0.2) is not None
    assert Capture.begin(policy, "a-v1", "/v1/completions", {}, draw=lambda: 0.3) is None
    assert Capture.begin(policy, "b-v1", "/v1/completions", {}, draw=lambda: 0.0) is None
    assert Capture.begin(policy, None, "/v1/completions", {}, draw=lambda: 0.0) is None  # base model: the endpoint default (off)


def exchange(settings: cr.CaptureSettings, request: dict, text: str = "Danke schön") -> cr.CaptureRecord:
    return cr.record_from_exchange(
        adapter="a-v1",
        time="2026-12-01T12:00:00.000Z",
        route="/v1/chat/completions",
        request=request,
        answer_text=text,
        prompt_tokens=7,
        completion_tokens=3,
        status=200,
        request_id="req-1",
        settings=settings,
    )


def test_a_record_encodes_to_one_marked_line_and_decodes_to_a_replayable_case(tmp_path):
    request = {"messages": [{"role": "user", "content": "Hallo"}], "max_tokens": 8, "temperature": 0, "model": "x"}
    line = cr.encode(exchange(cr.CaptureSettings(), request))
    assert "\n" not in line and json.loads(line)[cr.MARKER] == cr.RECORD_VERSION
    record, reason = cr.decode_line("2026-12-01 12:00:00 " + line)  # a log prefix (CloudWatch export) is skipped
    assert reason is None and record.replayable
    assert record.case == {"messages": [{"role": "user", "content": "Hallo"}], "max_tokens": 8}
    assert record.parameters == {"temperature": 0} and (record.prompt_tokens, record.completion_tokens) == (7, 3)
    assert cr.decode_line('{"event": "request"}') == (None, None)
    assert cr.decode_line(json.dumps({cr.MARKER: 9}))[1] == "capture record version 9; this reader knows 1"
    log = tmp_path / "server.log"
    log.write_text("INFO vLLM started\n" + line + "\n" + json.dumps({"event": "request"}) + "\n")
    golden, problems = load_capture(log)
    assert problems == []
    (case,) = golden.cases
    assert case.id == "req-1" and case.expected == "Danke schön" and case.max_tokens == 8 and case.checks == ("exact",)


def test_redaction_happens_before_writing_and_a_redacted_record_is_not_replayed(tmp_path):
    request = {
        "messages": [{"role": "system", "content": "secret policy"}, {"role": "user", "content": "my IBAN"}],
        "max_tokens": 8,
    }
    line = cr.encode(exchange(cr.CaptureSettings(redact=("messages", "response")), request))
    assert "secret policy" not in line and "IBAN" not in line and "Danke" not in line
    record, _ = cr.decode_line(line)
    assert [m["content"] for m in record.case["messages"]] == [cr.REDACTED, cr.REDACTED]
    assert record.response == cr.REDACTED and record.redacted == ("messages", "response") and not record.replayable
    (tmp_path / "log").write_text(line + "\n")
    golden, problems = load_capture(tmp_path / "log")
    assert golden is None and "has no replayable capture record (1 record(s)" in problems[0].message


def test_a_record_over_max_bytes_keeps_only_its_metadata():
    record = exchange(cr.CaptureSettings(max_bytes=1024), {"prompt": "x" * 3000, "max_tokens": 8})
    line = cr.encode(record, max_bytes=1024)
    decoded, _ = cr.decode_line(line)
    assert len(line.encode()) <= 1024 and decoded.truncated and decoded.case is None and decoded.response is None
    assert decoded.adapter == "a-v1" and decoded.completion_tokens == 3


def test_the_answer_text_is_read_from_whole_and_streamed_answers():
    assert answer_text(b'{"choices": [{"text": "abc"}]}') == "abc"
    assert answer_text(b'{"choices": [{"message": {"content": "hi"}}]}') == "hi"
    stream = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"choices": [{"delta": {"content": "b"}}]}\n\ndata: [DONE]\n\n'
    assert answer_text(stream) == "ab"
    assert answer_text(b'data: {"choices": [{"text": "x"}]}\n\ndata: {"choices": [], "usage": {}}\n\n') == "x"


def test_a_replay_counts_skipped_records_and_those_not_answered_greedily(tmp_path):
    requests = [
        {"prompt": "a", "max_tokens": 4, "temperature": 0},
        {"prompt": "b", "max_tokens": 4, "temperature": 0.7, "seed": 5},
        {"prompt": "c", "max_tokens": 4},  # the server's default temperature
        {"prompt": "d", "max_tokens": 4, "temperature": 0.0, "top_p": 0.5},  # top_p has no effect on greedy decoding
    ]
    lines = [
        cr.encode(
            cr.record_from_exchange(
                adapter="a-v1",
                time="2026-12-01T12:00:00.000Z",
                route="/v1/completions",
                request=request,
                answer_text="x",
                prompt_tokens=1,
                completion_tokens=1,
                status=200,
                request_id=f"r{index}",
                settings=cr.CaptureSettings(),
            )
        )
        for index, request in enumerate(requests)
    ]
    lines.append(cr.encode(exchange(cr.CaptureSettings(redact=("prompt",)), {"prompt": "secret", "max_tokens": 4})))
    (tmp_path / "log").write_text("\n".join(lines) + "\n")
    replay, problems = load_replay(tmp_path / "log")
    assert problems == []
    assert (replay.records, len(replay.golden.cases), replay.skipped) == (5, 4, 1)
    assert replay.not_greedy == ("r1", "r2")
    assert [is_greedy(p) for p in ({"temperature": 0}, {"temperature": 1e-9}, {}, {"temperature": False})] == [
        True,
        False,
        False,
        False,
    ]


def test_a_redacted_prompt_never_reaches_the_written_line():
    line = cr.encode(exchange(cr.CaptureSettings(redact=("prompt",)), {"prompt": "the tenant's secret", "max_tokens": 4}))
    assert "secret" not in line
    record, problem = cr.decode_line(line)
    assert problem is None and record.case["prompt"] == cr.REDACTED and record.redacted == ("prompt",)
    assert not record.replayable
