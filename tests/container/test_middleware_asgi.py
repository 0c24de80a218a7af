"""The middleware's tenant boundary at the ASGI level, with no vLLM: a recording app stands where
vLLM's routes stand, so these run in the fast tier. The live-server tests (`test_serving_*`) stay
the integration proof; these prove each rule alone and say which rule a failure broke.

What is asserted is what the app behind the middleware received (or that it received nothing) and
what the caller was answered.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from adapter_server import sagemaker_contract
from adapter_server.asgi_io import Refusal, read_body
from adapter_server.invocation_request import sequence_count
from adapter_server.middleware import SageMakerAdapterMiddleware
from adapter_server.registrations import RegistrationStore
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.runtime_api import ADAPTER_IDENTIFIER_HEADER, is_loopback_host_header, refuses_host

PREFIX = "tenants-0a1b2c3d"
BASE = "tiny-base"


class RecordingApp:
    """What vLLM would be: answers 200 with the body it got, and records every request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope, receive, send) -> None:
        message = await receive()
        self.seen.append({"path": scope["path"], "body": json.loads(message.get("body") or b"{}")})
        self.headers = [(k, v) for k, v in scope["headers"] if k == ADAPTER_IDENTIFIER_HEADER.encode()]
        body = json.dumps({"choices": [{"text": "ok"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def middleware(*, registered: tuple[str, ...] = ("acme-v1",), **settings: Any) -> tuple[SageMakerAdapterMiddleware, RecordingApp]:
    app = RecordingApp()
    mw = SageMakerAdapterMiddleware(app)
    mw.context.settings = ServingSettings(component_prefix=PREFIX, **settings)
    mw.context.store = RegistrationStore(None)
    for name in registered:
        mw.context.store.add(name, f"/adapters/{name}", "0" * 64)
    mw.context.served_model_names = frozenset({BASE})
    mw.context.base_model_name = BASE
    mw.startup._task = object()  # start-up is not under test: configured above
    mw.readiness.open()
    mw.readiness.settle()
    return mw, app


def call(
    mw,
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    server=("0.0.0.0", 8080),
    chunks: list[bytes] | None = None,
    stall: bool = False,
) -> tuple[int, dict]:
    """One request through `mw`; the answer's status and JSON body."""
    parts = list(chunks) if chunks is not None else [body]
    sent: list[dict] = []
    received = {"reads": 0}

    async def receive():
        received["reads"] += 1
        if parts:
            chunk = parts.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(parts) or stall}
        if stall:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "method": method, "path": path, "headers": raw, "query_string": b"", "server": server}
    asyncio.run(mw(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(payload) if payload else {}


def completion(**fields: Any) -> bytes:
    return json.dumps({"prompt": "hi", "max_tokens": 2, **fields}).encode()


def error_type(answer: tuple[int, dict]) -> tuple[int, str]:
    return answer[0], answer[1]["error"]["type"]


# --- The adapter: the header alone chooses it, by one identity ---------------------------------


@pytest.mark.parametrize("header", ["acme-v1", f"{PREFIX}-acme-v1", f"{PREFIX.upper()}-ACME-v1"])
def test_the_header_reaches_the_adapter_by_either_name(header):
    mw, app = middleware()
    status, _ = call(mw, "POST", "/invocations", body=completion(model="other-v1"), headers={ADAPTER_IDENTIFIER_HEADER: header})
    assert status == 200
    assert app.seen[-1]["body"]["model"] == "acme-v1"
    # vLLM's SageMaker layer writes this header over the body's model: it must name the loaded adapter.
    assert app.headers == [(ADAPTER_IDENTIFIER_HEADER.encode(), b"acme-v1")]


def test_the_first_adapter_header_wins():
    mw, app = middleware(registered=("acme-v1", "other-v1"))
    raw_headers = [(b"x-amzn-sagemaker-adapter-identifier", b"acme-v1"), (b"x-amzn-sagemaker-adapter-identifier", b"other-v1")]
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": completion(), "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/invocations",
        "headers": raw_headers,
        "query_string": b"",
        "server": ("0.0.0.0", 8080),
    }
    asyncio.run(mw(scope, receive, send))
    assert sent[0]["status"] == 200 and app.seen[-1]["body"]["model"] == "acme-v1"


def test_an_unknown_adapter_is_404_naming_what_was_sent_and_nothing_reaches_the_engine():
    mw, app = middleware()
    answer = call(mw, "POST", "/invocations", body=completion(), headers={ADAPTER_IDENTIFIER_HEADER: f"{PREFIX}-ghost-v1"})
    assert error_type(answer) == (404, error_kinds.ADAPTER_NOT_FOUND)
    assert answer[1]["error"]["message"] == f"adapter '{PREFIX}-ghost-v1' is not registered on this endpoint"
    assert answer[1]["error"]["adapter"] == "ghost-v1"  # the identity, as the client and the logs know it
    assert app.seen == []


def test_no_header_with_base_access_off_is_400_before_the_body_is_read():
    mw, app = middleware()
    reads = []

    async def receive():
        reads.append(1)
        return {"type": "http.request", "body": completion(), "more_body": False}

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/invocations",
        "headers": [],
        "query_string": b"",
        "server": ("0.0.0.0", 8080),
    }
    asyncio.run(mw(scope, receive, send))
    assert sent[0]["status"] == 400 and reads == [] and app.seen == []


def test_an_unknown_adapter_is_refused_before_the_body_is_read():
    mw, _app = middleware()
    reads = []

    async def receive():
        reads.append(1)
        return {"type": "http.request", "body": b"{" * 5_000_000, "more_body": False}

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    headers = [(b"x-amzn-sagemaker-adapter-identifier", b"ghost-v1")]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/invocations",
        "headers": headers,
        "query_string": b"",
        "server": ("0.0.0.0", 8080),
    }
    asyncio.run(mw(scope, receive, send))
    assert sent[0]["status"] == 404 and reads == []


def test_with_base_access_on_no_header_reaches_the_base_and_a_body_naming_an_adapter_is_403():
    mw, app = middleware(allow_base_model=True)
    assert call(mw, "POST", "/invocations", body=completion())[0] == 200
    assert app.seen[-1]["body"]["model"] == BASE
    answer = call(mw, "POST", "/invocations", body=completion(model="acme-v1"))
    assert error_type(answer) == (403, error_kinds.ADAPTER_CHOICE_REFUSED)
    assert len(app.seen) == 1


def test_the_local_body_names_adapter_switch_is_never_honoured_on_invocations():
    mw, app = middleware(body_names_adapter=True)
    answer = call(mw, "POST", "/invocations", body=completion(model="acme-v1"))
    assert error_type(answer) == (400, error_kinds.ADAPTER_REQUIRED)
    assert (
        call(
            mw,
            "POST",
            "/v1/completions",
            body=completion(model="acme-v1"),
            server=("127.0.0.1", 8080),
            headers={"host": "127.0.0.1:8080"},
        )[0]
        == 200
    )
    assert app.seen[-1]["body"]["model"] == "acme-v1"


@pytest.mark.parametrize(
    "route, allowed", [("/v1/chat/completions", True), ("/v1/completions", True), ("/v1/embeddings", False), ("/adapters", False)]
)
def test_route_attribute_is_an_allow_list_and_keeps_the_adapter(route, allowed):
    mw, app = middleware()
    headers = {ADAPTER_IDENTIFIER_HEADER: "acme-v1", sagemaker_contract.CUSTOM_ATTRIBUTES_HEADER: f"route={route}"}
    answer = call(mw, "POST", "/invocations", body=completion(), headers=headers)
    if allowed:
        assert answer[0] == 200 and app.seen[-1] == {"path": route, "body": {**json.loads(completion()), "model": "acme-v1"}}
    else:
        assert error_type(answer) == (400, error_kinds.BAD_ROUTE) and app.seen == []


@pytest.mark.parametrize("method, path", [("GET", "/v1/models"), ("POST", "/v1/load_lora_adapter"), ("POST", "/v1/embeddings")])
def test_other_routes_are_closed(method, path):
    mw, app = middleware()
    status, _document = call(mw, method, path, body=b"{}")
    assert status in (403, 404) and app.seen == []


@pytest.mark.parametrize("name, fine", [("a" * 63, True), ("a" * 64, False), ("a_b-v1", False), ("a v1", False), ("-a", False)])
def test_registration_names_follow_sagemakers_rule(name, fine):
    mw, _ = middleware()
    mw.context.engine = mw.context.base = object()  # never used: the name, or the missing src, stops it first
    status, document = call(
        mw,
        "POST",
        "/adapters",
        body=json.dumps({"name": name, "src": "/nowhere"}).encode(),
        headers={"content-type": "application/json"},
    )
    if fine:
        assert status == 422  # past the name rule: /nowhere does not exist
    else:
        assert (status, document["error"]["type"]) == (400, error_kinds.INVALID_NAME)


# --- What one request costs, and bounds that keep one tenant from stalling the server ----------


@pytest.mark.parametrize(
    "body, cost",
    [
        ({"prompt": "x"}, 1),
        ({"prompt": "x", "n": 3}, 3),
        ({"prompt": "x", "best_of": 5, "n": 2}, 5),
        ({"prompt": ["a", "b", "c"], "n": 2}, 6),
        ({"prompt": [[1, 2], [3]]}, 2),
        ({"prompt": [1, 2, 3]}, 1),
        ({"messages": [{"role": "user", "content": "x"}], "n": 4}, 4),
    ],
)
def test_a_request_costs_its_sequences(body, cost):
    assert sequence_count(body) == cost


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "3"])
def test_an_n_that_is_not_a_positive_integer_is_400(value):
    with pytest.raises(Refusal) as refused:
        sequence_count({"prompt": "x", "n": value})
    assert (refused.value.status, refused.value.kind) == (400, error_kinds.BAD_REQUEST)


