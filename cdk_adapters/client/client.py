"""`AdapterClient`: call a named adapter of a cdk-adapters endpoint without knowing how it is deployed.

Built from the discovery record the construct publishes (an SSM parameter), it turns an adapter
or alias name into ``InferenceComponentName`` by the record's one naming rule, so no caller
hand-builds component names or forgets them (a recurring bug in SageMaker clients, e.g.
https://github.com/langchain-ai/langchain/issues/14344).
An adapter is always required: a call without one is refused before it is sent, and the base
model is reachable only with ``base_model=True`` on an endpoint whose record allows it; a name
whose component is the base component (``base``, in any case, by the naming rule) is refused
like a missing adapter, whatever the record allows.
"""

from __future__ import annotations

import json
import random
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cdk_adapters.client.errors import (
    AdapterClientError,
    AdapterRequired,
    BaseModelNotAllowed,
    DiscoveryError,
    StreamInterrupted,
    UnexpectedEndpoint,
    from_client_error,
)
from cdk_adapters.client.payload import Image, build_request
from cdk_adapters.client.retrying import Retrier, RetryPolicy, botocore_config
from cdk_adapters.client.sse import chunk_text, parse_events, payload_bytes
from cdk_adapters.client.structured import parse_json, response_format, validate_answer
from cdk_adapters.contract import runtime_api
from cdk_adapters.contract.discovery import DiscoveryRecord, DiscoveryRecordError
from cdk_adapters.contract.runtime_api import route_attribute
from cdk_adapters.contract.service_record import ServiceRecord

LOCAL_DISCOVERY_PATH = runtime_api.LOCAL_DISCOVERY_PATH
"""Where `cdk-adapters local` serves its discovery record."""


@dataclass(frozen=True)
class Target:
    """Where one call goes: the adapter (after alias resolution) and its inference component."""

    adapter: str | None
    """``None`` for an explicit base-model call."""
    component: str
    endpoint_name: str
    """``EndpointName``: the record's endpoint, or its canary endpoint."""
    canary: bool = False
    """The call goes to the record's canary endpoint (its share of this adapter's calls)."""


@dataclass(frozen=True)
class Completion:
    """A whole answer: the parsed JSON body and the adapter that produced it."""

    target: Target
    body: dict[str, Any]

    @property
    def adapter(self) -> str | None:
        return self.target.adapter

    @property
    def text(self) -> str:
        choice = (self.body.get("choices") or [{}])[0]
        message = choice.get("message")
        return (message.get("content") or "") if isinstance(message, dict) else (choice.get("text") or "")

    @property
    def usage(self) -> dict[str, int]:
        """``prompt_tokens`` and ``completion_tokens`` as the server counted them (0 when it did not say)."""
        raw = self.body.get("usage")
        usage = raw if isinstance(raw, dict) else {}
        return {key: int(usage.get(key) or 0) for key in ("prompt_tokens", "completion_tokens")}

    def json(self, schema: Mapping[str, Any] | None = None) -> Any:
        """The answer's JSON value, checked against `schema` when given: raises `AnswerNotJson` or
        `AnswerSchemaMismatch` (asking for JSON does not guarantee it; see `client.structured`)."""
        return parse_json(self.text) if schema is None else validate_answer(self.text, schema)


@dataclass
class Stream:
    """An answer arriving in chunks (OpenAI chunk objects); iterate it once."""

    target: Target
    chunks: Iterator[dict[str, Any]] = field(repr=False)

    @property
    def adapter(self) -> str | None:
        return self.target.adapter

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.chunks

    def text(self) -> Iterator[str]:
        """Only the text each chunk adds."""
        for chunk in self.chunks:
            piece = chunk_text(chunk)
            if piece:
                yield piece


