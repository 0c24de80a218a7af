"""Bad adapters are turned away at registration, with a reason, while good tenants keep being served."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest

from cdk_adapters.gate import RULES
from tests.container.sagemaker_calls import ADAPTER_HEADER, completion_body, invoke, register, token_ids

pytestmark = pytest.mark.vllm


def _without_lora_tensors(good: Path, dest: Path) -> Path:
    import torch
    from safetensors.torch import save_file

    copy = Path(shutil.copytree(good, dest))
    save_file({"base_model.model.model.norm.weight": torch.ones(64)}, copy / "adapter_model.safetensors")
    return copy


def _without_weights(good: Path, dest: Path) -> Path:
    copy = Path(shutil.copytree(good, dest))
    (copy / "adapter_model.safetensors").unlink()
    return copy


def test_bad_adapters_get_4xx_naming_the_problem_while_good_adapters_keep_serving(served, zoo, tmp_path):
    client = served.client
    good = {"steady-a-v1": "good", "steady-b-v1": "good-2"}
    for name, kind in good.items():
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    expected = {name: token_ids(invoke(client, name)) for name in good}

    bad = {
        "bad-rank-v1": (zoo.adapter("rank-32"), "r", "rank 32 exceeds max_lora_rank 16"),
        "bad-dora-v1": (zoo.adapter("dora"), "use_dora", "DoRA"),
        "bad-save-v1": (zoo.adapter("modules-to-save"), "modules_to_save", "modules_to_save"),
        "bad-base-v1": (zoo.adapter("other-base"), "base_model_name_or_path", "someone-else/other-model"),
        "bad-empty-v1": (
            _without_lora_tensors(zoo.adapter("good"), tmp_path / "empty"),
            "adapter_model.safetensors",
            "no LoRA tensors",
        ),
        "bad-missing-v1": (
            _without_weights(zoo.adapter("good"), tmp_path / "missing"),
            "adapter_model.safetensors",
            "is missing",
        ),
        "bad-nowhere-v1": (tmp_path / "not-extracted", "src", "does not exist"),
    }

    async def storm():
        async with httpx.AsyncClient(base_url=served.url, timeout=120) as session:
            invocations = [
                session.post("/invocations", json=completion_body(), headers={ADAPTER_HEADER: name})
                for _ in range(3)
                for name in good
            ]
            registrations = [session.post("/adapters", json={"name": name, "src": str(src)}) for name, (src, _, _) in bad.items()]
            # One gather: registrations and invocations are in flight at the same time.
            answers = await asyncio.gather(*invocations, *registrations)
            return answers[: len(invocations)], answers[len(invocations) :]

    served_answers, refusals = asyncio.run(storm())

    for response in served_answers:
        name = response.request.headers[ADAPTER_HEADER]
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["token_ids"] == expected[name]
    for (name, (_, field, words)), response in zip(bad.items(), refusals):
        assert response.status_code == 422, f"{name}: {response.status_code} {response.text}"
        error = response.json()["error"]
        assert error["type"] == "adapter_rejected" and error["adapter"] == name
        assert field in [p["field"] for p in error["problems"]], error
        gate_rules = [p["rule"] for p in error["problems"] if p["field"] != "src"]
        assert all(rule in RULES for rule in gate_rules), error  # each gate problem names its rule's id
        assert name != "bad-rank-v1" or gate_rules == ["rank-limit"], error
        assert words in error["message"], error["message"]
        assert invoke(client, name).status_code == 404

    listed = {a["name"] for a in client.get("/adapters").json()["adapters"]}
    assert set(good) <= listed and not (set(bad) & listed)
