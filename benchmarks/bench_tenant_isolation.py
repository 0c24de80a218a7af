"""A quiet tenant's latency while another floods the same engine, with fair share off and on.

One base model, two adapters, ``--max-num-seqs 4`` so the engine saturates as a GPU copy does under
a burst. The quiet adapter sends one request at a time; the noisy adapter keeps `IN_FLIGHT`
requests in flight. Three servers run the same launcher, middleware, model and flags: fair share
off, fair share without headroom (a quiet request waits for the next place to free), and the
default (one place kept for adapters with none in the engine). The phases alternate between them
in rounds, so machine noise hits all alike.

Two shapes of flood, in every round: every noisy request the quiet one's length (they start and end
together, so a place frees only when all of them end: the worst case for a one-at-a-time caller),
and lengths spread evenly over ±50% of it (as real requests differ), the same mean.

Reported per server and shape: the quiet adapter's p50/p95 alone and under the flood (and the
ratio), the noisy adapter's output tokens per second under the flood (from each answer's
``usage``), and the engine's total (both adapters). Targets: with fair share on, quiet p95 under
the flood at most 2x its p95 alone; the noisy adapter keeps at least 80% of its throughput without
fair share. Also the noisy adapter's rate in the `NOISY_ALONE_S` before the quiet one starts:
what each server gives the flood with nobody else sending, which separates what fair share itself
costs the engine from what the quiet adapter takes.

Where the quiet adapter's time under the flood goes, from the middleware's own request log (each
quiet request carries an ``X-Request-Id``): outside the middleware (the client's total minus the
middleware's latency), waiting for a place (``queue_ms``), and inside vLLM (latency minus queue
wait).

The clients stand in for callers on other machines, so they must not be slowed by the server they
measure: the flood runs in a process of its own, the servers yield the CPU to the clients
(`_timing.yield_to_clients`; at equal priority the clients were starved on two cores, the flood
reached a sixth of the engine's throughput and the quiet client's own wait was counted as the
server's), and each phase starts once both servers are quiet (`_timing.wait_until_quiet`).

    .venv/bin/python -m benchmarks.bench_tenant_isolation [--rounds N] [--quiet-requests N] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks._timing import wait_until_quiet, yield_to_clients
from benchmarks.bench_middleware_overhead import free_port, server_environment, start, stop
from cdk_adapters.contract import tenant_limits
from tests.support import tiny_models as tm

REPO_ROOT = Path(__file__).resolve().parents[1]
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
IN_FLIGHT = 16
NOISY_ALONE_S = 3.0
"""How long the flood runs on its own, measured, before the quiet adapter starts sending."""
BODY = {"prompt": "The support team", "max_tokens": 32, "temperature": 0, "ignore_eos": True}
SHAPES = {"same length": 0.0, "lengths +-50%": 0.5}  # flood shape: how far a noisy request's length strays


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


SERVERS = {  # label: the server's tenant-limit settings; the first is the baseline of "vs off"
    "fair share off": tenant_limits.environment(fair_share=False),
    "no headroom": tenant_limits.environment(engine_headroom=0),
    "fair share on": tenant_limits.environment(),  # the container's default: one place kept (headroom)
}
_request_ids = itertools.count()


async def quiet_latencies(client: httpx.AsyncClient, count: int, sent: dict[str, float] | None = None) -> list[float]:
    """`count` quiet requests one at a time; their totals by request id go into `sent`."""
    samples = []
    for _ in range(count):
        request_id = f"quiet-{next(_request_ids)}"
        started = time.perf_counter()
        answer = await client.post("/invocations", json=BODY, headers={ADAPTER_HEADER: "quiet-v1", "X-Request-Id": request_id})
        answer.raise_for_status()
        samples.append(time.perf_counter() - started)
        if sent is not None:
            sent[request_id] = samples[-1]
    return samples


def breakdown(log: Path, sent: dict[str, float]) -> dict[str, list[float]]:
    """Seconds outside the middleware, waiting for a place, and inside vLLM, per quiet request in `sent`."""
    parts: dict[str, list[float]] = {"outside": [], "queue": [], "vllm": []}
    for raw in log.read_text(errors="replace").splitlines():
        if '"request_id"' not in raw or not raw.startswith("{"):
            continue
        line = json.loads(raw)
        total = sent.get(line.get("request_id"))
        if total is None or line.get("latency_ms") is None:
            continue
        latency, queue = line["latency_ms"] / 1000, (line.get("queue_ms") or 0) / 1000
        parts["outside"].append(total - latency)
        parts["queue"].append(queue)
        parts["vllm"].append(latency - queue)
    return parts


def flooded(url: str, count: int, sent: dict[str, float], spread: float) -> tuple[list[float], float, float, float]:
    """The quiet adapter's latencies while the noisy one keeps IN_FLIGHT requests in flight, the
    output tokens per second of the noisy adapter and of both over the same window, and the noisy
    adapter's rate in the `NOISY_ALONE_S` before the quiet one starts (what the engine gives the
    flood with nobody else sending; with headroom, a place is still kept for the quiet adapter
    that was served moments before).

    The flood runs in its own process, as other tenants' clients do: on one event loop with the
    quiet client, the flood's own answers would delay the quiet one's and be counted as the server's."""
    context = multiprocessing.get_context("spawn")
    done, tokens, failed = context.Value("i", 0), context.Value("q", 0), context.Value("i", 0)
    stop_flood = context.Event()
    flood = context.Process(target=_noisy_process, args=(url, BODY, spread, done, tokens, failed, stop_flood), daemon=True)
    flood.start()
    try:
        while done.value < IN_FLIGHT:  # the flood is established (every connection answered once)
            time.sleep(0.1)
        time.sleep(0.5)
        before, started = tokens.value, time.perf_counter()
        time.sleep(NOISY_ALONE_S)
        alone_rate = (tokens.value - before) / (time.perf_counter() - started)
        before, started = tokens.value, time.perf_counter()
        latencies = asyncio.run(_quiet(url, count, sent))
        elapsed = time.perf_counter() - started
        noisy_rate = (tokens.value - before) / elapsed
    finally:
        stop_flood.set()
        flood.join(timeout=120)
    if failed.value:
        print(f"  (the flood saw {failed.value} failed noisy request(s); it kept its {IN_FLIGHT} in flight)", flush=True)
    return latencies, noisy_rate, noisy_rate + count * BODY["max_tokens"] / elapsed, alone_rate


