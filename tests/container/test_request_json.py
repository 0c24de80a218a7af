"""The middleware's one JSON reader (`request_json`): every body that is not a plain JSON object is
refused with a message naming the problem, before vLLM parses it again. The parser is the thing
under test here; the same bodies go through the real server in test_serving_doors."""

from __future__ import annotations

import json
import sys

import pytest

from adapter_server.request_json import MAX_JSON_DEPTH, JsonBodyError, parse_json_object


def nested(depth: int) -> bytes:
    """An object whose ``x`` nests arrays so that the whole document is `depth` levels deep."""
    inner = depth - 1
    return b'{"x":' + b"[" * inner + b"]" * inner + b"}"


REFUSED = {
    "empty": (b"", "is empty; send a JSON object"),
    "whitespace": (b" \r\n ", "is empty; send a JSON object"),
    "not JSON": (b"prompt=hello", "is not JSON: Expecting value at line 1 column 1"),
    "truncated": (b'{"prompt": "a"', "is not JSON: Expecting ',' delimiter at line 1 column 15"),
    "byte-order mark": (b'\xef\xbb\xbf{"prompt": "a"}', "is not JSON: Unexpected UTF-8 BOM"),
    "array": (b'[{"prompt": "a"}]', "is a JSON array; send a JSON object"),
    "string": (b'"a"', "is a JSON string; send a JSON object"),
    "number": (b"12", "is a JSON number; send a JSON object"),
    "null": (b"null", "is a JSON null; send a JSON object"),
    "NaN": (b'{"temperature": NaN}', "holds NaN, which is not JSON"),
    "Infinity": (b'{"temperature": -Infinity}', "holds -Infinity, which is not JSON"),
    "float overflow": (b'{"temperature": 1e999}', "holds the number 1e999, which is too large for a float"),
    "long integer": (b'{"seed": ' + b"9" * 5000 + b"}", f"holds an integer of more than {sys.get_int_max_str_digits()} digits"),
    "duplicate key": (b'{"model": "a-v1", "prompt": "x", "model": "b-v1"}', "repeats the key 'model' in one object"),
    "invalid UTF-8": (b'{"prompt": "\xff"}', "is not valid UTF-8 (byte 0xff at offset 12)"),
    "lone high surrogate": (b'{"prompt": "\\ud800"}', "holds an unpaired UTF-16 surrogate escape"),
    "lone low surrogate": (b'{"prompt": "a\\udc00b"}', "holds an unpaired UTF-16 surrogate escape"),
    "surrogate in a key": (b'{"\\udbff": 1}', "holds an unpaired UTF-16 surrogate escape"),
    "one level too deep": (nested(MAX_JSON_DEPTH + 1), f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
    "objects too deep": (b'{"a":' * 100 + b"1" + b"}" * 100, f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
    "past the recursion limit": (nested(5_000), f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
}


@pytest.mark.parametrize(("body", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_bodies_name_the_problem(body, message):
    with pytest.raises(JsonBodyError) as caught:
        parse_json_object(body)
    assert str(caught.value).startswith(message), str(caught.value)


ACCEPTED = {
    "completion": {"prompt": "Invoices are due", "max_tokens": 8, "temperature": 0.0, "seed": 2**63 - 1},
    "chat with parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi 😀 [x] {y}"}]}]},
    "token ids": {"prompt": list(range(50_000))},
    "big but finite": {"temperature": 1.7976931348623157e308, "n": -0.0},
}


@pytest.mark.parametrize("document", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_plain_requests_read_as_json_does(document):
    body = json.dumps(document).encode()  # ensure_ascii: the emoji arrives as a surrogate pair, which is fine
    assert parse_json_object(body) == json.loads(body)
    assert parse_json_object(json.dumps(document, ensure_ascii=False).encode()) == document


def test_exactly_the_deepest_nesting_is_accepted():
    assert parse_json_object(nested(MAX_JSON_DEPTH))["x"] is not None
