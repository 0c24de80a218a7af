"""The golden set: one JSON case per line, read strictly, every problem named by file:line and field.

A case asks with ``prompt`` (a completion) or ``messages`` (a chat), optionally with an ``image``
(a path relative to the golden set file), and says what a good answer is: ``expected`` (the exact
text), ``contains`` (a string or a list of strings), ``regex`` (searched for), ``json: true`` (the
answer parses as JSON) and ``json_schema`` (the answer is JSON matching it; the request then asks
vLLM's structured outputs for it). ``max_tokens`` and ``id`` are optional. The set's digest (sha256
of its bytes) keys the evaluation record a promotion reads, so an edited set needs a new evaluation.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk_adapters.problems import Problem

DEFAULT_MAX_TOKENS = 32

CHECKS = ("exact", "contains", "regex", "json", "schema")
"""The checks a case can ask for, in the order reports show them."""

_FIELDS = frozenset({"id", "prompt", "messages", "image", "expected", "contains", "regex", "json", "json_schema", "max_tokens"})


@dataclass(frozen=True)
class GoldenCase:
    """One request and what its answer must satisfy."""

    id: str
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    image: Path | None = None
    expected: str | None = None
    contains: tuple[str, ...] = ()
    regex: str | None = None
    json: bool = False
    json_schema: dict[str, Any] | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks this case asks for (a case asking for none is answered, never scored)."""
        wanted = {
            "exact": self.expected is not None,
            "contains": bool(self.contains),
            "regex": self.regex is not None,
            "json": self.json,
            "schema": self.json_schema is not None,
        }
        return tuple(name for name in CHECKS if wanted[name])

    def to_document(self) -> dict[str, Any]:
        """The case as a golden-set line (what a capture record embeds, and `load_golden` reads back)."""
        document: dict[str, Any] = {"id": self.id}
        if self.prompt is not None:
            document["prompt"] = self.prompt
        if self.messages is not None:
            document["messages"] = [dict(message) for message in self.messages]
        if self.image is not None:
            document["image"] = str(self.image)
        if self.expected is not None:
            document["expected"] = self.expected
        if self.contains:
            document["contains"] = list(self.contains)
        if self.regex is not None:
            document["regex"] = self.regex
        if self.json:
            document["json"] = True
        if self.json_schema is not None:
            document["json_schema"] = self.json_schema
        document["max_tokens"] = self.max_tokens
        return document


@dataclass(frozen=True)
class GoldenSet:
    path: Path
    cases: tuple[GoldenCase, ...]
    digest: str
    """``sha256:<hex>`` of the file's bytes."""


def load_golden(path: Path) -> tuple[GoldenSet | None, list[Problem]]:
    """Read `path`; every bad line and field is a `Problem` (subject ``golden set 'FILE:LINE'``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        return None, [Problem(f"golden set '{path}'", "(file)", f"cannot be read: {error.strerror or error}")]
    problems: list[Problem] = []
    cases: list[GoldenCase] = []
    seen: dict[str, int] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, [Problem(f"golden set '{path}'", "(file)", f"is not UTF-8 text: {error}")]
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        subject = f"golden set '{path}:{number}'"
        try:
            document = json.loads(line)
        except ValueError as error:
            problems.append(Problem(subject, "(line)", f"is not JSON: {error}"))
            continue
        case, found = case_from_document(document, subject=subject, base_dir=path.parent, default_id=f"line-{number}")
        problems.extend(found)
        if case is None:
            continue
        if case.id in seen:
            problems.append(Problem(subject, "id", f"{case.id!r} is also the id of line {seen[case.id]}; ids must be unique"))
        seen.setdefault(case.id, number)
        cases.append(case)
    if not cases and not problems:
        problems.append(Problem(f"golden set '{path}'", "(file)", "has no cases (one JSON object per line)"))
    if problems:
        return None, problems
    return GoldenSet(path, tuple(cases), "sha256:" + hashlib.sha256(data).hexdigest()), []


def case_from_document(
    document: object, *, subject: str, base_dir: Path | None, default_id: str
) -> tuple[GoldenCase | None, list[Problem]]:
    """One case from its JSON object, or the problems with it (all of them)."""
    if not isinstance(document, dict):
        return None, [Problem(subject, "(line)", f"must be a JSON object, got {type(document).__name__}")]
    problems: list[Problem] = []

    def bad(field: str, message: str) -> None:
        problems.append(Problem(subject, field, message))

    for unknown in sorted(set(document) - _FIELDS):
        bad(unknown, f"is not a golden-set field (known: {', '.join(sorted(_FIELDS))})")
    prompt, messages = document.get("prompt"), document.get("messages")
    if prompt is None and messages is None:
        bad("prompt", "a case needs prompt (a completion) or messages (a chat)")
    elif prompt is not None and messages is not None:
        bad("prompt", "give prompt or messages, not both")
    if prompt is not None and not isinstance(prompt, str):
        bad("prompt", f"must be a string, got {type(prompt).__name__}")
    if messages is not None and not _is_messages(messages):
        bad("messages", 'must be a non-empty list of {"role": ..., "content": ...} objects')
    image = _image(document.get("image"), base_dir, bad)
    expected = document.get("expected")
    if expected is not None and not isinstance(expected, str):
        bad("expected", f"must be a string, got {type(expected).__name__}")
    contains = document.get("contains")
    if contains is None:
        contains = ()
    elif isinstance(contains, str) and contains:
        contains = (contains,)
    elif not isinstance(contains, list) or not contains or not all(isinstance(item, str) and item for item in contains):
        bad("contains", "must be a non-empty string or a non-empty list of them")
        contains = ()
    regex = document.get("regex")
    if regex is not None:
        if not isinstance(regex, str):
            bad("regex", f"must be a string, got {type(regex).__name__}")
        else:
            try:
                re.compile(regex)
            except re.error as error:
                bad("regex", f"does not compile: {error}")
    wants_json = document.get("json", False)
    if not isinstance(wants_json, bool):
        bad("json", f"must be true or false, got {wants_json!r}")
    schema = document.get("json_schema")
    if schema is not None:
        from cdk_adapters.client.structured import schema_problems

        for message in schema_problems(schema):
            bad("json_schema", message)
    max_tokens = document.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        bad("max_tokens", f"must be a positive integer, got {max_tokens!r}")
    case_id = document.get("id", default_id)
    if not isinstance(case_id, str) or not case_id:
        bad("id", f"must be a non-empty string, got {case_id!r}")
    if problems:
        return None, problems
    return (
        GoldenCase(
            id=case_id,
            prompt=prompt,
            messages=tuple(dict(m) for m in messages) if messages is not None else None,
            image=image,
            expected=expected,
            contains=tuple(contains),
            regex=regex,
            json=wants_json,
            json_schema=schema,
            max_tokens=max_tokens,
        ),
        [],
    )


def _is_messages(messages: object) -> bool:
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages)
    )


def _image(value: object, base_dir: Path | None, bad: Callable[[str, str], None]) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        bad("image", f"must be a file path (relative to the golden set), got {value!r}")
        return None
    path = Path(value)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        bad("image", f"{value!r} does not exist (looked for {path})")
        return None
    return path
