"""What our SageMaker middleware adds to an invocation, next to stock vLLM serving the same request.

Two servers run side by side on loopback with the same tiny model, adapter and flags: one launched
by our launcher (with the middleware: gate, adapter guard, route handling, request log, metrics),
one the same command without ``--middleware``. Requests go in alternating blocks, so both see the
same machine load. Each block starts once both servers are quiet (vLLM's engine keeps polling a
core for a second after its last request, which slowed the next block on 2 cores: ours measured
2.2x stock's latency with the servers yielding to the client and no wait), and its first request is
not counted (the server that was idle wakes up on it). Both get ``POST /invocations`` with SageMaker's adapter header; stock vLLM maps
that header to the adapter through AWS's standards library.

The two paths compared, ours and stock ``/invocations``, each run right after a block on the
other server (the order is stock ``/v1/completions``, ours, stock ``/invocations``), so both pay
the same switch between servers; only the reference row follows its own server. (With stock
``/invocations`` right after stock ``/v1/completions``, it ran warm while ours always ran after a
switch.) The last row runs stock ``/invocations`` again right after itself, so the table also
shows what that switch costs.

The second table is throughput with `IN_FLIGHT` requests in flight at once, as a copy serving
several callers sees them: one burst per path per round in the same order, each once both
servers are quiet, median requests per second. Both servers yield the CPU to the benchmark's
client, which stands in for callers on other machines (see the README).

    .venv/bin/python -m benchmarks.bench_middleware_overhead [--rounds N] [--block N] [--burst N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from adapter_server import launch  # container/ is on sys.path: see benchmarks/__init__.py
from benchmarks._timing import interleaved_medians, print_table, wait_until_quiet, yield_to_clients
from cdk_adapters.contract import serving_env
from tests.support import tiny_models as tm

REPO_ROOT = Path(__file__).resolve().parents[1]

ADAPTER = "bench-v1"
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
IN_FLIGHT = 8
WARM_STOCK_ROW = "  same, again right after itself (no switch)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_environment(model_dir: Path, state_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_ADAPTERS_", "SM_VLLM_"))}
    flags = {
        "MODEL": str(model_dir),
        "MAX_LORAS": "2",
        "MAX_LORA_RANK": "16",
        "MAX_CPU_LORAS": "4",
        "MAX_MODEL_LEN": "256",
        "DTYPE": "float32",
    }
    env.update({serving_env.VLLM_FLAG_PREFIX + key: value for key, value in flags.items()})
    env.update(
        {
            serving_env.BASE_MODEL_ID: tm.TINY_BASE_MODEL_ID,
            serving_env.STATE_DIR: str(state_dir),
            "CDK_ADAPTERS_LISTEN_HOST": "127.0.0.1",
            "CDK_ADAPTERS_LISTEN_PORT": str(port),
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "container")]),
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
        }
    )
    return env


def start(command: list[str], env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise RuntimeError(f"server did not become healthy: {log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


PROMPT = {"prompt": "The support team", "max_tokens": 16, "temperature": 0}


def invoke(client: httpx.Client) -> str:
    """SageMaker's way: /invocations with the adapter named in a header."""
    response = client.post("/invocations", json=PROMPT, headers={ADAPTER_HEADER: ADAPTER})
    response.raise_for_status()
    return response.json()["choices"][0]["text"]


def complete(client: httpx.Client) -> str:
    """vLLM's own OpenAI route, the adapter named in the body: no SageMaker layer at all."""
    response = client.post("/v1/completions", json={**PROMPT, "model": ADAPTER})
    response.raise_for_status()
    return response.json()["choices"][0]["text"]


async def _burst(base_url: str, path: str, body: dict, headers: dict, requests: int) -> float:
    """Requests per second for `requests` calls with `IN_FLIGHT` of them in flight at once."""
    remaining = IN_FLIGHT  # first, one request per connection: opens them and wakes an idle server

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            response = await client.post(path, json=body, headers=headers)
            response.raise_for_status()

    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(IN_FLIGHT)))
        remaining = requests
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(IN_FLIGHT)))
        return requests / (time.perf_counter() - started)