class AdapterClient:
    """Invokes the adapters of one endpoint described by a `DiscoveryRecord`, or of the cells of a
    service described by a `ServiceRecord` (each call goes to the cell its adapter is placed in).

    :param runtime: a boto3 ``sagemaker-runtime`` client (tests pass one with a Stubber).
    :param retry: how long to wait for a component that is not ready (`RetryPolicy`).
    :param rng: picks alias targets by weight; seed it for reproducible traffic splits.
    :param clock, sleep: injected by tests so retries never really wait.
    :param record_source: reads the record again (`from_parameter` passes the SSM read), so a
        long-lived client follows an alias change, such as a rollback, within `record_max_age_s`.
    :param accept_endpoints: endpoint names the record may name (its endpoint and its canary's);
        a trailing ``*`` makes one a prefix (``"prod-chat-*"``). A record naming any other endpoint
        raises `UnexpectedEndpoint`, at construction or when a re-read record changes, and nothing
        is sent. Default: accept whatever the record names.
    :param stable_prefix: send every body with the conversation first (``prompt`` or ``messages``,
        each message ``role`` then ``content``) and the parameters after it in sorted order, so
        requests that share a start (a long system prompt, few-shot examples) share their leading
        bytes, which an endpoint with ``PREFIX_AWARE`` routing compares. The JSON means the same.
        Default False: parameters first, in the order given (the bodies of earlier releases). That
        it improves cache hits is inferred (`cdk_adapters.client.payload.stable_prefix_body`).
    """

    def __init__(
        self,
        record: DiscoveryRecord | ServiceRecord,
        *,
        runtime: Any,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
        record_source: Callable[[], DiscoveryRecord | ServiceRecord] | None = None,
        record_max_age_s: float = 60.0,
        accept_endpoints: Sequence[str] | str | None = None,
        stable_prefix: bool = False,
    ) -> None:
        self._accepted = _accepted_patterns(accept_endpoints)
        self.stable_prefix = stable_prefix
        self.service = _as_service(record)
        self._check_endpoints(self.service, "the discovery record")
        self.runtime = runtime
        self._rng = rng or random.Random()
        retrier = Retrier(policy=retry or RetryPolicy(), rng=self._rng)
        if clock is not None:
            retrier.clock = clock
        if sleep is not None:
            retrier.sleep = sleep
        self._retrier = retrier
        self._record_source = record_source
        self._record_max_age_s = record_max_age_s
        self._record_read_at = retrier.clock()

    # --- construction ---------------------------------------------------------------------

    @property
    def record(self) -> DiscoveryRecord:
        """The endpoint's record, for a one-cell service; a service of several cells has one per
        cell (``service.record_of(adapter)``)."""
        if len(self.service.cells) != 1:
            raise AttributeError(f"this client calls {len(self.service.cells)} cells; use client.service.record_of(adapter)")
        return next(iter(self.service.cells.values()))

    @classmethod
    def from_record(
        cls,
        record: DiscoveryRecord | ServiceRecord,
        *,
        session: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        runtime: Any = None,
        **options: Any,
    ) -> AdapterClient:
        """A client for `record`'s endpoint; builds the ``sagemaker-runtime`` client unless given one."""
        if runtime is None:
            runtime = _runtime_client(session, region_name=region_name, endpoint_url=endpoint_url)
        return cls(record, runtime=runtime, **options)

    @classmethod
    def from_parameter(
        cls,
        name: str,
        *,
        session: Any = None,
        region_name: str | None = None,
        ssm: Any = None,
        runtime: Any = None,
        **options: Any,
    ) -> AdapterClient:
        """Read the discovery record from SSM parameter `name` (``endpoint.discovery_parameter_name``,
        or a service's ``discovery_parameter_name``)."""
        if ssm is None:
            ssm = _session(session).client("ssm", region_name=region_name)

        def read() -> ServiceRecord:
            return _read_parameter(ssm, name)

        return cls.from_record(read(), session=session, region_name=region_name, runtime=runtime, record_source=read, **options)

    @classmethod
    def from_local(cls, url: str, *, runtime: Any = None, **options: Any) -> AdapterClient:
        """A client for `cdk-adapters local` at `url` (it serves its own discovery record)."""
        address = url.rstrip("/")
        try:
            with urllib.request.urlopen(address + LOCAL_DISCOVERY_PATH, timeout=10) as answer:
                text = answer.read().decode()
        except OSError as error:
            raise DiscoveryError(f"cannot read the discovery record of local mode at {address}: {error}") from None
        record = _parse_record(text, f"local mode at {address}")
        if runtime is None:
            runtime = local_runtime_client(address)
        return cls(record, runtime=runtime, **options)

    # --- calls ----------------------------------------------------------------------------

    def resolve(self, adapter: str | None, *, base_model: bool = False) -> Target:
        """The component a call to `adapter` (an adapter or alias name) goes to: aliases pick a version
        by weight, then a canary endpoint serving that version takes its share of the calls."""
        self._refresh_record()
        if base_model:
            if adapter is not None:
                raise ValueError("give an adapter or base_model=True, not both")
            return self._base_model_target()
        if not adapter:
            raise AdapterRequired(
                "name an adapter (or an alias): calls never fall back to the base model silently; "
                "pass base_model=True for a deliberate base-model call"
            )
        record = self.service.record_of(adapter)
        resolved = record.resolve(adapter, self._rng)
        canary = record.canary
        for endpoint, component, base in (
            (record.endpoint_name, record.component_name(resolved), record.base_inference_component_name),
            *([(canary.endpoint_name, canary.component_name(resolved), canary.base_inference_component_name)] if canary else []),
        ):
            if component.lower() == base.lower():  # SageMaker compares component names ignoring case
                raise AdapterRequired(
                    f"{adapter!r} names the base model's component {base!r} of endpoint {endpoint!r}, not an adapter: "
                    "calls never reach the base model under an adapter's name; pass base_model=True (and no "
                    "adapter) for a deliberate base-model call"
                )
        if canary is not None and canary.takes(resolved, self._rng):
            return Target(resolved, canary.component_name(resolved), canary.endpoint_name, canary=True)
        return Target(resolved, record.component_name(resolved), record.endpoint_name)

    def _base_model_target(self) -> Target:
        """A deliberate base-model call: to a cell whose record allows it (every cell serves the same
        base model, so one is picked at random among those that do)."""
        allowing = [record for record in self.service.cells.values() if record.allow_base_model]
        if not allowing:
            endpoints = ", ".join(repr(record.endpoint_name) for record in self.service.cells.values())
            raise BaseModelNotAllowed(
                f"endpoint {endpoints} does not serve the base model (its discovery record has "
                "allow_base_model false); name an adapter"
                if len(self.service.cells) == 1
                else f"no cell of this service serves the base model (endpoints {endpoints} have allow_base_model false); name an adapter"
            )
        record = allowing[0] if len(allowing) == 1 else self._rng.choice(allowing)
        return Target(None, record.base_inference_component_name, record.endpoint_name)

    def invoke(
        self,
        adapter: str | None,
        prompt: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        images: Sequence[Image] = (),
        base_model: bool = False,
        json_schema: Mapping[str, Any] | None = None,
        **parameters: Any,
    ) -> Completion:
        """One whole answer: a completion of `prompt`, or a chat over `messages` (or `prompt` with
        `images`). `parameters` go into the body (``max_tokens``, ``temperature``, ...).
        `json_schema` asks vLLM's structured outputs for an answer following that schema; check
        it with ``completion.json(schema)``, since a truncated answer can still break it."""
        target = self.resolve(adapter, base_model=base_model)
        if json_schema is not None:
            parameters = {**parameters, "response_format": response_format(json_schema)}
        request = build_request(
            prompt=prompt, messages=messages, images=images, parameters=parameters, stable_prefix=self.stable_prefix
        )

        def attempt() -> dict[str, Any]:
            response: dict[str, Any] = self.runtime.invoke_endpoint(**self._call(target, request.body, request.route))
            return response

        response = self._send(attempt, target)
        return Completion(target, json.loads(response["Body"].read()))

    def stream(
        self,
        adapter: str | None,
        prompt: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        images: Sequence[Image] = (),
        base_model: bool = False,
        **parameters: Any,
    ) -> Stream:
        """Like `invoke`, answered through InvokeEndpointWithResponseStream as parsed chunks. Waiting
        for a component that is not ready happens before the first chunk; an error after it raises
        `StreamInterrupted`."""
        target = self.resolve(adapter, base_model=base_model)
        request = build_request(
            prompt=prompt, messages=messages, images=images, stream=True, parameters=parameters, stable_prefix=self.stable_prefix
        )

        def attempt() -> dict[str, Any]:
            response: dict[str, Any] = self.runtime.invoke_endpoint_with_response_stream(
                **self._call(target, request.body, request.route)
            )
            return response

        response = self._send(attempt, target)
        return Stream(target, self._chunks(response["Body"], target))

    def chat(self, adapter: str | None, messages: Sequence[Mapping[str, Any]], **options: Any) -> Completion:
        return self.invoke(adapter, messages=messages, **options)

    # --- plumbing -------------------------------------------------------------------------

    def _refresh_record(self) -> None:
        """Re-read the record once it is older than its maximum age; on a failed read keep the one
        in hand (an SSM hiccup must not stop calls) and try again after another maximum age."""
        now = self._retrier.clock()
        if self._record_source is None or now - self._record_read_at < self._record_max_age_s:
            return
        try:
            record = self._record_source()
        except (DiscoveryError, BotoCoreError):  # no network or credentials for SSM right now
            self._record_read_at = now
            return
        service = _as_service(record)
        # A record that now names another endpoint stops calls (read again on every call) until it is put right.
        self._check_endpoints(service, "the re-read discovery record")
        self._record_read_at = now
        self.service = service

    def _check_endpoints(self, service: ServiceRecord, origin: str) -> None:
        if self._accepted is None:
            return
        names = [
            name
            for record in service.cells.values()
            for name in [record.endpoint_name] + ([record.canary.endpoint_name] if record.canary is not None else [])
        ]
        for name in names:
            if not any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in self._accepted):
                raise UnexpectedEndpoint(name, self._accepted, origin)

    def _call(self, target: Target, body: bytes, route: str) -> dict[str, Any]:
        return {
            "EndpointName": target.endpoint_name,
            "InferenceComponentName": target.component,
            "ContentType": "application/json",
            "CustomAttributes": route_attribute(route),
            "Body": body,
        }

    def _send(self, attempt: Callable[[], dict[str, Any]], target: Target) -> dict[str, Any]:
        subject = f"inference component {target.component!r}"
        try:
            return self._retrier.call(attempt, subject=subject)
        except ClientError as error:
            raise from_client_error(error, adapter=target.adapter, component=target.component) from error

    def _chunks(self, events: Any, target: Target) -> Iterator[dict[str, Any]]:
        try:
            for chunk in parse_events(payload_bytes(events)):
                error = chunk.get("error")
                if isinstance(error, dict):  # vLLM reports a failure mid-stream in-band, then [DONE]
                    raise StreamInterrupted(f"the stream from {target.component!r} failed: {error.get('message') or error}")
                yield chunk
        except ClientError as error:  # botocore's EventStreamError for an error event mid-stream
            raise from_client_error(error, adapter=target.adapter, component=target.component) from error


