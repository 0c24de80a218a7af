"""An image request over InvokeEndpoint's limit is refused by `AdapterClient` before anything is sent.

The limit is the encoded body's (images as base64 ``data:`` URLs, a third larger than the files),
held against the one constant `runtime_api.INVOKE_ENDPOINT_MAX_BYTES`. The Stubber (real
sagemaker-runtime service model) and a counter on botocore's per-call event show that no call left.
"""

from __future__ import annotations

import pytest

from cdk_adapters.client import AdapterClient, PayloadTooLarge
from cdk_adapters.client.payload import build_request
from cdk_adapters.contract.runtime_api import CHAT_ROUTE, INVOKE_ENDPOINT_MAX_BYTES
from tests.client.conftest import RECORD
from tests.support import tiny_vlm

TEXT = "Read the table in this image:"
PARAMETERS = {"max_tokens": 8, "temperature": 0}


def image_of(size: int) -> bytes:
    """A real PNG (the tiny VLM's test image) padded with trailing bytes to `size` bytes."""
    png = tiny_vlm.png(1)
    return png + bytes(size - len(png))


def body_size(images, *, stream: bool = False) -> int:
    """The encoded body's size for these images, the limit aside."""
    return len(build_request(prompt=TEXT, images=images, stream=stream, parameters=PARAMETERS, limit=2**62).body)


@pytest.fixture
def sent(runtime):
    """The number of sagemaker-runtime calls the client made."""
    calls = []
    runtime.meta.events.register("provide-client-params.sagemaker-runtime", lambda params, **_: calls.append(params))
    return calls


@pytest.mark.parametrize(
    "how",
    ["invoke-bytes", "stream-path", "chat-two-images"],
)
def test_an_image_body_over_the_limit_is_refused_naming_size_and_limit_and_nothing_is_sent(runtime, sent, tmp_path, how):
    client = AdapterClient.from_record(RECORD, runtime=runtime)
    big = image_of(4_800_000)  # 4.8 MB of file, 6.4 MB of base64
    with pytest.raises(PayloadTooLarge) as refused:
        if how == "invoke-bytes":
            expected = body_size([big])
            client.invoke("support-en-v4", TEXT, images=[big], **PARAMETERS)
        elif how == "stream-path":
            path = tmp_path / "scan.png"
            path.write_bytes(big)
            expected = body_size([big], stream=True)
            client.stream("support-en-v4", TEXT, images=[path], **PARAMETERS)
        else:  # two images, each well under the limit alone: the whole body is what counts
            halves = [image_of(2_400_000), image_of(2_400_000)]
            expected = len(
                build_request(
                    messages=[{"role": "user", "content": TEXT}], images=halves, parameters=PARAMETERS, limit=2**62
                ).body
            )
            client.chat("support-en-v4", [{"role": "user", "content": TEXT}], images=halves, **PARAMETERS)
    error = refused.value
    assert (error.size, error.limit) == (expected, INVOKE_ENDPOINT_MAX_BYTES)
    assert expected > INVOKE_ENDPOINT_MAX_BYTES
    assert f"the request body is {expected} bytes" in str(error)
    assert f"at most {INVOKE_ENDPOINT_MAX_BYTES} bytes (6 MiB)" in str(error)
    assert sent == []  # and the Stubber had nothing queued: no call was made


def test_the_largest_image_body_that_fits_is_sent_and_one_more_byte_is_not(runtime, sent):
    # base64 grows in steps of 4 characters per 3 bytes: the largest image whose body fits, found
    # from the body's fixed part, is sent; 1 byte more (one more step) is refused.
    small = 3 * 10_000  # a multiple of 3 bytes is exactly 4/3 as many base64 characters
    fixed = body_size([image_of(small)]) - small // 3 * 4
    fits = 3 * ((INVOKE_ENDPOINT_MAX_BYTES - fixed) // 4)
    request = build_request(prompt=TEXT, images=[image_of(fits)], parameters=PARAMETERS)
    assert len(request.body) <= INVOKE_ENDPOINT_MAX_BYTES < body_size([image_of(fits + 1)])
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": _answer()},
        {
            "EndpointName": RECORD.endpoint_name,
            "InferenceComponentName": "support-endpoint-support-en-v4",
            "ContentType": "application/json",
            "CustomAttributes": f"route={CHAT_ROUTE}",
            "Body": request.body,
        },
    )
    client = AdapterClient.from_record(RECORD, runtime=runtime)
    assert client.invoke("support-en-v4", TEXT, images=[image_of(fits)], **PARAMETERS).text == "a table"
    with pytest.raises(PayloadTooLarge):
        client.invoke("support-en-v4", TEXT, images=[image_of(fits + 1)], **PARAMETERS)
    assert len(sent) == 1


def _answer():
    import io
    import json

    from botocore.response import StreamingBody

    raw = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a table"}}]}).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))