def test_without_fair_share_max_n_still_applies():
    from cdk_adapters.contract.tenant_limits import TenantLimits

    mw, app = middleware(tenant_limits=TenantLimits(fair_share=False))
    answer = call(mw, "POST", "/invocations", body=completion(n=5), headers={ADAPTER_IDENTIFIER_HEADER: "acme-v1"})
    assert error_type(answer) == (400, error_kinds.TOO_MANY_SEQUENCES) and app.seen == []
    assert call(mw, "POST", "/invocations", body=completion(n=4), headers={ADAPTER_IDENTIFIER_HEADER: "acme-v1"})[0] == 200


def test_a_stalled_body_is_408_after_the_deadline():
    async def scenario():
        async def receive():
            if not hasattr(receive, "sent"):
                receive.sent = True
                return {"type": "http.request", "body": b'{"prompt"', "more_body": True}
            await asyncio.Event().wait()

        scope = {"headers": [(b"content-length", b"100")]}
        with pytest.raises(Refusal) as refused:
            await read_body(scope, receive, deadline_s=0.05)
        return refused.value

    refusal = asyncio.run(scenario())
    assert (refusal.status, refusal.kind) == (408, error_kinds.BODY_TIMEOUT)
    assert "9 bytes came" in refusal.message


# --- Requests a web page could make --------------------------------------------------------------


