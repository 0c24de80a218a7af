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
            runtime.invoke_endpoint_with_response_stream(
                EndpointName="local", InferenceComponentName="local-invoices-v1", Body=b"{}"
            )


def _raw(port: int, head: str, body: bytes = b"") -> int:
    """The status of a hand-written request (httpx would set the Host itself)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode("latin-1") + body)
        return int(sock.recv(4096).split(b" ", 2)[1])


def test_the_front_answers_only_its_own_loopback_host(record):
    """A web page that rebinds its DNS name to 127.0.0.1 reaches the port, never with this Host."""
    with Served(RuntimeFront(record, "http://127.0.0.1:9")) as front:
        port = int(front.rsplit(":", 1)[1])
        assert _raw(port, f"GET /ping HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n") == 200
        assert _raw(port, f"GET /ping HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n") == 200
        for host in (f"attacker.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}"):
            assert _raw(port, f"GET /cdk-adapters/discovery HTTP/1.1\r\nHost: {host}\r\n\r\n") == 403, host


def test_a_body_that_stalls_is_408_and_frees_the_connection(record, monkeypatch):
    from cdk_adapters.local import front as front_module

    monkeypatch.setattr(front_module._read_body, "__defaults__", (0.5,))
    with Served(RuntimeFront(record, "http://127.0.0.1:9")) as front:
        port = int(front.rsplit(":", 1)[1])
        head = (
            f"POST /endpoints/local/invocations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "X-Amzn-SageMaker-Inference-Component: local-a-v1\r\nContent-Length: 1000\r\n\r\n"
        )
        assert _raw(port, head, b'{"prompt": ') == 408
