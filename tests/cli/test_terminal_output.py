"""`cdk-adapters invoke` prints what a model says without the terminal escape sequences in it.

Unit cases for `TerminalText` (every kind of sequence, sequences cut between stream pieces), then
the real CLI through local mode's real front (uvicorn on loopback) to a stand-in model whose
output is hostile: the model is the input here, not the thing under test.
"""

from __future__ import annotations

import io
import json

import pytest

from cdk_adapters.cli import main
from cdk_adapters.cli.terminal import MAX_HELD, TerminalText, printable
from cdk_adapters.local.front import RuntimeFront
from cdk_adapters.local.serving import local_record
from tests.local.test_front_failures import Served

HOSTILE = [
    ("colour and cursor", "\x1b[31mred\x1b[0m \x1b[2J\x1b[1;1Hhome", "red home"),
    ("OSC title, BEL-terminated", "\x1b]0;pwned\x07title", "title"),
    ("OSC 8 hyperlink, ST-terminated", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"),
    ("OSC 52 clipboard write", "\x1b]52;c;cm0gLXJmIH4=\x07copy", "copy"),
    ("DCS and APC", "\x1bPq#0;2;0;0;0\x1b\\a\x1b_hidden\x1b\\b", "ab"),
    ("two-character escapes", "\x1bc\x1b(0x\x1b7y", "xy"),
    ("8-bit C1 controls", "\x9b31mc1\x9d0;t\x9c", "31mc10;t"),
    ("C0 controls but newline and tab", "a\rb\bc\x00d\x07e\x7ff\n\tg", "abcdef\n\tg"),
    ("a lone ESC before text", "x\x1b", "x"),
    ("text that only looks like a sequence", "[31m is not one; é, 日本, 🙂", "[31m is not one; é, 日本, 🙂"),
]


@pytest.mark.parametrize("text, expected", [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_printable_removes_every_escape_and_control(text, expected):
    assert printable(text) == expected


@pytest.mark.parametrize("text, expected", [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_a_sequence_cut_anywhere_between_two_pieces_is_still_removed(text, expected):
    for cut in range(len(text) + 1):
        stripper = TerminalText()
        assert stripper.feed(text[:cut]) + stripper.feed(text[cut:]) + stripper.finish() == expected, cut


def test_one_character_at_a_time_and_an_unfinished_sequence_at_the_end():
    stripper = TerminalText()
    shown = "".join(stripper.feed(c) for c in "ok \x1b]8;;https://evil.example\x1b\\link\x1b]0;never ends")
    assert shown + stripper.finish() == "ok link"


def test_a_runaway_sequence_is_not_held_forever():
    stripper = TerminalText()
    shown = stripper.feed("\x1b]" + "x" * (MAX_HELD + 10))
    assert shown == "]" + "x" * (MAX_HELD + 10)  # the ESC is dropped, the rest is plain text


def hostile_model(pieces: list[str]):
    """An OpenAI-style completion server whose text is `pieces` (one SSE event each when streaming)."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if json.loads(body).get("stream"):
            events = (
                b"".join(
                    b"data: " + json.dumps({"choices": [{"index": 0, "text": piece}]}).encode() + b"\n\n" for piece in pieces
                )
                + b"data: [DONE]\n\n"
            )
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": events})
        else:
            answer = json.dumps({"choices": [{"index": 0, "text": "".join(pieces)}]}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": answer})

    return app


PIECES = ["Invoices \x1b[3", "1mare\x1b[0m due \x1b]52;c;", "cm0gLXJm\x07in 30 days\r\n"]


@pytest.mark.parametrize("mode", [[], ["--no-stream"]], ids=["streamed", "whole"])
def test_invoke_prints_the_models_text_without_escapes(mode):
    record = local_record(allow_base_model=False, aliases={})
    with Served(hostile_model(PIECES)) as backend, Served(RuntimeFront(record, backend)) as front:
        out, err = io.StringIO(), io.StringIO()
        status = main(["invoke", "--local", front, "invoices-v1", "Invoices are", *mode], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    assert out.getvalue() == "Invoices are due in 30 days\n\n"
    assert "invoices-v1 (InferenceComponentName=local-invoices-v1)" in err.getvalue()


def test_invoke_refuses_a_record_for_another_endpoint_and_a_bad_pattern():
    record = local_record(allow_base_model=False, aliases={})
    with Served(hostile_model(["unused"])) as backend, Served(RuntimeFront(record, backend)) as front:
        out, err = io.StringIO(), io.StringIO()
        status = main(["invoke", "--local", front, "--accept-endpoint", "prod-*", "invoices-v1", "x"], stdout=out, stderr=err)
        assert status == 1 and out.getvalue() == ""
        assert (
            f"names endpoint '{record.endpoint_name}', which this client does not accept (accept_endpoints=['prod-*'])"
            in err.getvalue()
        )
        err = io.StringIO()
        status = main(
            ["invoke", "--local", front, "--accept-endpoint", "*", "invoices-v1", "x"], stdout=io.StringIO(), stderr=err
        )
        assert status == 2 and "--accept-endpoint: accept_endpoints must be endpoint names or prefixes" in err.getvalue()
        status = main(
            ["invoke", "--local", front, "--accept-endpoint", record.endpoint_name, "invoices-v1", "x"],
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
        assert status == 0
