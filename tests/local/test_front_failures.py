"""Local mode's front when the adapter server misbehaves, without vLLM: a stream cut off mid-way
and an adapter server that is not there. Both servers are real (uvicorn on loopback), and the
calls are botocore's, so what reaches the caller is what botocore makes of the bytes."""

from __future__ import annotations

import json

import pytest

from cdk_adapters.client import AdapterClient, InvocationFailed, StreamInterrupted, local_runtime_client
from cdk_adapters.local.front import RuntimeFront
from cdk_adapters.local.serving import free_port, local_record
from tests.support.loopback import Served

CHUNK = b'data: {"choices": [{"index": 0, "text": "Invoices"}]}\n\n'


async def breaking_server(scope, receive, send):
    """Answers one SSE chunk, then dies: uvicorn drops the connection mid-body."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    raise RuntimeError("engine died mid-stream")


@pytest.fixture
def record():
    return local_record(allow_base_model=False, aliases={})


def test_a_stream_cut_off_mid_way_ends_with_a_model_stream_error(record):
    with Served(breaking_server) as backend, Served(RuntimeFront(record, backend)) as front:
        client = AdapterClient(record, runtime=local_runtime_client(front))
        stream = client.stream("invoices-v1", "Invoices are")
        received = []
        with pytest.raises(StreamInterrupted, match="the model's stream failed"):
            for chunk in stream:
                received.append(chunk)
        assert received == [json.loads(CHUNK[6:])]


def test_an_adapter_server_that_is_not_there_is_an_internal_failure(record):
    gone = f"http://127.0.0.1:{free_port()}"
    with Served(RuntimeFront(record, gone)) as front:
        runtime = local_runtime_client(front)
        client = AdapterClient(record, runtime=runtime)
        with pytest.raises(InvocationFailed, match="InternalFailure: the local adapter server did not answer"):
            client.invoke("invoices-v1", "x")
        with pytest.raises(runtime.exceptions.InternalFailure):
            runtime.invoke_endpoint_with_response_stream(EndpointName="local", InferenceComponentName="local-invoices-v1", Body=b"{}")
