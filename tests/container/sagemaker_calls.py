"""The calls SageMaker makes on the container, spelled out once for the tests."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
CUSTOM_ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"
PROMPT = "Invoices are due"
NEW_TOKENS = 8
LONG_PROMPT = " ".join(["Invoices are due at the end of the month and summaries should be short."] * 4)
"""Long enough (167 tokens) to fill whole KV-cache blocks, which vLLM's prefix cache reuses."""
INVOCATION_BODY_LIMIT = 6_291_456
"""SageMaker's InvokeEndpoint payload limit in bytes (SageMaker Runtime API Reference, InvokeEndpoint)."""
MODEL_CODE_MARKER = "model-code-ran"
"""Written by a `model.py` planted in the served model directory, if anything ever imports it."""


def register(client: httpx.Client, name: str, src: Path, *, form: str = "json", **headers: str) -> httpx.Response:
    """``POST /adapters`` as SageMaker sends it when an adapter inference component is created."""
    if form == "json":
        return client.post("/adapters", json={"name": name, "src": str(src)}, headers=headers)
    return client.post("/adapters", params={"name": name, "src": str(src)}, headers=headers)


def unregister(client: httpx.Client, name: str) -> httpx.Response:
    return client.delete(f"/adapters/{name}")


def completion_body(**overrides) -> dict:
    """A greedy completion of `PROMPT` that always yields `NEW_TOKENS` token ids."""
    return {
        "prompt": PROMPT,
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
        **overrides,
    }


def invoke(client: httpx.Client, adapter: str | None, body: dict | None = None, **headers: str) -> httpx.Response:
    """``POST /invocations``, naming `adapter` the way SageMaker does (None: no adapter header)."""
    sent = dict(headers)
    if adapter is not None:
        sent[ADAPTER_HEADER] = adapter
    return client.post("/invocations", json=body if body is not None else completion_body(), headers=sent)


def chat_body(**overrides) -> dict:
    """A greedy chat request for the tiny model's chat template."""
    return {
        "messages": [{"role": "user", "content": "Summaries should be"}],
        "max_tokens": 6,
        "temperature": 0,
        "ignore_eos": True,
        **overrides,
    }


def request_lines(server, already: int) -> list[dict]:
    """The request log lines written since `already` lines had been seen."""
    return server.events("cdk_adapters.request")[already:]


def token_ids(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["token_ids"]


def server_sent_events(response: httpx.Response) -> list[dict | str]:
    """The ``data:`` payloads of a stream: parsed JSON, or the literal ``[DONE]``."""
    events: list[dict | str] = []
    for block in response.text.split("\n\n"):
        data = "".join(line[5:].strip() for line in block.splitlines() if line.startswith("data:"))
        if data:
            events.append(data if data == "[DONE]" else json.loads(data))
    return events
