"""Registration edge cases SageMaker can produce: retries, re-creation, odd `src` values, engine refusals."""

from __future__ import annotations

import asyncio
import shutil
import tarfile
from pathlib import Path

import httpx
import pytest

from adapter_server.registrations import STATE_FILE_NAME
from tests.container.sagemaker_calls import (
    ADAPTER_HEADER,
    LONG_PROMPT,
    completion_body,
    invoke,
    register,
    token_ids,
    unregister,
)

pytestmark = pytest.mark.vllm


def _listed(client: httpx.Client) -> set[str]:
    return {a["name"] for a in client.get("/adapters").json()["adapters"]}


def test_a_retry_after_a_failed_persist_loads_the_adapter_for_real(served, zoo):
    client = served.client
    assert register(client, "persist-before-v1", zoo.adapter("good-2")).status_code == 200
    state_file = served.state_dir / STATE_FILE_NAME
    saved = state_file.with_name("saved-" + STATE_FILE_NAME)
    state_file.rename(saved)
    state_file.mkdir()  # the rename onto it fails: persisting is impossible, as on a full or broken disk
    try:
        failed = register(client, "persist-v1", zoo.adapter("good"))
    finally:
        state_file.rmdir()
        saved.rename(state_file)
    assert failed.status_code == 500, failed.text
    assert failed.json()["error"]["type"] == "state_error" and "cannot persist" in failed.json()["error"]["message"]
    # Nothing half-done stays behind: not listed, not served, not in the file.
    assert "persist-v1" not in _listed(client)
    assert invoke(client, "persist-v1").status_code == 404
    assert "persist-v1" not in state_file.read_text()

    # SageMaker retries: a real registration (not "already registered"), and vLLM really loaded it.
    retried = register(client, "persist-v1", zoo.adapter("good"))
    assert (retried.status_code, retried.text) == (200, "Adapter persist-v1 registered")
    assert len(token_ids(invoke(client, "persist-v1"))) > 0
    assert "persist-v1" in state_file.read_text() and "persist-before-v1" in state_file.read_text()


def test_a_retry_racing_the_first_registration_gets_200_too(served, zoo):
    async def twice():
        async with httpx.AsyncClient(base_url=served.url, timeout=120) as session:
            body = {"name": "racing-v1", "src": str(zoo.adapter("good"))}
            return await asyncio.gather(session.post("/adapters", json=body), session.post("/adapters", json=body))

    answers = asyncio.run(twice())
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert sorted(a.text for a in answers) == [
        "Adapter racing-v1 registered",
        "Adapter racing-v1 registered (already registered with the same files)",
    ]
    assert len(token_ids(invoke(served.client, "racing-v1"))) > 0


def test_a_deleted_name_registered_again_from_the_same_path_serves_the_new_files(served, zoo, tmp_path):
    client = served.client
    # SageMaker may extract a re-created inference component's archive to the same directory.
    extracted = zoo.copy("good", tmp_path / "extracted")
    assert register(client, "recreated-v1", extracted).status_code == 200
    assert register(client, "recreated-ref-v1", zoo.adapter("good-2")).status_code == 200
    long_body = completion_body(prompt=LONG_PROMPT)
    old_short, old_long = token_ids(invoke(client, "recreated-v1")), token_ids(invoke(client, "recreated-v1", long_body))
    assert len(invoke(client, "recreated-v1", long_body).json()["choices"][0]["prompt_token_ids"]) > 128

    assert unregister(client, "recreated-v1").status_code == 200
    shutil.rmtree(extracted)
    shutil.copytree(zoo.adapter("good-2"), extracted)
    again = register(client, "recreated-v1", extracted)
    assert (again.status_code, again.text) == (200, "Adapter recreated-v1 registered")

    # The new weights, also for a prompt whose KV blocks vLLM's prefix cache kept from the old ones.
    assert token_ids(invoke(client, "recreated-v1")) == token_ids(invoke(client, "recreated-ref-v1")) != old_short
    assert token_ids(invoke(client, "recreated-v1", long_body)) == token_ids(invoke(client, "recreated-ref-v1", long_body))
    assert token_ids(invoke(client, "recreated-v1", long_body)) != old_long


def test_src_must_be_the_extracted_directory(served, zoo, tmp_path):
    archive = tmp_path / "adapter.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(zoo.adapter("good"), arcname=".")
    cases = {
        "src-archive-v1": (str(archive), "is a file, not a directory"),
        "src-file-v1": (str(zoo.adapter("good") / "adapter_config.json"), "is a file, not a directory"),
        "src-relative-v1": ("adapters/tenant", "must be an absolute path"),
        "src-missing-v1": (str(tmp_path / "never-extracted"), "does not exist"),
    }
    for name, (src, words) in cases.items():
        response = served.client.post("/adapters", json={"name": name, "src": src})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["adapter"] == name and [(p["field"], words in p["message"]) for p in error["problems"]] == [("src", True)], (
            error
        )
        assert src in error["message"]
    assert not set(cases) & _listed(served.client)


def _truncated_weights(good: Path, dest: Path) -> Path:
    """Header intact (the gate reads only the header), tensor data cut short: vLLM fails to load it."""
    copy = Path(shutil.copytree(good, dest))
    weights = copy / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-256])
    return copy


def test_an_adapter_vllm_cannot_load_is_refused_and_others_keep_serving(served, zoo, tmp_path):
    client = served.client
    assert register(client, "steady-load-v1", zoo.adapter("good")).status_code == 200
    expected = token_ids(invoke(client, "steady-load-v1"))
    broken = _truncated_weights(zoo.adapter("good-2"), tmp_path / "truncated")

    async def storm():
        async with httpx.AsyncClient(base_url=served.url, timeout=120) as session:
            invocations = [
                session.post("/invocations", json=completion_body(), headers={ADAPTER_HEADER: "steady-load-v1"}) for _ in range(4)
            ]
            registration = session.post("/adapters", json={"name": "truncated-v1", "src": str(broken)})
            answers = await asyncio.gather(registration, *invocations)
            return answers[0], answers[1:]

    refused, served_answers = asyncio.run(storm())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "adapter_load_failed" and error["adapter"] == "truncated-v1"
    assert "vLLM could not load adapter 'truncated-v1'" in error["message"]
    assert all(r.status_code == 200 and r.json()["choices"][0]["token_ids"] == expected for r in served_answers)

    # Not persisted, not served; the server stays healthy and the name is free for fixed files.
    assert "truncated-v1" not in _listed(client)
    assert "truncated-v1" not in (served.state_dir / STATE_FILE_NAME).read_text()
    assert invoke(client, "truncated-v1").status_code == 404
    assert client.get("/ping").status_code == 200
    fixed = register(client, "truncated-v1", zoo.adapter("good-2"))
    assert (fixed.status_code, fixed.text) == (200, "Adapter truncated-v1 registered")
    assert token_ids(invoke(client, "truncated-v1")) != expected
