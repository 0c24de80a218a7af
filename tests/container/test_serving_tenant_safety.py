"""One tenant cannot hurt another behind the door, on the real server: a request costs the
sequences it puts into the engine, what cannot be served is refused before its body is read, and
what is served cannot change after registration. State is asserted (gauges, answers), never time."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time

import httpx
import pytest

from cdk_adapters.contract import error_kinds
from tests.container.sagemaker_calls import ADAPTER_HEADER, completion_body, invoke, register
from tests.support.held_places import CHAT_PATH, HELD_STREAM, Call, release, wait_for

pytestmark = pytest.mark.vllm


def test_a_request_holds_one_place_per_sequence_it_asks_for(served, zoo):
    """The engine runs 4 sequences at once: a stream with ``n`` 3 holds 3 places, so another
    tenant's ``n`` 2 waits for them while a third tenant's single request still enters at once."""
    client = served.client
    for name, kind in (("fan-out-v1", "good"), ("fan-wait-v1", "good-2"), ("fan-quiet-v1", "good")):
        assert register(client, name, zoo.adapter(kind)).status_code == 200
    calls = [Call(served, "fan-out-v1", {**HELD_STREAM, "n": 3}, path=CHAT_PATH, slow_reader=True)]
    try:
        wait_for(client, "n=3 holds three places", lambda s: s.of("fan-out-v1") == (3, 0))
        calls.append(Call(served, "fan-wait-v1", {**HELD_STREAM, "n": 2}, path=CHAT_PATH, slow_reader=True))
        wait_for(client, "n=2 waits beside one free place", lambda s: s.of("fan-wait-v1") == (0, 1))
        calls.append(Call(served, "fan-quiet-v1", HELD_STREAM, path=CHAT_PATH, slow_reader=True))
        now = wait_for(client, "the single request takes the last place", lambda s: s.of("fan-quiet-v1") == (1, 0))
        assert now.of("fan-out-v1") == (3, 0) and now.of("fan-wait-v1") == (0, 1)
    finally:
        release(client, calls, ("fan-out-v1", "fan-wait-v1", "fan-quiet-v1"))


def _answer_to_partial_body(server, path: str, headers: dict[str, str], declared: int) -> tuple[int, dict]:
    """Send the head of a request declaring `declared` body bytes and only 1 KiB of them, then read
    the answer: a server that reads (or parses) the body first has nothing to answer yet."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    try:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {declared}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode("latin-1") + b'{"prompt": "hi", "pad": [' + b"{}," * 340)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    finally:
        sock.close()
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1])


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_what_cannot_be_served_is_refused_before_its_body_arrives(served):
    status, document = _answer_to_partial_body(served, "/invocations", {ADAPTER_HEADER: "no-such-v1"}, 6_000_000)
    assert (status, document["error"]["type"]) == (404, error_kinds.ADAPTER_NOT_FOUND)
    status, document = _answer_to_partial_body(served, "/invocations", {}, 6_000_000)
    assert (status, document["error"]["type"]) == (400, error_kinds.ADAPTER_REQUIRED)


def test_a_body_of_a_million_objects_is_refused_by_count(served, zoo):
    assert register(served.client, "storm-v1", zoo.adapter("good")).status_code == 200
    body = b'{"prompt": "hi", "max_tokens": 2, "pad": [' + b"{}," * 1_000_000 + b"{}]}"
    answer = served.client.post(
        "/invocations", content=body, headers={ADAPTER_HEADER: "storm-v1", "content-type": "application/json"}
    )
    assert (answer.status_code, answer.json()["error"]["type"]) == (400, error_kinds.INVALID_JSON)
    assert "1000003 '{' and '[' characters; at most 100000" in answer.json()["error"]["message"]
    assert invoke(served.client, "storm-v1").status_code == 200  # the tenant itself still serves


