"""Requests a browser could make: refused before routing.

SageMaker never sends an ``Origin`` header, so an administrative request (``/adapters``) that
carries one came from a web page and is refused everywhere. A server bound to loopback (a local
run) also answers only requests whose ``Host`` names loopback at its own port, so a page that
rebinds its DNS name to 127.0.0.1 reaches nothing. (A local run also takes registration bodies as
JSON only: `registration_service.refuse_untyped_local_body`.)
"""

from __future__ import annotations

from adapter_server import sagemaker_contract
from adapter_server.asgi_io import Refusal
from adapter_server.asgi_types import Scope
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.runtime_api import refuses_host


def refuse_browser_requests(scope: Scope) -> None:
    """403 ``cross_origin_refused`` for a request a web page could have made (module docstring)."""
    headers = scope["headers"]
    server = scope.get("server")
    if refuses_host(server, sagemaker_contract.header(headers, "host")):
        assert server is not None
        raise Refusal(
            403,
            error_kinds.CROSS_ORIGIN_REFUSED,
            f"this server listens on loopback and answers only Host 127.0.0.1:{server[1]} (or localhost:{server[1]})",
        )
    if not scope["path"].startswith(sagemaker_contract.ADAPTERS_PATH):
        return
    if sagemaker_contract.header(headers, "origin") is not None:
        raise Refusal(
            403,
            error_kinds.CROSS_ORIGIN_REFUSED,
            "adapter administration is refused from a web page (the request carries Origin); SageMaker and "
            "cdk-adapters local register adapters directly",
        )
