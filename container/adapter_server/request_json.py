"""The one reader of JSON request bodies: a JSON object, or a 400 that says what is wrong with it.

vLLM parses the bodies the middleware forwards again, with the same standard-library parser. Left
to it, some bodies end in a 500 and a traceback (nesting deep enough to exhaust Python's
recursion limit, an integer too long to convert), and others in a 400 whose message does not
name the problem (a JSON array, an unpaired surrogate escape). Every such body is refused here
first, naming the problem, and what vLLM gets is the document re-encoded, so both sides read the
same thing: no duplicate keys, no ``NaN``, no number that does not fit a float.

A body is at most 6 MiB, but its shape decides what parsing it costs: C-speed byte counts bound
its arrays, objects and values before the parser starts (`MAX_JSON_CONTAINERS`,
`MAX_JSON_VALUES`), so the per-object steps (the duplicate-key hook, the nesting walk) are bounded
too. Large bodies are parsed off the event loop (`asgi_io.read_json_object`), so ``/ping`` and
other tenants' requests are answered while one is parsed.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted. OpenAI-style requests nest a few levels (a chat
message's content parts, a tool's JSON schema); a deep schema still stays well under this."""

MAX_JSON_CONTAINERS = 100_000
"""Most ``{`` and ``[`` bytes a body may hold (counted anywhere, strings included, by a C-speed
scan before parsing). A model context of 128k tokens is about 512 KB of text; a request with a
hundred thousand brackets is past any context, while a 6 MB body of ``{},{},...`` (two million
objects) would take the parser seconds. Bounding it bounds every per-object step after it."""
MAX_JSON_VALUES = 1_000_000
"""Most ``,`` bytes a body may hold (counted the same way): a prompt of token ids as long as any
context has a few hundred thousand; a million bounds the parse of a body of small numbers."""

_HUGE_NUMBER = re.compile(rb"[eE][+]?[0-9]{3}|[0-9]{309}", re.ASCII)
"""A number that may not fit a float (an exponent of 100 or more, or 309 digits): only then is each
float parsed through Python to refuse infinity; every other body is parsed at C speed."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]", re.ASCII)
"""A ``\\ud800``-``\\udfff`` escape: the only way a surrogate gets into a str from UTF-8 JSON."""


class JsonBodyError(ValueError):
    """Why a body is not an acceptable JSON object; the message completes "the request body ..."."""


def parse_json_object(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object, or `JsonBodyError` naming the first thing wrong with it."""
    if not body.strip():
        raise JsonBodyError("is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonBodyError(
            f"is not valid UTF-8 (byte 0x{body[error.start]:02x} at offset {error.start}); send JSON encoded as UTF-8"
        ) from None
    containers = body.count(b"{") + body.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise JsonBodyError(
            f"holds {containers} '{{' and '[' characters; at most {MAX_JSON_CONTAINERS} are accepted "
            "(no request within a model's context needs more arrays and objects)"
        )
    commas = body.count(b",")
    if commas > MAX_JSON_VALUES:
        raise JsonBodyError(
            f"holds {commas} ',' characters; at most {MAX_JSON_VALUES} are accepted "
            "(no request within a model's context needs more values)"
        )
    parse_float = _finite_float if _HUGE_NUMBER.search(body) else None  # None: json's own float()
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=parse_float)
    except JsonBodyError:
        raise
    except json.JSONDecodeError as error:
        raise JsonBodyError(f"is not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise JsonBodyError(f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
        raise JsonBodyError(
            f"holds an integer of more than {sys.get_int_max_str_digits()} digits, which no parameter needs"
        ) from None
    if not isinstance(document, dict):
        raise JsonBodyError(f"is a JSON {_kind(document)}; send a JSON object")
    strings = bool(_SURROGATE_ESCAPE.search(body))
    if strings or body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:  # else it cannot nest that deep
        _check_nesting(document, strings=strings)
    return document


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise JsonBodyError(f"repeats the key {key[:64]!r} in one object; give each key once")
        document[key] = value
    return document


def _no_constant(name: str) -> float:
    raise JsonBodyError(f"holds {name}, which is not JSON; send numbers only")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonBodyError(f"holds the number {text[:40]}, which is too large for a float")
    return value


def _check_nesting(document: dict[str, Any], *, strings: bool) -> None:
    """Depth first, without recursion; with `strings`, also look for unpaired surrogates."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise JsonBodyError(f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if strings:
                for text in (key, item) if isinstance(key, str) else (item,):
                    if isinstance(text, str) and not _encodable(text):
                        raise JsonBodyError(
                            "holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff without its pair), "
                            "which is not a character; send valid Unicode text"
                        )
            if isinstance(item, (dict, list)):
                pending.append((item, depth + 1))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(document: Any) -> str:
    if isinstance(document, list):
        return "array"
    if isinstance(document, str):
        return "string"
    if isinstance(document, bool):
        return "boolean"
    if document is None:
        return "null"
    return "number"
