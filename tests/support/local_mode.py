"""Starting and stopping the real `cdk-adapters local` command, shared by tests/local and the benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 420
"""Generous: measured 34-62 s here, but CI machines are slower and shared."""


def start_local_mode(arguments: list[str], port: int, output: Path) -> tuple[subprocess.Popen, float]:
    """``cdk-adapters local ARGUMENTS --port PORT``, its output in `output`; returns the process once
    its front answers ``/ping``, and the seconds that took."""
    started = time.monotonic()
    with open(output, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cdk_adapters.cli", "local", *arguments, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"http://127.0.0.1:{port}"
    while time.monotonic() < started + START_TIMEOUT_S:
        if process.poll() is not None:
            raise RuntimeError(f"cdk-adapters local exited with {process.returncode}:\n{output.read_text()}")
        try:
            if httpx.get(url + "/ping", timeout=2).status_code == 200:
                return process, time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    stop_local_mode(process)
    raise RuntimeError(f"cdk-adapters local did not serve within {START_TIMEOUT_S} s:\n{output.read_text()}")


def stop_local_mode(process: subprocess.Popen) -> None:
    """SIGTERM, as a user's Ctrl-C would; the command stops its adapter server itself."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
