"""Registrations survive an in-place restart of the server; base access is a configuration switch.

Runs last (see conftest): it restarts the shared server over the same state directory, the way
AWS's supervisor restarts a crashed vLLM inside a running container, this time with
``CDK_ADAPTERS_ALLOW_BASE_MODEL=true`` (and EMF turned off, so the plain request line is checked
without a start of its own).

The replay is slowed down for real, under the test's control: before the restart the state file is
replaced by a named pipe holding its bytes back, so start-up waits on reading it (as on a slow state
disk) until the test writes them. Meanwhile the test observes ``/ping``, a held request and the
runtime client through local mode's SageMaker front, then lets the replay go on.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from adapter_server.registrations import remove_copy
from cdk_adapters.client import AdapterClient, RetryPolicy, local_runtime_client
from cdk_adapters.contract import error_kinds, request_metrics
from cdk_adapters.local.front import RuntimeFront
from cdk_adapters.local.serving import local_record
from tests.container import boundary_matrix as boundary
from tests.container.conftest import COMPONENT_PREFIX
from tests.container.sagemaker_calls import NEW_TOKENS, PROMPT, invoke, register, token_ids, unregister
from tests.support import tiny_models as tm
from tests.support.loopback import Served

pytestmark = pytest.mark.vllm

STATE_FILE = "registrations.json"
RELEASE_TIMEOUT_S = 120


class HeldStateFile:
    """The state file as a named pipe: a reader blocks until `release` writes the bytes it held back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.content = path.read_bytes()
        path.unlink()
        os.mkfifo(path)

    def release(self) -> None:
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while True:
            try:
                pipe = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the server opened it
                break
            except OSError as error:
                if error.errno != errno.ENXIO or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        try:
            os.set_blocking(pipe, True)
            os.write(pipe, self.content)
        finally:
            os.close(pipe)

    def restore(self) -> None:
        """Put the plain file back if it is still a pipe (a failed test must not hang the next start)."""
        if self.path.is_fifo():
            self.path.unlink()
            self.path.write_bytes(self.content)


