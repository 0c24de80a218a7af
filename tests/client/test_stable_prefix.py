"""`AdapterClient(stable_prefix=True)`: the exact bytes sent (botocore's Stubber checks them against
the real sagemaker-runtime model), so requests sharing a conversation start share their first bytes,
which ``PREFIX_AWARE`` routing compares; off by default, with the bodies unchanged."""

from __future__ import annotations

import io
import json

from botocore.response import StreamingBody

from cdk_adapters.client import AdapterClient
from cdk_adapters.client.payload import build_request
from tests.client.conftest import RECORD

SYSTEM = "You answer questions about the Example Corp returns policy. " * 24  # about 1,400 bytes
ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "thirty days"}}]}


def answered(runtime, body: bytes, route: str = "/v1/chat/completions") -> None:
    raw = json.dumps(ANSWER).encode()
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": StreamingBody(io.BytesIO(raw), len(raw)), "ContentType": "application/json"},
        {
            "EndpointName": "support-endpoint",
            "InferenceComponentName": "support-endpoint-billing-v1",
            "ContentType": "application/json",
            "CustomAttributes": f"route={route}",
            "Body": body,
        },
    )


def chat(client: AdapterClient, question: str, **parameters) -> None:
    messages = [{"content": SYSTEM, "role": "system"}, {"role": "user", "content": question}]
    client.invoke("billing-v1", messages=messages, **parameters)


def test_default_bodies_are_unchanged_parameters_first(runtime):
    system = json.dumps(SYSTEM)
    answered(
        runtime,
        b'{"max_tokens":64,"messages":[{"content":'
        + system.encode()
        + b',"role":"system"},{"role":"user","content":"Can I return shoes?"}]}',
    )
    chat(AdapterClient.from_record(RECORD, runtime=runtime), "Can I return shoes?", max_tokens=64)


def test_stable_prefix_sends_the_conversation_first_and_parameters_sorted_after_it(runtime):
    system = json.dumps(SYSTEM).encode()
    first = (
        b'{"messages":[{"role":"system","content":'
        + system
        + b'},{"role":"user","content":"Can I return shoes?"}],"max_tokens":64,"temperature":0.2}'
    )
    second = (
        b'{"messages":[{"role":"system","content":'
        + system
        + b'},{"role":"user","content":"And socks?"}],"max_tokens":512,"top_p":0.9}'
    )
    answered(runtime, first)
    answered(runtime, second)
    client = AdapterClient.from_record(RECORD, runtime=runtime, stable_prefix=True)
    chat(client, "Can I return shoes?", temperature=0.2, max_tokens=64)  # the caller's order does not matter
    chat(client, "And socks?", max_tokens=512, top_p=0.9)
    shared = len(b'{"messages":[{"role":"system","content":') + len(system)
    assert shared > 1024 and first[:shared] == second[:shared], "the smallest PREFIX_AWARE prefix_length is 1024 bytes"


def test_a_completion_starts_with_its_prompt(runtime):
    answered(runtime, b'{"prompt":"Q: returns?\\nA:","max_tokens":8,"stop":["\\n"]}', route="/v1/completions")
    AdapterClient.from_record(RECORD, runtime=runtime, stable_prefix=True).invoke(
        "billing-v1", "Q: returns?\nA:", stop=["\n"], max_tokens=8
    )


def test_a_stream_and_an_image_keep_the_conversation_first():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
    request = build_request(prompt="What is this?", images=[png], stream=True, parameters={"max_tokens": 16}, stable_prefix=True)
    assert request.body.startswith(
        b'{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url"'
    )
    assert request.body.endswith(b'}]}],"max_tokens":16,"stream":true}')
    assert json.loads(request.body) == json.loads(
        build_request(prompt="What is this?", images=[png], stream=True, parameters={"max_tokens": 16}).body
    ), "only the order of keys changes"