def test_files_changed_after_registration_never_change_what_is_served(served, zoo, tmp_path):
    """vLLM reads an adapter again whenever it leaves its GPU and CPU caches: it must read the
    private copy the gate passed, not ``src``, which is rewritten here with another adapter's weights."""
    client = served.client
    src = shutil.copytree(zoo.adapter("good"), tmp_path / "extracted")
    assert register(client, "mutable-v1", src).status_code == 200
    sha = {e["name"]: e["sha256"] for e in client.get("/adapters").json()["adapters"]}["mutable-v1"]
    before = invoke(client, "mutable-v1").json()["choices"][0]["token_ids"]
    other = zoo.adapter("good-2") / "adapter_model.safetensors"
    (src / "adapter_model.safetensors").write_bytes(other.read_bytes())  # in place: same inode, new bytes
    for index in range(5):  # more than --max-cpu-loras 4 other adapters: mutable-v1 leaves both caches
        assert register(client, f"evict-{index}-v1", zoo.adapter("good-2")).status_code == 200
        assert invoke(client, f"evict-{index}-v1").status_code == 200
    after = invoke(client, "mutable-v1").json()["choices"][0]["token_ids"]
    assert after == before
    assert {e["name"]: e["sha256"] for e in client.get("/adapters").json()["adapters"]}["mutable-v1"] == sha


def test_a_directory_with_a_huge_extra_file_is_refused_and_never_copied(served, zoo, tmp_path):
    """Bounded like an archive: an 8 GiB extra file (sparse: it costs no disk) is a 422 by the
    size bound from its listed size, before a byte of it is read or copied."""
    client = served.client
    src = shutil.copytree(zoo.adapter("good"), tmp_path / "extracted")
    with open(src / "optimizer.pt", "wb") as extra:
        extra.truncate(8 * 1024**3)
    assert register(client, "before-oversized-v1", zoo.adapter("good")).status_code == 200
    before = client.get("/adapters").json()["adapters"]
    copies = sorted(path.name for path in (served.state_dir / "served").iterdir())
    refused = register(client, "oversized-v1", src)
    assert refused.status_code == 422, refused.text
    assert "size-bound" in {problem["rule"] for problem in refused.json()["error"]["problems"]}
    assert client.get("/adapters").json()["adapters"] == before
    assert sorted(path.name for path in (served.state_dir / "served").iterdir()) == copies  # nothing copied


def test_a_tenant_repeating_refused_requests_gets_them_at_a_bounded_pace_and_holds_no_one_else(served, zoo):
    """25 requests at once that are refused (``n`` over the adapter's ``max_n``): the first 10 are
    answered at once, the other 15 leave at 5 a second, and while they are held another tenant's
    refusal and ``/ping`` are answered. Every request still gets its 400; none is lost. Only lower
    bounds and orderings of time are asserted: a slower machine can only make them truer."""
    client = served.client
    for name in ("pace-loud-v1", "pace-quiet-v1"):
        assert register(client, name, zoo.adapter("good")).status_code == 200
    refused_body = {**completion_body(), "n": 99}
    finished: list[tuple[str, int, str, float]] = []

    def call(adapter: str) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", timeout=60) as own:
            answer = own.post("/invocations", json=refused_body, headers={ADAPTER_HEADER: adapter})
        finished.append((adapter, answer.status_code, answer.json()["error"]["type"], time.monotonic()))

    loud = [threading.Thread(target=call, args=("pace-loud-v1",)) for _ in range(25)]
    for thread in loud:
        thread.start()
    deadline = time.monotonic() + 30
    while len(finished) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    call("pace-quiet-v1")
    ping = client.get("/ping")
    pinged = time.monotonic()
    for thread in loud:
        thread.join(60)
    assert ping.status_code == 200
    assert {(adapter, status, kind) for adapter, status, kind, _ in finished} == {
        ("pace-loud-v1", 400, error_kinds.TOO_MANY_SEQUENCES),
        ("pace-quiet-v1", 400, error_kinds.TOO_MANY_SEQUENCES),
    }
    loud_times = sorted(when for adapter, *_, when in finished if adapter == "pace-loud-v1")
    (quiet_time,) = [when for adapter, *_, when in finished if adapter == "pace-quiet-v1"]
    assert len(loud_times) == 25
    assert loud_times[-1] - loud_times[0] >= 1.5, "15 held refusals leave at 5 a second: about 3 s"
    assert quiet_time < loud_times[-1] and pinged < loud_times[-1], "answered while the loud tenant's were held"