def test_a_restart_replays_every_registration_before_ping_or_requests_pass_and_base_access_follows_configuration(
    restartable_server, zoo
):
    server = restartable_server
    client = server.client
    starts_before = len(server.start_seconds)  # another restart test may have run first
    for name, kind in (("replay-a-v1", "good"), ("replay-b-v1", "good-2"), ("replay-gone-v1", "good")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    assert unregister(client, "replay-gone-v1").status_code == 200
    before = {name: token_ids(invoke(client, name)) for name in ("replay-a-v1", "replay-b-v1")}
    listed_before = client.get("/adapters").json()["adapters"]
    assert invoke(client, None).status_code == 400

    server.stop()
    state = HeldStateFile(server.state_dir / STATE_FILE)
    try:
        server.spawn(allow_base_model=True, extra_env={request_metrics.EMF_ENV: "false"})
        starting = server.first_answer("/ping")
        assert (starting.status_code, starting.json()["error"]) == (
            503,
            {
                "type": error_kinds.STARTING,
                "message": "the server is reading its persisted adapter registrations",
                "code": 503,
            },
        )
        # Local mode's front before this server, with the server's component prefix: the front
        # sends component names, as SageMaker is expected to.
        record = dataclasses.replace(
            local_record(allow_base_model=True, aliases={}),
            component_prefix=COMPONENT_PREFIX,
            base_inference_component_name=f"{COMPONENT_PREFIX}-base",
        )
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            time.sleep(seconds)

        with (
            Served(RuntimeFront(record, server.url)) as front,
            ThreadPoolExecutor(2) as pool,
            httpx.Client(base_url=server.url, timeout=120) as direct,
        ):
            runtime = AdapterClient(record, runtime=local_runtime_client(front), retry=RetryPolicy(jitter=False), sleep=sleep)
            held = pool.submit(invoke, direct, "replay-a-v1")
            retried = pool.submit(
                runtime.invoke,
                "replay-a-v1",
                PROMPT,
                max_tokens=NEW_TOKENS,
                temperature=0,
                ignore_eos=True,
                return_token_ids=True,
            )
            # A request arriving mid-replay is held for the whole wait, then refused as "starting".
            refused = held.result(timeout=RELEASE_TIMEOUT_S)
            assert (refused.status_code, refused.json()["error"]) == (
                503,
                {
                    "type": error_kinds.STARTING,
                    "code": 503,
                    "message": "the server is reading its persisted adapter registrations; try again shortly",
                },
            )
            while not sleeps and not retried.done():  # the client got the same 503 through the front
                time.sleep(0.2)
            assert server.client.get("/ping").status_code == 503  # still replaying: nothing passes yet
            state.release()
            answer = retried.result(timeout=RELEASE_TIMEOUT_S)
        # The client retried the real 503 once and then got the adapter's own answer.
        assert sleeps == [1.0]
        assert answer.body["choices"][0]["token_ids"] == before["replay-a-v1"]
        server.wait_until_healthy()
    finally:
        state.restore()
    client = server.client
    lines = server.events("cdk_adapters.request")
    assert [(line["adapter"], line["status"]) for line in lines] == [("replay-a-v1", 503)] * 2 + [("replay-a-v1", 200)]

    # Nothing was answered before the replay: the refusals came first, every adapter is back.
    assert {name: token_ids(invoke(client, name)) for name in before} == before
    assert client.get("/adapters").json()["adapters"] == listed_before
    replayed = [event["adapter"] for event in server.events("cdk_adapters.replay")]
    assert replayed == [a["name"] for a in listed_before]
    assert "replay-gone-v1" not in replayed
    assert all(event["status"] == "loaded" for event in server.events("cdk_adapters.replay"))
    assert invoke(client, "replay-gone-v1").status_code == 404

    # A retried registration after the restart is still recognised as the same adapter.
    retried_registration = register(client, "replay-a-v1", zoo.adapter("good"))
    assert (retried_registration.status_code, retried_registration.text) == (
        200,
        "Adapter replay-a-v1 registered (already registered with the same files)",
    )

    # Base access is on now: no adapter header reaches the base model, named by its pinned id.
    base = invoke(client, None)
    assert base.status_code == 200, base.text
    assert base.json()["model"] == tm.TINY_BASE_MODEL_ID
    assert base.json()["choices"][0]["token_ids"] not in before.values()
    assert server.events("cdk_adapters.request")[-1]["adapter"] is None
    # EMF off: the plain line, exactly the log fields, no metrics for CloudWatch to extract.
    last_line = [line for line in server.log_path.read_text().splitlines() if request_metrics.REQUEST_EVENT in line][-1]
    assert list(json.loads(last_line)) == list(request_metrics.LOG_FIELDS)
    assert len(server.start_seconds) == starts_before + 1  # one restart, this test's


def test_no_body_reaches_an_adapter_its_header_did_not_name_with_base_access_on(restartable_server, zoo):
    server = restartable_server
    if not server.allow_base_model:  # the test above leaves it on; restart only when run alone
        server.restart(allow_base_model=True)
    boundary.register_tenants(server, zoo)
    references = boundary.references_for(server, with_base=True)
    assert boundary.served_by(server, references) == boundary.expected_matrix(base_access=True)


def test_a_replay_serves_the_admitted_copy_whatever_happened_to_src(restartable_server, zoo, tmp_path):
    """What was admitted is what is replayed: the private copy vLLM loads, not ``src``, whose
    files change here while the server is down (a half-written re-extraction, a bad disk)."""
    server = restartable_server
    source = zoo.copy("good", tmp_path / "extracted")
    assert register(server.client, "replay-changed-v1", source).status_code == 200
    before = token_ids(invoke(server.client, "replay-changed-v1"))
    config = source / "adapter_config.json"
    config.write_text(config.read_text().replace('"lora_alpha": 16', '"lora_alpha": 32'))

    server.restart(allow_base_model=True)

    assert token_ids(invoke(server.client, "replay-changed-v1")) == before
    assert [e["status"] for e in server.events("cdk_adapters.replay") if e.get("adapter") == "replay-changed-v1"][-1] == "loaded"


def test_without_its_copy_an_adapter_whose_src_changed_is_not_replayed_silently(restartable_server, zoo, tmp_path):
    """A lost private copy falls back to ``src``, which must still hold the registered files: here it
    does not, and SageMaker sees an unhealthy container (and replaces it) instead of one that lost an adapter."""
    server = restartable_server
    source = zoo.copy("good", tmp_path / "extracted")
    assert register(server.client, "replay-lost-v1", source).status_code == 200
    config = source / "adapter_config.json"
    config.write_text(config.read_text().replace('"lora_alpha": 16', '"lora_alpha": 32'))
    server.stop()
    recorded = json.loads((server.state_dir / STATE_FILE).read_text())["adapters"]["replay-lost-v1"]
    remove_copy(Path(recorded["served_from"]))

    ping = server.restart(allow_base_model=True, expect_healthy=False)

    error = ping.json()["error"]
    assert ping.status_code == 503 and error["type"] == error_kinds.UNHEALTHY
    assert "adapter 'replay-lost-v1': src: files in" in error["message"]
    assert "changed since registration" in error["message"]
    refused = invoke(server.client, "replay-a-v1")
    assert refused.status_code == 503 and refused.json()["error"]["message"] == error["message"]
    assert server.events("cdk_adapters.replay")[-1]["status"] == "failed"
