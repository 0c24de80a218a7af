"""`AdapterClient` against botocore's Stubber: request shapes, every error mapping, retries and deadlines.

The Stubber checks each request against the real sagemaker-runtime service model. Streams are
answered through botocore's ``before-send`` hook with real event-stream bytes, so botocore's own
parser reads them (the Stubber cannot stub an event-stream body).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter

import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from cdk_adapters.client import (
    AdapterClient,
    AdapterClientError,
    AdapterLoadFailed,
    AdapterNotFound,
    AdapterRequired,
    AnswerNotJson,
    AnswerSchemaMismatch,
    BaseModelNotAllowed,
    DeadlineExceeded,
    DiscoveryError,
    EndpointWaking,
    InvalidImage,
    InvocationFailed,
    PayloadTooLarge,
    RetryPolicy,
    StreamInterrupted,
    image_data_url,
)
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES
from cdk_adapters.local.event_stream import model_stream_error, payload_part
from tests.client.conftest import RECORD
from tests.client.container_answers import container_error, held_while_replaying, start_up_failed
from tests.support.fake_clock import FakeClock

NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
ANSWER = {"choices": [{"index": 0, "text": " thirty days"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def body_of(document: dict):
    import io

    from botocore.response import StreamingBody

    raw = json.dumps(document).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def expected_call(component: str, route: str, body: dict) -> dict:
    return {
        "EndpointName": "support-endpoint",
        "InferenceComponentName": component,
        "ContentType": "application/json",
        "CustomAttributes": f"route={route}",
        "Body": json.dumps(body, separators=(",", ":")).encode(),
    }


def model_error(runtime, status: int, container_body: dict | str, method: str = "invoke_endpoint") -> None:
    original = container_body if isinstance(container_body, str) else json.dumps(container_body)
    runtime.stubber.add_client_error(
        method,
        service_error_code="ModelError",
        http_status_code=424,
        service_message=f'Received client error ({status}) from primary with message "{original}".',
        modeled_fields={"OriginalStatusCode": status, "OriginalMessage": original},
    )


def client_for(runtime, record: DiscoveryRecord = RECORD, **options) -> AdapterClient:
    return AdapterClient.from_record(record, runtime=runtime, **options)


# --- request shapes -----------------------------------------------------------------------


def test_a_completion_names_the_adapters_component_and_the_completions_route(runtime):
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER), "ContentType": "application/json"},
        expected_call("support-endpoint-support-en-v4", "/v1/completions", {"max_tokens": 2, "prompt": "Invoices are"}),
    )
    answer = client_for(runtime).invoke("support-en-v4", "Invoices are", max_tokens=2)
    assert (answer.adapter, answer.text, answer.body["usage"]["completion_tokens"]) == ("support-en-v4", " thirty days", 2)


def test_json_schema_asks_for_structured_output_and_the_answer_is_checked_on_the_client(runtime):
    schema = {"type": "object", "properties": {"urgency": {"enum": ["low", "high"]}}, "required": ["urgency"]}
    asked = {
        "max_tokens": 16,
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}},
        "prompt": "Ticket:",
    }
    for text in ('{"urgency": "high"}', '{"urgency": "medium"}', '{"urgency": "hi'):
        runtime.stubber.add_response(
            "invoke_endpoint",
            {"Body": body_of({"choices": [{"text": text}]})},
            expected_call("support-endpoint-support-en-v4", "/v1/completions", asked),
        )
    client = client_for(runtime)
    assert client.invoke("support-en-v4", "Ticket:", max_tokens=16, json_schema=schema).json(schema) == {"urgency": "high"}
    with pytest.raises(AnswerSchemaMismatch) as mismatch:
        client.invoke("support-en-v4", "Ticket:", max_tokens=16, json_schema=schema).json(schema)
    assert mismatch.value.mismatches == ("urgency: 'medium' is not one of ['low', 'high']",)
    with pytest.raises(AnswerNotJson) as cut:
        client.invoke("support-en-v4", "Ticket:", max_tokens=16, json_schema=schema).json(schema)
    assert cut.value.text == '{"urgency": "hi' and isinstance(cut.value, AdapterClientError)


def test_a_chat_goes_to_the_chat_route_and_the_component_name_is_lower_cased(runtime):
    messages = [{"role": "user", "content": "Hello"}]
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of({"choices": [{"message": {"role": "assistant", "content": "Hi"}}]})},
        expected_call("support-endpoint-support-en-v4", "/v1/chat/completions", {"messages": messages}),
    )
    assert client_for(runtime).chat("Support-EN-v4", messages).text == "Hi"


def test_an_alias_goes_to_the_adapter_its_weight_picks(runtime):
    expected = RECORD.resolve("support-en", random.Random(7))
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        expected_call(f"support-endpoint-{expected}", "/v1/completions", {"prompt": "x"}),
    )
    assert client_for(runtime, rng=random.Random(7)).invoke("support-en", "x").adapter == expected


def test_alias_weights_split_traffic_as_published():
    client = AdapterClient(RECORD, runtime=None, rng=random.Random(20261201))
    counts = Counter(client.resolve("support-en").adapter for _ in range(4000))
    # 90/10 over 4000 draws: the standard deviation of the canary count is 19, so 330..470 is > 3.5 sigma.
    assert set(counts) == {"support-en-v4", "support-en-v5"}
    assert 330 <= counts["support-en-v5"] <= 470


def test_a_call_without_an_adapter_is_refused_before_anything_is_sent(runtime):
    client = client_for(runtime)
    for missing in (None, ""):
        with pytest.raises(AdapterRequired, match="never fall back to the base model"):
            client.invoke(missing, "Hello")
        with pytest.raises(AdapterRequired):
            client.stream(missing, "Hello")


def test_the_base_model_needs_the_flag_and_an_endpoint_that_allows_it(runtime):
    with pytest.raises(BaseModelNotAllowed, match="allow_base_model false"):
        client_for(runtime).invoke(None, "Hello", base_model=True)
    allowing = DiscoveryRecord("support-endpoint", "support-endpoint-base", "support-endpoint", allow_base_model=True)
    runtime.stubber.add_response(
        "invoke_endpoint", {"Body": body_of(ANSWER)}, expected_call("support-endpoint-base", "/v1/completions", {"prompt": "x"})
    )
    assert client_for(runtime, allowing).invoke(None, "x", base_model=True).adapter is None


# --- images and the payload limit ---------------------------------------------------------


def test_images_become_data_urls_in_the_last_user_message(runtime, tmp_path):
    jpeg = tmp_path / "scan.jpg"
    jpeg.write_bytes(b"\xff\xd8\xff\xe0" + b"\x01" * 16)
    import base64

    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
        {"type": "image_url", "image_url": {"url": image_data_url(jpeg)}},
    ]
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of({"choices": [{"message": {"content": "a scan"}}]})},
        expected_call(
            "support-endpoint-support-en-v4", "/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]}
        ),
    )
    assert client_for(runtime).invoke("support-en-v4", "What is this?", images=[PNG, jpeg]).text == "a scan"
    assert image_data_url(jpeg).startswith("data:image/jpeg;base64,/9j/")


def test_an_unreadable_or_unknown_image_is_refused_naming_it(runtime, tmp_path):
    client = client_for(runtime)
    with pytest.raises(InvalidImage, match=re.escape("missing.png")):
        client.invoke("support-en-v4", "x", images=[tmp_path / "missing.png"])
    with pytest.raises(InvalidImage, match="not PNG, JPEG, GIF or WebP"):
        client.invoke("support-en-v4", "x", images=[b"plain text, not an image"])


def test_an_image_too_large_for_invoke_endpoint_is_refused_before_sending(runtime):
    # 4.8 MB of image is 6.4 MB of base64: the encoded body, not the file, is what counts.
    image = PNG + b"\x00" * 4_800_000
    with pytest.raises(PayloadTooLarge) as refused:
        client_for(runtime).stream("support-en-v4", "Describe", images=[image])
    assert refused.value.size > INVOKE_ENDPOINT_MAX_BYTES == refused.value.limit
    assert "6 MiB" in str(refused.value)


def test_a_body_exactly_at_the_limit_is_sent(runtime):
    padding = INVOKE_ENDPOINT_MAX_BYTES - len(json.dumps({"prompt": ""}, separators=(",", ":")))
    prompt = "a" * padding
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        expected_call("support-endpoint-support-en-v4", "/v1/completions", {"prompt": prompt}),
    )
    client_for(runtime).invoke("support-en-v4", prompt)
    with pytest.raises(PayloadTooLarge):
        client_for(runtime).invoke("support-en-v4", prompt + "a")


# --- error mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "container_body", "expected", "text"),
    [
        (
            404,
            container_error(
                404,
                error_kinds.ADAPTER_NOT_FOUND,
                "adapter 'support-en-v9' is not registered on this endpoint",
                adapter="support-en-v9",
            ),
            AdapterNotFound,
            "support-en-v9",
        ),
        (
            400,
            container_error(400, error_kinds.ADAPTER_REQUIRED, "the request names no adapter"),
            AdapterRequired,
            "names no adapter",
        ),
        (
            413,
            container_error(413, error_kinds.PAYLOAD_TOO_LARGE, "the request body is 7000000 bytes"),
            PayloadTooLarge,
            "7000000",
        ),
        (
            422,
            container_error(422, error_kinds.ADAPTER_LOAD_FAILED, "vLLM could not load it"),
            AdapterLoadFailed,
            "could not load",
        ),
        (500, "Internal Server Error", InvocationFailed, "answered 500"),
        (400, container_error(400, "BadRequestError", "max_tokens must be at least 1"), InvocationFailed, "max_tokens"),
    ],
)
def test_container_answers_wrapped_in_model_error_become_typed_errors(runtime, status, container_body, expected, text):
    model_error(runtime, status, container_body)
    with pytest.raises(expected, match=text) as raised:
        client_for(runtime).invoke("support-en-v9", "x")
    if expected is AdapterNotFound:
        assert raised.value.adapter == "support-en-v9"
    if expected is InvocationFailed:
        assert raised.value.status == status and raised.value.code == "ModelError"


def test_a_missing_inference_component_is_adapter_not_found(runtime):
    runtime.stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ValidationError",
        http_status_code=400,
        service_message="Inference Component support-endpoint-support-en-v9 not found.",
    )
    with pytest.raises(AdapterNotFound) as raised:
        client_for(runtime).invoke("support-en-v9", "x")
    assert raised.value.adapter == "support-en-v9"


def test_an_unknown_endpoint_is_an_invocation_failure_naming_it(runtime):
    runtime.stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ValidationError",
        http_status_code=400,
        service_message="Endpoint support-endpoint of account 123456789012 not found.",
    )
    with pytest.raises(InvocationFailed, match="Endpoint support-endpoint of account"):
        client_for(runtime).invoke("support-en-v4", "x")


def test_a_stream_call_maps_errors_the_same_way(runtime):
    model_error(
        runtime,
        404,
        container_error(404, error_kinds.ADAPTER_NOT_FOUND, "adapter 'x-v1' is not registered"),
        method="invoke_endpoint_with_response_stream",
    )
    with pytest.raises(AdapterNotFound):
        client_for(runtime).stream("x-v1", "x")


# --- waiting for capacity -----------------------------------------------------------------


def no_capacity(runtime, method: str = "invoke_endpoint") -> None:
    runtime.stubber.add_client_error(
        method, service_error_code="ValidationError", http_status_code=400, service_message=NO_CAPACITY
    )


def test_a_component_waking_from_zero_is_retried_with_backoff_until_it_answers(runtime, clock):
    for _ in range(3):
        no_capacity(runtime)
    runtime.stubber.add_response("invoke_endpoint", {"Body": body_of(ANSWER)})
    client = client_for(runtime, retry=RetryPolicy(jitter=False), clock=clock, sleep=clock.sleep)
    assert client.invoke("support-en-v4", "x").text == " thirty days"
    assert clock.sleeps == [1.0, 2.0, 4.0]


def test_model_not_ready_and_a_replaying_container_are_retried(runtime, clock):
    runtime.stubber.add_client_error(
        "invoke_endpoint", service_error_code="ModelNotReadyException", http_status_code=429, service_message="not ready"
    )
    # What the container's own Readiness answers a request held through a replay that has not finished.
    status, replaying = held_while_replaying(pending=2)
    assert (status, replaying["error"]["type"]) == (503, error_kinds.STARTING)
    model_error(runtime, status, replaying)
    runtime.stubber.add_response("invoke_endpoint", {"Body": body_of(ANSWER)})
    client = client_for(runtime, retry=RetryPolicy(jitter=False), clock=clock, sleep=clock.sleep)
    assert client.invoke("support-en-v4", "x").text == " thirty days"
    assert clock.sleeps == [1.0, 2.0]


def test_the_overall_deadline_ends_the_wait_with_endpoint_waking(runtime, clock):
    policy = RetryPolicy(deadline_s=30, initial_backoff_s=4, max_backoff_s=10, jitter=False)
    for _ in range(4):  # sleeps 4, 8, 10 (22 s); a fourth 10 s sleep would pass the 30 s deadline
        no_capacity(runtime)
    client = client_for(runtime, retry=policy, clock=clock, sleep=clock.sleep)
    with pytest.raises(EndpointWaking) as raised:
        client.invoke("support-en-v4", "x")
    assert (raised.value.attempts, raised.value.waited_s, clock.sleeps) == (4, 22.0, [4.0, 8.0, 10.0])
    assert "no capacity" in str(raised.value) and "deadline 30 s" in str(raised.value)


def test_attempts_are_bounded_too(runtime, clock):
    for _ in range(3):
        runtime.stubber.add_client_error(
            "invoke_endpoint_with_response_stream",
            service_error_code="ModelNotReadyException",
            http_status_code=429,
            service_message="not ready",
        )
    client = client_for(runtime, retry=RetryPolicy(max_attempts=3, jitter=False), clock=clock, sleep=clock.sleep)
    with pytest.raises(DeadlineExceeded) as raised:
        client.stream("support-en-v4", "x")
    assert type(raised.value) is DeadlineExceeded and raised.value.attempts == 3 and clock.sleeps == [1.0, 2.0]


def test_jittered_backoff_stays_within_half_and_all_of_each_step(clock):
    policy = RetryPolicy(initial_backoff_s=1, max_backoff_s=8)
    rng = random.Random(3)
    pauses = [policy.backoff(retry, rng) for retry in range(1, 7)]
    steps = [1, 2, 4, 8, 8, 8]
    assert all(step / 2 <= pause <= step for pause, step in zip(pauses, steps))


def test_errors_that_retrying_cannot_fix_are_raised_at_once(runtime, clock):
    model_error(runtime, 404, container_error(404, error_kinds.ADAPTER_NOT_FOUND, "adapter 'x' is not registered"))
    client = client_for(runtime, clock=clock, sleep=clock.sleep)
    with pytest.raises(AdapterNotFound):
        client.invoke("x-v1", "x")
    assert clock.sleeps == []


# --- botocore's own retries ---------------------------------------------------------------


def http_answers(client, answers: list[tuple[int, dict, bytes]]) -> list[object]:
    """Answer each HTTP request botocore sends with the next of `answers`; returns the requests."""
    sent: list[object] = []

    def answer(request, **_):
        sent.append(request)
        status, headers, body = answers[len(sent) - 1]
        raw = _RawBody(body)
        return AWSResponse(request.url, status, headers, raw)

    client.meta.events.register("before-send.sagemaker-runtime.*", answer)
    return sent


class _RawBody:
    """What urllib3 would hand botocore: a readable, streamable body."""

    def __init__(self, data: bytes) -> None:
        import io

        self._io = io.BytesIO(data)

    def read(self, amt=None):
        return self._io.read(amt)

    def stream(self, amt=1024, decode_content=None):
        while chunk := self._io.read(amt):
            yield chunk

    def close(self):
        pass


def test_botocore_standard_mode_retries_throttling_and_our_layer_owns_not_ready():
    client = AdapterClient.from_record(RECORD, region_name="us-east-1", session=_session())
    assert client.runtime.meta.config.retries == {"mode": "standard", "total_max_attempts": 5}
    throttled = (400, {"x-amzn-ErrorType": "ThrottlingException"}, b'{"message": "Rate exceeded"}')
    ok = (200, {"Content-Type": "application/json"}, json.dumps(ANSWER).encode())
    sent = http_answers(client.runtime, [throttled, ok])
    assert client.invoke("support-en-v4", "x").text == " thirty days"
    assert len(sent) == 2  # botocore retried the throttled call itself

    clock_ = FakeClock()
    client = AdapterClient.from_record(
        RECORD, region_name="us-east-1", session=_session(), clock=clock_, sleep=clock_.sleep, retry=RetryPolicy(jitter=False)
    )
    not_ready = (429, {"x-amzn-ErrorType": "ModelNotReadyException"}, b'{"Message": "not ready"}')
    sent = http_answers(client.runtime, [not_ready, ok])
    client.invoke("support-en-v4", "x")
    assert len(sent) == 2 and clock_.sleeps == [1.0]  # botocore did not retry it; the client did, once


def _session():
    import boto3

    return boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")


# --- streams ------------------------------------------------------------------------------


def sse(*documents: dict | str) -> bytes:
    return b"".join(f"data: {d if isinstance(d, str) else json.dumps(d)}\n\n".encode() for d in documents)


def stream_answer(*parts: bytes) -> tuple[int, dict, bytes]:
    return (
        200,
        {"Content-Type": "application/vnd.amazon.eventstream", "X-Amzn-SageMaker-Content-Type": "text/event-stream"},
        b"".join(parts),
    )


def test_a_stream_yields_chunks_however_the_payload_parts_split_them():
    chunks = [{"choices": [{"index": 0, "text": piece}]} for piece in (" thirty", " days", ".")]
    raw = sse(*chunks, "[DONE]")
    # Split mid-JSON, mid-"data:", and two events in one part.
    cuts = [raw[:7], raw[7:40], raw[40:41], raw[41:]]
    client = AdapterClient.from_record(RECORD, region_name="us-east-1", session=_session())
    http_answers(client.runtime, [stream_answer(*(payload_part(cut) for cut in cuts))])
    stream = client.stream("support-en-v4", "Invoices are due")
    assert stream.adapter == "support-en-v4"
    assert list(stream) == chunks


def test_an_error_event_mid_stream_raises_stream_interrupted_after_the_chunks_before_it():
    client = AdapterClient.from_record(RECORD, region_name="us-east-1", session=_session())
    http_answers(
        client.runtime, [stream_answer(payload_part(sse({"choices": [{"text": "Hi"}]})), model_stream_error("engine died"))]
    )
    stream = client.stream("support-en-v4", "x")
    pieces = []
    with pytest.raises(StreamInterrupted, match="engine died"):
        for piece in stream.text():
            pieces.append(piece)
    assert pieces == ["Hi"]


def test_vllms_in_band_error_mid_stream_raises_stream_interrupted():
    """vLLM reports a failure mid-stream as a data event with an error, then [DONE]: not an answer."""
    client = AdapterClient.from_record(RECORD, region_name="us-east-1", session=_session())
    failed = {"error": {"message": "engine core died", "type": "InternalServerError", "code": 500}}
    http_answers(client.runtime, [stream_answer(payload_part(sse({"choices": [{"text": "Hi"}]}, failed, "[DONE]")))])
    pieces = []
    with pytest.raises(StreamInterrupted, match="engine core died"):
        for piece in client.stream("support-en-v4", "x").text():
            pieces.append(piece)
    assert pieces == ["Hi"]


# --- discovery ----------------------------------------------------------------------------


def ssm_client():
    import boto3

    return boto3.client("ssm", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


def test_from_parameter_reads_the_record_from_ssm(runtime):
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        stubber.add_response(
            "get_parameter",
            {"Parameter": {"Name": "/cdk-adapters/support", "Value": RECORD.to_json()}},
            {"Name": "/cdk-adapters/support"},
        )
        client = AdapterClient.from_parameter("/cdk-adapters/support", ssm=ssm, runtime=runtime)
    assert client.record == RECORD


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("missing", "does not exist in this account"),
        ("not json", "holds no readable discovery record: not JSON"),
        ('{"kind": "cdk-adapters/discovery", "version": 2}', "record version 2"),
    ],
)
def test_an_unreadable_record_is_a_discovery_error(runtime, answer, text):
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        if answer == "missing":
            stubber.add_client_error("get_parameter", service_error_code="ParameterNotFound", http_status_code=400)
        else:
            stubber.add_response("get_parameter", {"Parameter": {"Name": "/p", "Value": answer}})
        with pytest.raises(DiscoveryError, match=text):
            AdapterClient.from_parameter("/p", ssm=ssm, runtime=runtime)


def test_importing_the_client_does_not_import_aws_cdk():
    script = (
        "import sys, cdk_adapters.client\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'constructs', 'jsii', 'cdk_nag'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_long_lived_client_follows_an_alias_rollback_within_the_records_maximum_age(runtime, clock):
    canary = DiscoveryRecord(
        "support-endpoint", "support-endpoint-base", "support-endpoint", aliases={"support-en": {"support-en-v5": 100}}
    )
    rolled_back = DiscoveryRecord(
        "support-endpoint", "support-endpoint-base", "support-endpoint", aliases={"support-en": {"support-en-v4": 100}}
    )
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        stubber.add_response("get_parameter", {"Parameter": {"Name": "/p", "Value": canary.to_json()}}, {"Name": "/p"})
        stubber.add_client_error("get_parameter", service_error_code="InternalServerError", http_status_code=500)
        stubber.add_response("get_parameter", {"Parameter": {"Name": "/p", "Value": rolled_back.to_json()}}, {"Name": "/p"})
        client = AdapterClient.from_parameter("/p", ssm=ssm, runtime=runtime, clock=clock, sleep=clock.sleep, record_max_age_s=60)
        assert client.resolve("support-en").adapter == "support-en-v5"
        clock.now += 59
        assert client.resolve("support-en").adapter == "support-en-v5"  # not re-read yet
        clock.now += 1
        assert client.resolve("support-en").adapter == "support-en-v5"  # re-read failed: the old record stays
        clock.now += 60
        assert client.resolve("support-en").adapter == "support-en-v4"  # the rollback
        stubber.assert_no_pending_responses()


def test_a_canary_endpoint_takes_its_share_of_the_adapters_it_serves(runtime):
    from cdk_adapters.contract.discovery import CanaryRecord

    canary = CanaryRecord("support-canary", "support-canary-base", "support-canary", ("support-en-v4",), 10)
    record = DiscoveryRecord(
        "support-endpoint",
        "support-endpoint-base",
        "support-endpoint",
        aliases={"support-en": {"support-en-v4": 100}},
        canary=canary,
    )
    client = AdapterClient(record, runtime=None, rng=random.Random(99))
    targets = [client.resolve("support-en") for _ in range(4000)]
    on_canary = [t for t in targets if t.canary]
    # 10% of 4000: standard deviation 19, so 330..470 is beyond 3.5 sigma.
    assert 330 <= len(on_canary) <= 470
    assert {(t.endpoint_name, t.component) for t in on_canary} == {("support-canary", "support-canary-support-en-v4")}
    assert {(t.endpoint_name, t.component) for t in targets if not t.canary} == {
        ("support-endpoint", "support-endpoint-support-en-v4")
    }
    # Adapters the canary does not serve, and base-model calls, never go there.
    assert not any(client.resolve("support-de-v1").canary for _ in range(200))

    # The call itself names the canary's endpoint and component.
    rng = random.Random(5)
    expected = AdapterClient(record, runtime=None, rng=random.Random(5)).resolve("support-en-v4")
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        {**expected_call(expected.component, "/v1/completions", {"prompt": "x"}), "EndpointName": expected.endpoint_name},
    )
    assert client_for(runtime, record, rng=rng).invoke("support-en-v4", "x").target == expected


def test_a_container_whose_start_up_failed_is_not_retried(runtime, clock):
    """503 "unhealthy" is set once and never cleared: waiting would only hide the reason."""
    reason = "persisted adapters could not be restored: adapter 'x-v1': src: files in /opt/ml/x changed since registration"
    status, failed = start_up_failed(reason)
    assert (status, failed["error"]["type"]) == (503, error_kinds.UNHEALTHY)
    model_error(runtime, status, failed)
    client = client_for(runtime, clock=clock, sleep=clock.sleep)
    with pytest.raises(InvocationFailed) as raised:
        client.invoke("support-en-v4", "x")
    assert (raised.value.status, raised.value.code, clock.sleeps) == (503, "ModelError", [])
    assert str(raised.value) == f"the model answered 503: {reason}"  # the container's reason, unwrapped


def test_a_record_re_read_without_network_keeps_the_record_in_hand(runtime, clock):
    from botocore.exceptions import EndpointConnectionError

    reads = iter([EndpointConnectionError(endpoint_url="https://ssm.us-east-1.amazonaws.com")])

    def unreachable() -> DiscoveryRecord:
        raise next(reads)

    client = AdapterClient.from_record(
        RECORD, runtime=runtime, clock=clock, sleep=clock.sleep, record_source=unreachable, record_max_age_s=60
    )
    clock.now += 61
    assert client.resolve("support-en-v4").adapter == "support-en-v4"  # the call goes on with the old record
    assert client.record == RECORD


# --- throttling (fair share) -------------------------------------------------------------------


def _throttled_body(retry_after_s: float) -> tuple[int, dict]:
    """What the container's admission answers an adapter over its queue limit."""
    from adapter_server.admission import throttled
    from cdk_adapters.contract.tenant_limits import AdapterLimits
    from tests.client.container_answers import rendered

    return rendered(
        throttled(
            "support-en-v4", "max_queue", "4 requests already wait", AdapterLimits(max_queue=4, max_queue_wait_s=retry_after_s)
        )
    )


