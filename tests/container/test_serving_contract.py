"""SageMaker's adapter contract, exercised on a real vLLM server through our middleware."""

from __future__ import annotations

import pytest

from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    NEW_TOKENS,
    chat_body,
    completion_body,
    invoke,
    register,
    server_sent_events,
    token_ids,
    unregister,
)
from tests.support import tiny_models as tm

pytestmark = pytest.mark.vllm


def test_lifecycle_register_invoke_unregister_then_404(served, zoo):
    client = served.client
    registered = register(client, "lifecycle-v1", zoo.adapter("good"))
    assert registered.status_code == 200, registered.text
    assert registered.text == "Adapter lifecycle-v1 registered"

    assert len(token_ids(invoke(client, "lifecycle-v1"))) == NEW_TOKENS

    removed = unregister(client, "lifecycle-v1")
    assert removed.status_code == 200, removed.text

    after = invoke(client, "lifecycle-v1")
    assert after.status_code == 404
    assert after.json()["error"]["message"] == "adapter 'lifecycle-v1' is not registered on this endpoint"
    again = unregister(client, "lifecycle-v1")
    assert again.status_code == 404
    assert "lifecycle-v1" in again.json()["error"]["message"]
    assert "lifecycle-v1" not in [a["name"] for a in client.get("/adapters").json()["adapters"]]


def test_registration_accepts_query_and_json_forms_and_the_alias_header(served, zoo):
    client = served.client
    by_query = register(client, "query-form-v1", zoo.adapter("good"), form="query")
    by_json = register(client, "json-form-v1", zoo.adapter("good-2"), **{"X-Amzn-SageMaker-Adapter-Alias": "tenant-b"})
    assert (by_query.status_code, by_query.text) == (200, "Adapter query-form-v1 registered")
    assert (by_json.status_code, by_json.text) == (200, "Adapter tenant-b registered")
    assert token_ids(invoke(client, "query-form-v1")) != token_ids(invoke(client, "json-form-v1"))


def test_registration_without_name_or_src_names_both(served):
    response = served.client.post("/adapters", json={})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("POST /adapters is missing name and src")


def test_registration_is_idempotent_and_conflicts_are_409(served, zoo, tmp_path):
    client = served.client
    assert register(client, "retry-v1", zoo.adapter("good")).status_code == 200
    before = token_ids(invoke(client, "retry-v1"))

    # SageMaker retries with the same archive extracted elsewhere: same files, same answer.
    retried = register(client, "retry-v1", zoo.copy("good", tmp_path / "extracted-again"))
    assert (retried.status_code, retried.text) == (200, "Adapter retry-v1 registered (already registered with the same files)")

    conflict = register(client, "retry-v1", zoo.adapter("good-2"))
    assert conflict.status_code == 409
    error = conflict.json()["error"]
    assert error["type"] == "adapter_conflict" and error["adapter"] == "retry-v1"
    assert "already registered with different files" in error["message"]
    # The conflict changed nothing: the first files still serve.
    assert token_ids(invoke(client, "retry-v1")) == before


def test_request_without_adapter_is_refused_when_base_access_is_off(served):
    client = served.client
    response = invoke(client, None)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "adapter_required"
    assert "X-Amzn-SageMaker-Adapter-Identifier is missing" in error["message"]
    assert "CDK_ADAPTERS_ALLOW_BASE_MODEL" in error["message"]

    # The OpenAI routes inside the container are guarded the same way.
    for body in (completion_body(), completion_body(model=tm.TINY_BASE_MODEL_ID)):
        direct = client.post("/v1/completions", json=body)
        assert direct.status_code == 400, direct.text
        assert direct.json()["error"]["type"] == "adapter_required"


def test_unknown_adapter_is_404_naming_it(served):
    response = invoke(served.client, "never-registered-v1")
    assert response.status_code == 404
    assert response.json()["error"] == {
        "message": "adapter 'never-registered-v1' is not registered on this endpoint",
        "type": "adapter_not_found",
        "code": 404,
        "adapter": "never-registered-v1",
    }
    # Inside the container the OpenAI route answers the same for the header's adapter...
    direct = served.client.post("/v1/completions", json=completion_body(), headers={ADAPTER_HEADER: "never-registered-v1"})
    assert direct.status_code == 404
    # ...while a body naming it, with no header, is not a way to choose an adapter at all: with
    # base access off such a request is refused before its body is read.
    by_body = served.client.post("/v1/completions", json=completion_body(model="never-registered-v1"))
    assert (by_body.status_code, by_body.json()["error"]["type"]) == (400, "adapter_required")


def test_vllm_admin_routes_are_closed(served, zoo):
    response = served.client.post("/v1/load_lora_adapter", json={"lora_name": "sneaky", "lora_path": str(zoo.adapter("dora"))})
    assert response.status_code == 403
    assert "POST /adapters" in response.json()["error"]["message"]
    assert invoke(served.client, "sneaky").status_code == 404


def test_streaming_through_invocations_matches_the_non_streamed_answer(served, zoo):
    client = served.client
    assert register(client, "stream-v1", zoo.adapter("good")).status_code == 200
    whole = invoke(client, "stream-v1").json()["choices"][0]

    streamed = invoke(client, "stream-v1", completion_body(stream=True))
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = server_sent_events(streamed)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == whole["text"]
    streamed_ids = [t for c in chunks if c["choices"] for t in (c["choices"][0].get("token_ids") or [])]
    assert streamed_ids == whole["token_ids"]
    # The middleware asks vLLM for usage to log it, but the caller did not: no usage chunk.
    assert all("usage" not in c or c["usage"] is None for c in chunks)

    with_usage = invoke(client, "stream-v1", completion_body(stream=True, stream_options={"include_usage": True}))
    final = server_sent_events(with_usage)[-2]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == NEW_TOKENS


def test_route_attribute_reaches_chat_with_the_adapter_applied(served, zoo):
    client = served.client
    for name, kind in (("route-a-v1", "good"), ("route-b-v1", "good-2")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    chat = chat_body()
    routed = {}
    for name in ("route-a-v1", "route-b-v1"):
        response = invoke(client, name, chat, **{CUSTOM_ATTRIBUTES_HEADER: "route=/v1/chat/completions"})
        assert response.status_code == 200, response.text
        assert response.json()["object"] == "chat.completion"
        assert response.json()["model"] == name
        routed[name] = response.json()["choices"][0]["message"]["content"]
        # Same answer as the adapter on the chat route directly: the adapter really was applied.
        direct = client.post("/v1/chat/completions", json=chat, headers={ADAPTER_HEADER: name})
        assert direct.json()["choices"][0]["message"]["content"] == routed[name]
    assert routed["route-a-v1"] != routed["route-b-v1"]

    completion = invoke(client, "route-a-v1", completion_body(), **{CUSTOM_ATTRIBUTES_HEADER: "trace=1; route=/v1/completions"})
    assert token_ids(completion) == token_ids(invoke(client, "route-a-v1"))

    refused = invoke(client, "route-a-v1", chat, **{CUSTOM_ATTRIBUTES_HEADER: "route=/v1/load_lora_adapter"})
    assert refused.status_code == 400
    assert "route='/v1/load_lora_adapter' is not allowed" in refused.json()["error"]["message"]
