"""Structured output: ask vLLM for an answer constrained by a JSON Schema, and check what came back.

vLLM 0.31 accepts OpenAI's ``response_format: {"type": "json_schema", ...}`` on both the chat and
the completions routes (``vllm/entrypoints/generate/base/protocol.py``
``structured_outputs_from_response_format`` turns it into ``StructuredOutputsParams(json=...)``),
so one request shape serves both. Constrained decoding makes the text follow the schema's grammar,
but a ``max_tokens`` cut-off still truncates it, and a server without the constraint (or a proxy
that drops the field) answers free text: asking for JSON does not guarantee valid JSON, so the
answer is always validated here too. jsonschema is imported only when a schema is checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cdk_adapters.client.errors import AnswerNotJson, AnswerSchemaMismatch

SCHEMA_NAME = "answer"
"""OpenAI's ``json_schema.name`` is required; vLLM ignores it."""


def response_format(schema: Mapping[str, Any], *, name: str = SCHEMA_NAME) -> dict[str, Any]:
    """The ``response_format`` body field that constrains the answer to `schema`."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": True}}


def schema_problems(schema: object) -> list[str]:
    """Why `schema` is not a usable JSON Schema (jsonschema's ``check_schema``); empty when it is."""
    from jsonschema import exceptions, validators

    if not isinstance(schema, dict):
        return [f"a JSON Schema is an object, got {type(schema).__name__}"]
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        return [f"not a valid JSON Schema at {where}: {error.message}"]
    return []


def parse_json(text: str) -> Any:
    """The JSON value `text` holds; `AnswerNotJson` naming where parsing stopped."""
    try:
        return json.loads(text)
    except ValueError as error:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise AnswerNotJson(f"the answer is not JSON ({error}): {shown!r}", text=text) from None


def validate_answer(text: str, schema: Mapping[str, Any]) -> Any:
    """The answer's JSON value when it matches `schema`; `AnswerNotJson` or `AnswerSchemaMismatch`
    (listing every mismatch, each with its path) otherwise."""
    from jsonschema import validators

    value = parse_json(text)
    cls = validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        mismatches = tuple(
            f"{'/'.join(str(p) for p in error.absolute_path) or '(top level)'}: {error.message}" for error in errors
        )
        raise AnswerSchemaMismatch(
            f"the answer does not match the schema ({len(mismatches)} mismatch(es)): " + "; ".join(mismatches),
            text=text,
            mismatches=mismatches,
        )
    return value
