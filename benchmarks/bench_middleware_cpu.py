"""The middleware's own work per request, without vLLM: the real `SageMakerAdapterMiddleware` in front
of an app that answers at once (where vLLM's routes stand), next to that app alone, side by side.

Both run in this process on one event loop, so wall time is CPU time; the difference per request
is what the middleware adds: header resolution, body read and bounds scan, JSON parse and rewrite,
admission, the request log line with its EMF document (written to /dev/null here, to a pipe on an
endpoint) and the Prometheus counters. Fair share is on, as on an endpoint. The README's "middleware
CPU per request" figure is this benchmark's.

    .venv/bin/python -m benchmarks.bench_middleware_cpu [--rounds N] [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys

from adapter_server.admission import FairAdmission
from benchmarks._timing import interleaved_medians
from cdk_adapters.contract.runtime_api import ADAPTER_IDENTIFIER_HEADER
from tests.container.test_middleware_asgi import PREFIX, RecordingApp, middleware

BODY = json.dumps({"prompt": "Invoices are due", "max_tokens": 16, "temperature": 0}).encode()
HEADERS = [(ADAPTER_IDENTIFIER_HEADER.encode(), f"{PREFIX}-acme-v1".encode()), (b"content-type", b"application/json")]


def requests(app, count: int) -> None:
    """`count` invocations of `app`, one after another, on one event loop."""

    async def one() -> None:
        sent = {"body": False}

        async def receive():
            if not sent["body"]:
                sent["body"] = True
                return {"type": "http.request", "body": BODY, "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message):
            return None

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/invocations",
            "headers": HEADERS,
            "query_string": b"",
            "server": ("0.0.0.0", 8080),
        }
        await app(scope, receive, send)

    async def all_of_them() -> None:
        for _ in range(count):
            await one()

    asyncio.run(all_of_them())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    mw, _ = middleware()
    mw.context.admission = FairAdmission(256, mw.context.settings.tenant_limits.for_adapter)
    alone = RecordingApp()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        requests(mw, 200)  # warm both paths
        requests(alone, 200)
        medians = interleaved_medians(
            {
                "stand-in app alone": lambda: requests(alone, args.requests),
                "middleware + stand-in app": lambda: requests(mw, args.requests),
            },
            rounds=args.rounds,
        )
    per_request_us = {name: seconds / args.requests * 1e6 for name, seconds in medians.items()}
    print(f"{args.requests} requests per round, median of {args.rounds} interleaved rounds (µs per request)")
    for name, value in per_request_us.items():
        print(f"  {name:<28} {value:>8.1f}")
    added = per_request_us["middleware + stand-in app"] - per_request_us["stand-in app alone"]
    print(f"  the middleware's own work: {added:.1f} µs per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