def interleaved_throughput(candidates: dict[str, tuple], *, rounds: int, burst: int, servers: list[int]) -> dict[str, float]:
    """Median requests per second per candidate; each round runs one burst of each, in turn, each
    once the `servers` (process groups) are quiet."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, (base_url, path, body, headers) in candidates.items():
            wait_until_quiet(servers)
            samples[name].append(asyncio.run(_burst(base_url, path, body, headers, burst)))
    return {name: statistics.median(values) for name, values in samples.items()}


def print_throughput_table(title: str, medians: dict[str, float], *, baseline: str) -> None:
    """Requests per second per candidate and the baseline's throughput over it (>1: slower than baseline)."""
    print(f"\n{title}")
    print(f"  {'candidate':<44} {'req/s':>10} {'ratio':>8}")
    for name, rate in medians.items():
        print(f"  {name:<44} {rate:>10.1f} {medians[baseline] / rate:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--burst", type=int, default=48, help=f"requests per concurrent burst ({IN_FLIGHT} in flight)")
    args = parser.parse_args()
    processes: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        base = tm.build_base_model(root / "base")
        adapter = tm.build_lora_adapter(base, root / ADAPTER, seed=1)
        ours_port, stock_port = free_port(), free_port()
        ours_env = server_environment(base, root / "state", ours_port)
        plan = launch.resolve_launch(ours_env)
        command = list(plan.command)
        at = command.index("--middleware")
        stock_command = command[:at] + command[at + 2 :]
        stock_command[stock_command.index("--port") + 1] = str(stock_port)
        try:
            processes.append(start(command, dict(plan.environment), ours_port, root / "ours.log"))
            processes.append(start(stock_command, dict(plan.environment), stock_port, root / "stock.log"))
            precedence = next(yield_to_clients(process.pid) for process in processes)
            ours = httpx.Client(base_url=f"http://127.0.0.1:{ours_port}", timeout=60)
            stock = httpx.Client(base_url=f"http://127.0.0.1:{stock_port}", timeout=60)
            ours.post("/adapters", json={"name": ADAPTER, "src": str(adapter)}).raise_for_status()
            stock.post("/v1/load_lora_adapter", json={"lora_name": ADAPTER, "lora_path": str(adapter)}).raise_for_status()
            # Warm both (first use loads the adapter) and check all three paths give the adapter's answer.
            answers = {invoke(ours), invoke(stock), complete(stock)}
            assert len(answers) == 1, f"the three paths disagree: {answers}"
            medians = interleaved_medians(
                {  # this order: ours and stock /invocations both follow the other server (module docstring)
                    "stock vLLM /v1/completions (no SageMaker layer)": lambda: complete(stock),
                    "ours /invocations (our middleware)": lambda: invoke(ours),
                    "stock vLLM /invocations (standards library)": lambda: invoke(stock),
                    WARM_STOCK_ROW: lambda: invoke(stock),  # right after itself: what a switch costs
                },
                rounds=args.rounds,
                block=args.block,
                discard_first=True,
                before_block=lambda: wait_until_quiet([process.pid for process in processes]),
            )
            print(
                f"{args.rounds} rounds x {args.block} greedy requests of 16 tokens per path, "
                "tiny Llama on vllm-cpu, in alternating blocks"
            )
            print_table(
                "invocation latency: our middleware next to stock vLLM",
                medians,
                baseline="stock vLLM /invocations (standards library)",
            )
            ours_url, stock_url = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{stock_port}"
            header = {ADAPTER_HEADER: ADAPTER}
            rates = interleaved_throughput(
                {
                    "stock vLLM /v1/completions (no SageMaker layer)": (
                        stock_url,
                        "/v1/completions",
                        {**PROMPT, "model": ADAPTER},
                        {},
                    ),
                    "ours /invocations (our middleware)": (ours_url, "/invocations", PROMPT, header),
                    "stock vLLM /invocations (standards library)": (stock_url, "/invocations", PROMPT, header),
                },
                rounds=args.rounds,
                burst=args.burst,
                servers=[process.pid for process in processes],
            )
            print(
                f"\n{args.rounds} rounds x one burst of {args.burst} requests per path, {IN_FLIGHT} in flight; "
                f"each burst once both servers are quiet; clients first ({precedence})"
            )
            print_throughput_table(
                f"throughput with {IN_FLIGHT} requests in flight (ratio: stock's req/s over this path's)",
                rates,
                baseline="stock vLLM /invocations (standards library)",
            )
        finally:
            for process in processes:
                stop(process)


if __name__ == "__main__":
    main()
