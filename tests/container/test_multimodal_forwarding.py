"""A vision-language request passes the middleware intact: image parts reach the engine byte for byte.

This test puts a recorder where vLLM's app would be and sends the body `AdapterClient` builds for an
image through `InvocationHandler`, as SageMaker's ``/invocations`` with ``route=/v1/chat/completions``
would deliver it: what the engine is asked, byte for byte (the body's ``model`` rewritten to the
adapter). That vLLM then applies the adapter to the image exactly is test_vlm_serving.
"""

from __future__ import annotations

import asyncio
import json

from adapter_server.invocation import InvocationHandler
from adapter_server.readiness import Readiness
from adapter_server.serving_context import ServingContext
from cdk_adapters.client.payload import build_request

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3000  # 768 KB of image, about 1 MB as base64


def test_image_parts_reach_the_engine_unchanged_and_the_body_names_the_adapter():
    request = build_request(prompt="What is on this invoice?", images=[PNG], parameters={"max_tokens": 8})
    seen: dict = {}

    async def engine(scope, receive, send):
        seen["path"] = scope["path"]
        message = await receive()
        seen["body"] = message["body"]
        answer = json.dumps({"object": "chat.completion", "choices": [{"message": {"content": "an invoice"}}]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer, "more_body": False})

    async def call() -> list[dict]:
        context, readiness = ServingContext(), Readiness()
        context.store.add("invoices-v1", "/unused", "0" * 64)
        readiness.open()
        readiness.settle()
        handler = InvocationHandler(engine, context=context, readiness=readiness)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(request.body)).encode()),
            (b"x-amzn-sagemaker-adapter-identifier", b"invoices-v1"),
            (b"x-amzn-sagemaker-custom-attributes", f"route={request.route}".encode()),
        ]
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/invocations",
            "raw_path": b"/invocations",
            "headers": headers,
            "query_string": b"",
        }
        chunks = [request.body[i : i + 65536] for i in range(0, len(request.body), 65536)]
        incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        sent: list[dict] = []

        async def receive():
            return incoming.pop(0) if incoming else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await handler(scope, receive, send)
        return sent

    sent = asyncio.run(call())
    assert sent[0]["status"] == 200
    assert seen["path"] == "/v1/chat/completions"
    forwarded, original = json.loads(seen["body"]), json.loads(request.body)
    assert forwarded.pop("model") == "invoices-v1"
    assert forwarded == original  # text and image_url parts exactly as the client sent them
    image = forwarded["messages"][0]["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,") and len(image) > 1_000_000