def _noisy_process(url: str, body: dict, spread: float, done, tokens, failed, stop_flood) -> None:
    """`IN_FLIGHT` noisy requests at all times until `stop_flood`, each `body`'s length within
    ±`spread` of it; one that fails is counted and sent again, so the flood never thins out unnoticed."""

    async def flood() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=httpx.Limits(max_connections=IN_FLIGHT)) as client:

            async def noisy(seed: int) -> None:
                lengths = random.Random(seed)
                while not stop_flood.is_set():
                    length = max(1, round(body["max_tokens"] * lengths.uniform(1 - spread, 1 + spread)))
                    try:
                        answer = await client.post(
                            "/invocations", json=dict(body, max_tokens=length), headers={ADAPTER_HEADER: "noisy-v1"}
                        )
                        answer.raise_for_status()
                    except httpx.HTTPError:
                        with failed.get_lock():
                            failed.value += 1
                        continue
                    with done.get_lock():
                        done.value += 1
                    with tokens.get_lock():
                        tokens.value += answer.json()["usage"]["completion_tokens"]

            await asyncio.gather(*(noisy(seed) for seed in range(IN_FLIGHT)))

    asyncio.run(flood())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quiet-requests", type=int, default=20)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=BODY["max_tokens"],
        help="tokens per request; more makes the engine, not HTTP, the bottleneck of the tiny model",
    )
    args = parser.parse_args()
    BODY["max_tokens"] = args.max_tokens
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as scratch:
        root = Path(scratch)
        base = tm.build_base_model(root / "base")
        adapters = {
            name: tm.build_lora_adapter(base, root / name, seed=seed) for name, seed in (("quiet-v1", 1), ("noisy-v1", 2))
        }
        servers = {}
        for number, (label, limits_env) in enumerate(SERVERS.items()):
            port = free_port()
            env = server_environment(base, root / f"state-{number}", port)
            env["CDK_ADAPTERS_VLLM_MAX_NUM_SEQS"] = "4"
            env.update(limits_env)
            log = root / f"server-{number}.log"
            process = start([sys.executable, "-m", "adapter_server", "serve"], env, port, log)
            precedence = yield_to_clients(process.pid)
            for name, directory in adapters.items():
                httpx.post(
                    f"http://127.0.0.1:{port}/adapters", json={"name": name, "src": str(directory)}, timeout=120
                ).raise_for_status()
            servers[label] = (process, f"http://127.0.0.1:{port}", log)
        alone: dict[str, list[float]] = {label: [] for label in servers}
        cases = [(label, shape) for label in servers for shape in SHAPES]
        flood: dict[tuple[str, str], dict[str, list[float]]] = {
            case: {"latency": [], "noisy": [], "total": [], "noisy alone": []} for case in cases
        }
        sent: dict[tuple[str, str], dict[str, float]] = {case: {} for case in cases}
        try:
            groups = [process.pid for process, _, _ in servers.values()]  # each server is its own session's group
            for _ in range(args.rounds):
                for label, (_, url, _) in servers.items():
                    wait_until_quiet(groups)
                    alone[label] += asyncio.run(_alone(url, args.quiet_requests))
                    for shape, spread in SHAPES.items():
                        wait_until_quiet(groups)
                        latencies, noisy, total, noisy_alone = flooded(url, args.quiet_requests, sent[label, shape], spread)
                        flood[label, shape]["latency"] += latencies
                        flood[label, shape]["noisy alone"].append(noisy_alone)
                        flood[label, shape]["noisy"].append(noisy)
                        flood[label, shape]["total"].append(total)
        finally:
            for process, _, _ in servers.values():
                stop(process)
        parts = {(label, shape): breakdown(servers[label][2], sent[label, shape]) for label, shape in cases}
    print(
        f"\nquiet adapter: one request at a time; noisy adapter: {IN_FLIGHT} in flight; --max-num-seqs 4; {args.max_tokens} tokens "
        f"per quiet request (the noisy ones' mean); {args.rounds} round(s) x {args.quiet_requests} quiet requests; "
        f"clients first ({precedence})"
    )
    print(
        f"  {'flood':<14} {'server':<15} {'alone p50':>9} {'alone p95':>9} {'flood p50':>9} {'flood p95':>9} {'p95 ratio':>9} "
        f"{'noisy tok/s':>11} {'vs off':>6} {'both tok/s':>10}"
    )
    for shape in SHAPES:
        off_rate = statistics.median(flood[next(iter(servers)), shape]["noisy"])
        for label in servers:
            found = flood[label, shape]
            alone50, alone95 = p(alone[label], 0.5), p(alone[label], 0.95)
            flood50, flood95 = p(found["latency"], 0.5), p(found["latency"], 0.95)
            noisy = statistics.median(found["noisy"])
            print(
                f"  {shape:<14} {label:<15} {alone50:>8.3f}s {alone95:>8.3f}s {flood50:>8.3f}s {flood95:>8.3f}s "
                f"{flood95 / alone95:>8.2f}x {noisy:>11.0f} {noisy / off_rate:>6.0%} {statistics.median(found['total']):>10.0f}"
            )
    print(
        f"\nthe noisy adapter alone: its output tokens per second in the {NOISY_ALONE_S:g} s before the quiet one starts "
        "(the quiet adapter was served moments before, so the default keeps its place)"
    )
    print(f"  {'flood':<14} {'server':<15} {'tok/s':>7} {'vs off':>6}")
    for shape in SHAPES:
        off_alone = statistics.median(flood[next(iter(servers)), shape]["noisy alone"])
        for label in servers:
            rate = statistics.median(flood[label, shape]["noisy alone"])
            print(f"  {shape:<14} {label:<15} {rate:>7.0f} {rate / off_alone:>6.0%}")
    print("\nwhere the quiet adapter's time goes under the flood (p50 / p95 of each part, seconds)")
    print(f"  {'flood':<14} {'server':<15} {'outside middleware':>20} {'waiting for a place':>20} {'inside vLLM':>20}")
    for (label, shape), found in parts.items():
        cells = [
            f"{p(found[part], 0.5):.3f} / {p(found[part], 0.95):.3f}" if found[part] else "-"
            for part in ("outside", "queue", "vllm")
        ]
        print(f"  {shape:<14} {label:<15} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20}")
    return 0


async def _alone(url: str, count: int) -> list[float]:
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=httpx.Limits(max_connections=IN_FLIGHT + 4)) as client:
        await quiet_latencies(client, 2)  # wake the server that was idle
        return await quiet_latencies(client, count)


async def _quiet(url: str, count: int, sent: dict[str, float]) -> list[float]:
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        return await quiet_latencies(client, count, sent)


if __name__ == "__main__":
    raise SystemExit(main())
