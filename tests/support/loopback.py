"""An ASGI app served by uvicorn on a loopback port, in a thread, for the length of a test."""

from __future__ import annotations

import threading
import time

import uvicorn

from cdk_adapters.local.serving import free_port


class Served:
    """``with Served(app) as url:`` serves `app` at `url` inside the block."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *_) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