def test_a_throttled_adapter_is_retried_after_what_the_container_says(runtime, clock):
    status, body = _throttled_body(3)
    assert (status, body["error"]["type"], body["error"]["retry_after"]) == (429, error_kinds.ADAPTER_THROTTLED, 3)
    model_error(runtime, status, body)
    runtime.stubber.add_response("invoke_endpoint", {"Body": body_of(ANSWER)})
    client = client_for(runtime, retry=RetryPolicy(jitter=False), clock=clock, sleep=clock.sleep)
    assert client.invoke("support-en-v4", "x").text == " thirty days"
    assert clock.sleeps == [3.0]  # Retry-After, not the 1 s first backoff step


def test_a_throttled_adapter_past_the_deadline_is_adapter_throttled(runtime, clock):
    from cdk_adapters.client import AdapterThrottled

    status, body = _throttled_body(20)
    for _ in range(2):
        model_error(runtime, status, body)
    client = client_for(runtime, retry=RetryPolicy(deadline_s=30, jitter=False), clock=clock, sleep=clock.sleep)
    with pytest.raises(AdapterThrottled) as raised:
        client.invoke("support-en-v4", "x")
    assert (raised.value.adapter, raised.value.limit, raised.value.retry_after_s) == ("support-en-v4", "max_queue", 20.0)
    assert "is over its max_queue limit" in str(raised.value)
    assert clock.sleeps == [20.0]  # a second 20 s wait would pass the 30 s deadline
