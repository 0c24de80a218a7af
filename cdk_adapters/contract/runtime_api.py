"""What the runtime client, local mode and the container agree on about one invocation.

Sources: SageMaker's InvokeEndpoint reference (the 6 MB payload limit) and the container's
``route=`` custom attribute (docs/container.md). The container reads the same values (its
``asgi_io`` body limit and ``sagemaker_contract`` routes import them; the image copies this package).
"""

from __future__ import annotations

import ipaddress

INVOKE_ENDPOINT_MAX_BYTES = 6_291_456
"""InvokeEndpoint's request payload limit (6 MiB), checked by the client before sending."""

COMPONENT_HEADER = "x-amzn-sagemaker-inference-component"
"""The SageMaker Runtime request header that names the inference component (``InferenceComponentName``)."""
ADAPTER_IDENTIFIER_HEADER = "x-amzn-sagemaker-adapter-identifier"
"""What SageMaker sets on the container's /invocations when the caller named an adapter component."""
CUSTOM_ATTRIBUTES_HEADER = "x-amzn-sagemaker-custom-attributes"
"""InvokeEndpoint's ``CustomAttributes``, passed to the container verbatim."""
METRICS_PATH = "/metrics"
"""Where the container serves Prometheus text (vLLM's series and the middleware's per-adapter ones):
SageMaker's metrics collection, local mode's front and ``cdk-adapters usage --prometheus`` read it."""
LOCAL_DISCOVERY_PATH = "/cdk-adapters/discovery"
LOCAL_REGION = "us-east-1"
LOCAL_ACCESS_KEY = "local"
"""What a boto3 client for local mode is given (region, and both halves of the key pair): botocore
needs a region and credentials to sign, and local mode checks no signature."""


def local_boto3_call(url: str) -> str:
    """The one line that builds plain boto3's client for local mode at `url` (printed, documented)."""
    return (
        f'boto3.client("sagemaker-runtime", endpoint_url="{url}", region_name="{LOCAL_REGION}", '
        f'aws_access_key_id="{LOCAL_ACCESS_KEY}", aws_secret_access_key="{LOCAL_ACCESS_KEY}")'
    )


"""Where local mode serves its discovery record (a deployed endpoint's is in SSM)."""

BODY_DEADLINE_S = 20.0
"""Seconds a request body may take to arrive in full, in the container and local mode's front.
SageMaker's front end has the body before it calls the container (6 MiB crosses its network in
well under a second); a body still arriving after this is a stalled upload that would otherwise
hold its connection indefinitely."""

ROUTE_ATTRIBUTE = "route"
COMPLETIONS_ROUTE = "/v1/completions"
CHAT_ROUTE = "/v1/chat/completions"


def route_attribute(route: str) -> str:
    """The ``CustomAttributes`` value that sends an ``/invocations`` call to `route`."""
    return f"{ROUTE_ATTRIBUTE}={route}"


def is_loopback(host: str) -> bool:
    """``localhost``, ``::1`` or an address in 127.0.0.0/8: reachable from this machine only
    (local mode's warning on a public ``--host`` and the container's local-only settings use it)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_host_header(host_header: str | None, port: int) -> bool:
    """Whether an HTTP ``Host`` header names this machine's loopback at `port`.

    A server bound to loopback answers only such requests: a web page that rebinds its own DNS
    name to 127.0.0.1 reaches the port, but its requests still carry the page's host name.
    """
    if not host_header:
        return False
    host, _, given_port = host_header.strip().rpartition(":")
    if not host or not given_port.isdigit() or int(given_port) != port:
        return False
    return is_loopback(host)


def refuses_host(server: tuple[str, int] | None, host_header: str | None) -> bool:
    """Whether a server listening at `server` (the ASGI scope's ``server``) must refuse a request
    with this ``Host``: one bound to loopback answers only Host values naming loopback at its port."""
    if server is None or not is_loopback(str(server[0])):
        return False
    return not is_loopback_host_header(host_header, int(server[1]))