@pytest.mark.parametrize(
    "host, refused",
    [
        ("127.0.0.1:8080", False),
        ("localhost:8080", False),
        ("[::1]:8080", False),
        ("attacker.example:8080", True),
        ("127.0.0.1:9999", True),
        ("127.0.0.1", True),
        (None, True),
    ],
)
def test_a_loopback_server_answers_only_loopback_hosts_at_its_port(host, refused):
    assert refuses_host(("127.0.0.1", 8080), host) is refused
    assert refuses_host(("0.0.0.0", 8080), host) is False  # an endpoint's container: SageMaker picks the Host


def test_the_middleware_refuses_a_rebound_host_before_any_route():
    mw, app = middleware()
    answer = call(
        mw,
        "POST",
        "/invocations",
        body=completion(),
        headers={ADAPTER_IDENTIFIER_HEADER: "acme-v1", "host": "evil.example:8080"},
        server=("127.0.0.1", 8080),
    )
    assert error_type(answer) == (403, error_kinds.CROSS_ORIGIN_REFUSED) and app.seen == []
    assert is_loopback_host_header("localhost:8080", 8080)


def test_adapter_administration_with_an_origin_is_refused_everywhere():
    mw, _ = middleware()
    for method, path in (("POST", "/adapters"), ("DELETE", "/adapters/acme-v1"), ("GET", "/adapters")):
        answer = call(mw, method, path, body=b'{"name": "x-v1", "src": "/x"}', headers={"origin": "http://evil.example"})
        assert error_type(answer) == (403, error_kinds.CROSS_ORIGIN_REFUSED), (method, path)
    assert "acme-v1" in mw.context.store


def test_a_local_run_takes_registration_bodies_as_json_only():
    mw, _ = middleware(body_names_adapter=True)
    mw.context.engine = mw.context.base = object()
    local = {"server": ("127.0.0.1", 8080)}
    body = b'{"name": "x-v1", "src": "/nowhere"}'
    answer = call(mw, "POST", "/adapters", body=body, headers={"host": "127.0.0.1:8080", "content-type": "text/plain"}, **local)
    assert error_type(answer) == (403, error_kinds.CROSS_ORIGIN_REFUSED)
    typed = call(
        mw, "POST", "/adapters", body=body, headers={"host": "127.0.0.1:8080", "content-type": "application/json"}, **local
    )
    assert typed[0] == 422  # past the content-type rule: /nowhere does not exist
