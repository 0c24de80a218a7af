"""Registrations survive an in-place restart of the server; base access is a configuration switch.

Runs last (see conftest): it restarts the shared server over the same state directory, the way
AWS's supervisor restarts a crashed vLLM inside a running container, this time with
``CDK_ADAPTERS_ALLOW_BASE_MODEL=true`` (and EMF turned off, so the plain request line is checked
without a start of its own).
"""

from __future__ import annotations

import json

import pytest

from cdk_adapters.contract import request_metrics
from tests.container import boundary_matrix as boundary
from tests.container.sagemaker_calls import invoke, register, token_ids, unregister
from tests.support import tiny_models as tm

pytestmark = pytest.mark.vllm


def test_registrations_are_replayed_after_a_restart_and_base_access_follows_configuration(restartable_server, zoo):
    server = restartable_server
    client = server.client
    for name, kind in (("replay-a-v1", "good"), ("replay-b-v1", "good-2"), ("replay-gone-v1", "good")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    assert unregister(client, "replay-gone-v1").status_code == 200
    before = {name: token_ids(invoke(client, name)) for name in ("replay-a-v1", "replay-b-v1")}
    listed_before = client.get("/adapters").json()["adapters"]
    assert invoke(client, None).status_code == 400

    server.restart(allow_base_model=True, extra_env={request_metrics.EMF_ENV: "false"})
    client = server.client

    # /ping turned 200 only after the replay, so the very first request already finds the adapters.
    assert {name: token_ids(invoke(client, name)) for name in before} == before
    assert client.get("/adapters").json()["adapters"] == listed_before
    replayed = [event["adapter"] for event in server.events("cdk_adapters.replay")]
    assert replayed == [a["name"] for a in listed_before]
    assert "replay-gone-v1" not in replayed
    assert all(event["status"] == "loaded" for event in server.events("cdk_adapters.replay"))
    assert invoke(client, "replay-gone-v1").status_code == 404

    # A retried registration after the restart is still recognised as the same adapter.
    retried = register(client, "replay-a-v1", zoo.adapter("good"))
    assert (retried.status_code, retried.text) == (200, "Adapter replay-a-v1 registered (already registered with the same files)")

    # Base access is on now: no adapter header reaches the base model, named by its pinned id.
    base = invoke(client, None)
    assert base.status_code == 200, base.text
    assert base.json()["model"] == tm.TINY_BASE_MODEL_ID
    assert base.json()["choices"][0]["token_ids"] not in before.values()
    assert server.events("cdk_adapters.request")[-1]["adapter"] is None
    # EMF off: the plain line, exactly the log fields, no metrics for CloudWatch to extract.
    last_line = [line for line in server.log_path.read_text().splitlines() if request_metrics.REQUEST_EVENT in line][-1]
    assert list(json.loads(last_line)) == list(request_metrics.LOG_FIELDS)
    assert len(server.start_seconds) == 2


def test_no_body_reaches_an_adapter_its_header_did_not_name_with_base_access_on(restartable_server, zoo):
    server = restartable_server
    if not server.allow_base_model:  # the test above leaves it on; restart only when run alone
        server.restart(allow_base_model=True)
    boundary.register_tenants(server, zoo)
    references = boundary.references_for(server, with_base=True)
    assert boundary.served_by(server, references) == boundary.expected_matrix(base_access=True)


def test_an_adapter_whose_files_changed_is_not_replayed_silently(restartable_server, zoo, tmp_path):
    server = restartable_server
    source = zoo.copy("good", tmp_path / "extracted")
    assert register(server.client, "replay-changed-v1", source).status_code == 200
    # While the server is down, the extracted files change (a half-written re-extraction, a bad disk).
    config = source / "adapter_config.json"
    config.write_text(config.read_text().replace('"lora_alpha": 16', '"lora_alpha": 32'))

    ping = server.restart(allow_base_model=True, expect_healthy=False)

    # SageMaker sees an unhealthy container (and replaces it) instead of one that lost an adapter.
    error = ping.json()["error"]
    assert ping.status_code == 503 and error["type"] == "unhealthy"
    assert "adapter 'replay-changed-v1': src: files in" in error["message"]
    assert "changed since registration" in error["message"]
    refused = invoke(server.client, "replay-a-v1")
    assert refused.status_code == 503 and refused.json()["error"]["message"] == error["message"]
    assert server.events("cdk_adapters.replay")[-1]["status"] == "failed"