def _accepted_patterns(accept: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if accept is None:
        return None
    patterns = (accept,) if isinstance(accept, str) else tuple(accept)
    bad = [p for p in patterns if not isinstance(p, str) or not p.rstrip("*") or "*" in p.rstrip("*")]
    if not patterns or bad:
        raise ValueError(
            f"accept_endpoints must be endpoint names or prefixes ending in one '*' (e.g. 'prod-chat-*'), got {accept!r}"
        )
    return patterns


def local_runtime_client(url: str) -> Any:
    """A ``sagemaker-runtime`` client for local mode: its URL, and placeholder credentials
    (local mode checks no signature)."""
    import boto3

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name=runtime_api.LOCAL_REGION,
        aws_access_key_id=runtime_api.LOCAL_ACCESS_KEY,
        aws_secret_access_key=runtime_api.LOCAL_ACCESS_KEY,
        config=botocore_config(),
    )


def _runtime_client(session: Any, *, region_name: str | None, endpoint_url: str | None) -> Any:
    return _session(session).client(
        "sagemaker-runtime", region_name=region_name, endpoint_url=endpoint_url, config=botocore_config()
    )


def _session(session: Any) -> Any:
    if session is not None:
        return session
    import boto3

    return boto3.session.Session()


def _as_service(record: DiscoveryRecord | ServiceRecord) -> ServiceRecord:
    """An endpoint's record is the record of a one-cell service."""
    return record if isinstance(record, ServiceRecord) else ServiceRecord.one_cell(record)


def _read_parameter(ssm: Any, name: str) -> ServiceRecord:
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        if code == "ParameterNotFound":
            raise DiscoveryError(
                f"SSM parameter {name!r} does not exist in this account and region; it is the endpoint's "
                "discovery_parameter_name (printed by cdk deploy)"
            ) from None
        raise DiscoveryError(f"cannot read SSM parameter {name!r}: {error}") from None
    return _parse_record(value, f"SSM parameter {name!r}")


def _parse_record(text: str, origin: str) -> ServiceRecord:
    """An endpoint's record (a one-cell service) or a service's record of several cells."""
    try:
        return ServiceRecord.from_json(text)
    except DiscoveryRecordError as error:
        raise DiscoveryError(f"{origin} holds no readable discovery record: {error}") from None


__all__ = ["AdapterClient", "AdapterClientError", "Completion", "Stream", "Target", "local_runtime_client"]
