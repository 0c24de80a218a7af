"""`cdk-adapters local` serving a vision-language manifest, called with `AdapterClient(images=...)`
and with plain boto3 ``sagemaker-runtime`` (``invoke_endpoint`` and its streaming twin).

One more local-mode start (the tiny LLaVA, about 30-60 s here) for this file, base-model access on
so the base can be compared with the adapters. The reference is transformers + PEFT on the saved
processor's output, with the parts in the order each request sends them.
"""

from __future__ import annotations

import base64
import json
import sys

import boto3
import botocore.exceptions
import pytest

from cdk_adapters.client import AdapterClient
from cdk_adapters.contract.runtime_api import INVOKE_ENDPOINT_MAX_BYTES
from cdk_adapters.local.demo_vlm import VLM_DEMO_ADAPTERS
from cdk_adapters.local.serving import free_port
from tests.local.conftest import cli
from tests.support import tiny_vlm
from tests.support.local_mode import start_local_mode, stop_local_mode
from tests.support.vlm_reference import greedy_token_ids

pytestmark = pytest.mark.vllm

TEXT = "Describe the image:"
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def vlm_local(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm-local")
    # What a user runs: the demo's base, its two adapters (language; tower + connector) and manifest.
    written = cli("demo-model", "--vision-language", str(root / "demo"))
    assert written.returncode == 0, written.stderr
    manifest, base = root / "demo" / "manifest.yaml", root / "demo" / "base"
    adapters = {name: root / "demo" / "adapters" / name for name in VLM_DEMO_ADAPTERS}
    assert list(adapters) == ["describe-v1", "describe-tower-v1"]
    port = free_port()
    process, seconds = start_local_mode(
        [
            "--manifest",
            str(manifest),
            "--base-model-dir",
            str(base),
            "--work-dir",
            str(root / "work"),
            "--max-model-len",
            "256",
            "--dtype",
            "float32",
            "--allow-base-model",
        ],
        port,
        root / "local.out",
    )
    print(f"\ncdk-adapters local (tiny LLaVA) serving after {seconds:.1f} s", file=sys.stderr)
    try:
        yield f"http://127.0.0.1:{port}", base, adapters
    finally:
        stop_local_mode(process)


def test_the_client_sends_images_and_each_adapter_answers_as_peft_computes(vlm_local, tmp_path):
    url, base, adapters = vlm_local
    client = AdapterClient.from_local(url)
    path = tmp_path / "image-2.png"
    path.write_bytes(tiny_vlm.png(2))
    answers = {}
    for name, directory in adapters.items():
        for image_name, image in (("bytes", tiny_vlm.png(1)), ("path", path)):
            raw = image if isinstance(image, bytes) else image.read_bytes()
            parameters = {"max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
            whole = client.invoke(name, TEXT, images=[image], **parameters).body["choices"][0]["token_ids"]
            streamed = [
                t
                for chunk in client.stream(name, TEXT, images=[image], **parameters)
                for choice in chunk.get("choices", [])
                for t in choice.get("token_ids") or []
            ]
            _, expected = greedy_token_ids(base, directory, raw, TEXT, NEW_TOKENS, image_first=False)
            assert whole == expected and streamed == expected, f"{name} on {image_name}: {whole} / {streamed} != {expected}"
            answers[name, image_name] = whole
    assert answers["describe-tower-v1", "bytes"] != answers["describe-tower-v1", "path"]
    assert answers["describe-v1", "bytes"] != answers["describe-tower-v1", "bytes"]


IMAGES = {"image-1": tiny_vlm.png(1), "image-2": tiny_vlm.png(2)}


@pytest.fixture(scope="module")
def runtime(vlm_local):
    """Plain boto3, as an application that never heard of cdk-adapters would build it."""
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=vlm_local[0],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def image_chat(image: bytes, *, stream: bool) -> str:
    """The body an application writes itself: an OpenAI chat, the image first, as a data URL."""
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": TEXT}]
    return json.dumps(
        {
            "messages": [{"role": "user", "content": content}],
            "max_tokens": NEW_TOKENS,
            "temperature": 0,
            "ignore_eos": True,
            "return_token_ids": True,
            "stream": stream,
        }
    )


def boto3_answer(runtime, component: str, image: bytes, *, stream: bool) -> tuple[list[int], list[int], str]:
    """``(prompt ids, new ids, text)`` of one image chat sent with plain boto3."""
    call = {
        "EndpointName": "local",
        "InferenceComponentName": component,
        "ContentType": "application/json",
        "CustomAttributes": "route=/v1/chat/completions",
        "Body": image_chat(image, stream=stream),
    }
    if not stream:
        answer = json.loads(runtime.invoke_endpoint(**call)["Body"].read())
        return answer["prompt_token_ids"], answer["choices"][0]["token_ids"], answer["choices"][0]["message"]["content"]
    raw = b"".join(event["PayloadPart"]["Bytes"] for event in runtime.invoke_endpoint_with_response_stream(**call)["Body"])
    assert raw.rstrip().endswith(b"data: [DONE]")
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    prompt = next(event["prompt_token_ids"] for event in events if event.get("prompt_token_ids"))
    choices = [choice for event in events for choice in event["choices"]]
    new = [token for choice in choices for token in choice.get("token_ids") or []]
    return prompt, new, "".join(choice["delta"].get("content") or "" for choice in choices)


def decoded(base_dir, ids: list[int]) -> str:
    """PEFT's greedy ids as text, by the saved tokenizer (special tokens skipped, as vLLM does)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_dir).decode(ids, skip_special_tokens=True)


def test_plain_boto3_image_chats_equal_peft_whole_and_streamed(vlm_local, runtime):
    _, base, adapters = vlm_local
    targets = {"base": ("local-base", None), **{name: (f"local-{name}", directory) for name, directory in adapters.items()}}
    answers, table = {}, []
    for target, (component, directory) in targets.items():
        for image_name, image in IMAGES.items():
            expected_prompt, expected = greedy_token_ids(base, directory, image, TEXT, NEW_TOKENS)
            texts = []
            for stream in (False, True):
                prompt, new, text = boto3_answer(runtime, component, image, stream=stream)
                table.append((target, image_name, "streamed" if stream else "whole", new == expected))
                assert prompt == expected_prompt, "vLLM and the saved processor built different prompts"
                assert new == expected, f"{target} on {image_name} ({'streamed' if stream else 'whole'}): {new} != {expected}"
                texts.append(text)
            # vLLM's detokenizer holds back trailing tokens that end inside a UTF-8 character (it waits
            # for the rest); a plain decode shows them as U+FFFD. Otherwise the text is the decode.
            full = decoded(base, expected)
            held_back = full[len(texts[0]) :]
            assert texts[0] == texts[1] and full.startswith(texts[0]) and set(held_back) <= {"\ufffd"}, (
                f"{target} on {image_name}: {texts} / {full!r}"
            )
            answers[target, image_name] = expected
    print("\nboto3 parity (target, image, mode, equal to PEFT):", *table, sep="\n  ", file=sys.stderr)
    for target in targets:
        assert answers[target, "image-1"] != answers[target, "image-2"], f"{target} ignores the image"
    for image_name in IMAGES:
        for name in adapters:
            assert answers[name, image_name] != answers["base", image_name], f"{name} answers as the base on {image_name}"


def test_plain_boto3_with_an_image_body_over_the_limit_gets_413_and_the_adapters_keep_serving(vlm_local, runtime):
    _, base, adapters = vlm_local
    big = IMAGES["image-1"] + bytes(4_800_000)  # 6.4 MB as a data URL
    body = image_chat(big, stream=False)
    assert len(body) > INVOKE_ENDPOINT_MAX_BYTES
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        runtime.invoke_endpoint(
            EndpointName="local",
            InferenceComponentName="local-describe-tower-v1",
            ContentType="application/json",
            CustomAttributes="route=/v1/chat/completions",
            Body=body,
        )
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert f"{INVOKE_ENDPOINT_MAX_BYTES}-byte InvokeEndpoint limit" in str(refused.value)
    for name, directory in adapters.items():
        expected = greedy_token_ids(base, directory, IMAGES["image-2"], TEXT, NEW_TOKENS)[1]
        assert boto3_answer(runtime, f"local-{name}", IMAGES["image-2"], stream=False)[1] == expected, name


def peft_text(base_dir, adapter_dir, image: bytes) -> str:
    """What vLLM answers greedily to `TEXT` and `image` sent as `AdapterClient` sends them (text
    first), by transformers + PEFT: new tokens up to the first end-of-sequence, decoded."""
    from transformers import AutoTokenizer

    ids = greedy_token_ids(base_dir, adapter_dir, image, TEXT, NEW_TOKENS, image_first=False)[1]
    eos = AutoTokenizer.from_pretrained(base_dir).eos_token_id
    if eos in ids:
        ids = ids[: ids.index(eos)]
    # vLLM's detokenizer holds back the last tokens while they end inside a UTF-8 character (see
    # above); a plain decode shows each such byte as U+FFFD.
    return decoded(base_dir, ids).rstrip("\ufffd")


def test_eval_runs_image_cases_and_only_the_adapter_whose_answers_they_hold_passes(vlm_local, tmp_path):
    import io

    from cdk_adapters.cli import main

    url, base, adapters = vlm_local
    for name, image in IMAGES.items():
        (tmp_path / f"{name}.png").write_bytes(image)
    reference = {
        target: {name: peft_text(base, directory, image) for name, image in IMAGES.items()}
        for target, directory in {"base": None, **adapters}.items()
    }
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "".join(
            json.dumps(
                {
                    "id": name,
                    "prompt": TEXT,
                    "image": f"{name}.png",
                    "max_tokens": NEW_TOKENS,
                    "expected": reference["describe-tower-v1"][name],
                }
            )
            + "\n"
            for name in IMAGES
        )
    )
    out, err = io.StringIO(), io.StringIO()
    status = main(
        ["eval", str(golden), "describe-tower-v1", "describe-v1", "base", "--local", url, "--json"], stdout=out, stderr=err
    )
    assert status == 0, err.getvalue()
    result = json.loads(out.getvalue())
    targets = result["targets"]
    print(
        "\neval on image cases (target: exact passed/asked):",
        *(f"{t}: {targets[t]['passed']['exact']}" for t in targets),
        sep="\n  ",
        file=sys.stderr,
    )
    assert targets["describe-tower-v1"]["passed"] == {"exact": [2, 2], "all": [2, 2]}
    for target in ("describe-v1", "base"):
        assert targets[target]["passed"]["exact"] == [0, 2], f"{target} answers as the tower adapter"
    for target, summary in targets.items():
        # Each target's answer to each image is its own PEFT answer: the image reached the model.
        assert [case["text"].strip() for case in summary["cases"]] == [reference[target][name].strip() for name in IMAGES], target
        assert summary["errors"] == 0 and summary["tokens"]["prompt"] > 2 * len(TEXT.split())
    assert [case["served_by"] for case in targets["describe-tower-v1"]["cases"]] == ["describe-tower-v1", "describe-tower-v1"]
    assert reference["describe-tower-v1"]["image-1"] != reference["describe-tower-v1"]["image-2"]
