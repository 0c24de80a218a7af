"""Local mode's doors without vLLM: the front refuses an oversized body before holding it (from its
stated length, or while reading a chunked one), and the adapter server behind it listens on
loopback only. Real uvicorn servers on loopback, real HTTP."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import pytest

from adapter_server.launch import resolve_launch
from cdk_adapters.contract.runtime_api import COMPONENT_HEADER, INVOKE_ENDPOINT_MAX_BYTES
from cdk_adapters.local.front import RuntimeFront
from cdk_adapters.local.serving import AdapterServer, LocalSettings, local_record
from tests.local.test_front_failures import Served


class Backend:
    """Counts the calls that get through the front (none should, here)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
def front():
    backend = Backend()
    record = local_record(allow_base_model=False, aliases={})
    with Served(backend) as backend_url, Served(RuntimeFront(record, backend_url)) as url:
        yield url.removeprefix("http://"), backend


def _post(address: str, headers: dict[str, str], chunks) -> tuple[int, dict]:
    host, port = address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.putrequest("POST", "/endpoints/local/invocations")
        for name, value in {COMPONENT_HEADER: "local-a-v1", "content-type": "application/json", **headers}.items():
            connection.putheader(name, value)
        connection.endheaders()
        try:
            for chunk in chunks:
                connection.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the front answered and closed before the body was all sent: the point
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def test_a_stated_length_over_the_limit_is_refused_before_the_body_is_read(front):
    address, backend = front
    status, body = _post(address, {"content-length": str(INVOKE_ENDPOINT_MAX_BYTES + 1)}, [b"{}"])
    assert status == 413
    assert body["message"] == (
        f"Request payload of {INVOKE_ENDPOINT_MAX_BYTES + 1} bytes exceeds the "
        f"{INVOKE_ENDPOINT_MAX_BYTES}-byte InvokeEndpoint limit."
    )
    assert backend.calls == 0


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(front):
    address, backend = front
    piece = b"x" * (1024 * 1024)

    def chunked():
        for _ in range(8):  # 8 MiB in all, over the 6 MiB limit; no length stated
            yield b"%x\r\n%s\r\n" % (len(piece), piece)
        yield b"0\r\n\r\n"

    status, body = _post(address, {"transfer-encoding": "chunked"}, chunked())
    assert status == 413
    assert body["message"] == (
        f"Request payload of more than {INVOKE_ENDPOINT_MAX_BYTES} bytes exceeds the "
        f"{INVOKE_ENDPOINT_MAX_BYTES}-byte InvokeEndpoint limit."
    )
    assert backend.calls == 0


def test_a_body_at_the_limit_still_goes_through(front):
    address, backend = front
    body = b" " * (INVOKE_ENDPOINT_MAX_BYTES - 2) + b"{}"
    status, _ = _post(address, {"content-length": str(len(body))}, [body])
    assert status == 200 and backend.calls == 1


def test_the_adapter_server_listens_on_loopback_only(tmp_path, monkeypatch):
    """Whatever the user's environment says, the container's server gets --host 127.0.0.1; only
    the front (which `local --host` configures) faces callers."""
    monkeypatch.setenv("SM_VLLM_HOST", "0.0.0.0")
    monkeypatch.setenv("CDK_ADAPTERS_LISTEN_HOST", "0.0.0.0")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    server = AdapterServer(LocalSettings(base_model_dir=model, base_model_id="x/y", base_model_revision=None, work_dir=tmp_path))
    environment = server.environment()
    assert environment["CDK_ADAPTERS_LISTEN_HOST"] == "127.0.0.1" and "SM_VLLM_HOST" not in environment
    (tmp_path / "state").mkdir()
    command = list(resolve_launch(environment, no_custom_code_dir=None, model_dir=Path(os.devnull)).command)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--port") + 1] == str(server.port)
    assert server.url == f"http://127.0.0.1:{server.port}"


def test_a_manifest_admitting_vision_modules_serves_them_with_tower_lora(tmp_path):
    """Local mode admits tower/connector adapters exactly when the manifest does, and then runs vLLM
    with --enable-tower-connector-lora, as the construct renders it for an endpoint."""
    model = tmp_path / "model"
    model.mkdir()
    (tmp_path / "state").mkdir()
    for allow in (False, True):
        server = AdapterServer(
            LocalSettings(
                base_model_dir=model, base_model_id="x/y", base_model_revision=None, work_dir=tmp_path, allow_vision_modules=allow
            )
        )
        environment = server.environment()
        assert environment["CDK_ADAPTERS_ALLOW_VISION_MODULES"] == ("true" if allow else "false")
        command = list(resolve_launch(environment, no_custom_code_dir=None, model_dir=Path(os.devnull)).command)
        assert ("--enable-tower-connector-lora" in command) is allow
