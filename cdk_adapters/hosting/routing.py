"""How the endpoint routes requests among instances and copies (the variant's ``RoutingConfig``).

On a multi-adapter endpoint the adapter is chosen by the inference component a request names
(``InferenceComponentName``), never by the body. What ``PREFIX_AWARE`` compares is the first
`prefix_length` bytes of the request body (characters of the messages' text for the
OpenAI-compatible API), so "the same prefix" means the same leading body bytes, whichever adapter
the request names. Inferred, not documented: whether the router also keys on the invoked
component; and vLLM's prefix cache is per adapter, so two adapters sharing a system prompt share
a route but not cached KV blocks. Clients gain most by putting a stable system prompt first and
serializing the prompt (or ``messages``) before per-request parameters, so equal prompts give
equal leading bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.problems import Problem

STRATEGIES = ("LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE", "KV_AWARE")
"""``RoutingStrategy``'s values (SageMaker API ``ProductionVariantRoutingConfig``)."""
PREFIX_LENGTH_RANGE = (1024, 65536)
CONCURRENCY_THRESHOLD_RANGE = (1, 1024)
MIN_REASON_LENGTH = 20


@dataclass(frozen=True)
class Routing:
    """The variant's routing strategy. Default: ``LEAST_OUTSTANDING_REQUESTS`` (as before)."""

    strategy: str = "LEAST_OUTSTANDING_REQUESTS"
    """``LEAST_OUTSTANDING_REQUESTS``, ``RANDOM``, ``PREFIX_AWARE`` or ``KV_AWARE``."""
    prefix_length: int | None = None
    """``PREFIX_AWARE`` only (required there): leading body bytes compared, 1024 to 65536. Cover
    the shared system prompt plus enough per-request text to spread load."""
    concurrency_threshold: int | None = None
    """``PREFIX_AWARE`` only (required there): in-flight requests on the chosen copy of the invoked
    component at which the next one goes elsewhere, 1 to 1024. One value for every copy of every
    component: size it to what the smallest copy serves at once (vLLM's ``max_num_seqs``)."""
    kv_aware_acknowledgment: str | None = None
    """``KV_AWARE`` only (required there): why this container supports it. SageMaker documents
    it for supported containers such as its vLLM Deep Learning Container; what a bring-your-own
    container must provide is not documented, and CloudFormation's schema (cfn-lint 1.58) does
    not list the value yet."""

    def problems(self, subject: str) -> list[Problem]:
        found: list[Problem] = []

        def bad(name: str, message: str) -> None:
            found.append(Problem(subject, f"routing.{name}", message))

        if self.strategy not in STRATEGIES:
            bad("strategy", f"must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        prefix_aware = self.strategy == "PREFIX_AWARE"
        for name, (low, high) in (("prefix_length", PREFIX_LENGTH_RANGE), ("concurrency_threshold", CONCURRENCY_THRESHOLD_RANGE)):
            value = getattr(self, name)
            if value is None:
                if prefix_aware:
                    bad(name, f"is required with PREFIX_AWARE (an integer from {low} to {high})")
            elif not prefix_aware:
                bad(name, f"applies only to PREFIX_AWARE routing (strategy is {self.strategy!r})")
            elif isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                bad(name, f"must be an integer from {low} to {high}, got {value!r}")
        reason = self.kv_aware_acknowledgment
        if self.strategy == "KV_AWARE":
            if not isinstance(reason, str) or len(reason.strip()) < MIN_REASON_LENGTH:
                bad(
                    "kv_aware_acknowledgment",
                    "KV_AWARE needs an acknowledgment saying why this container supports it (at least "
                    f"{MIN_REASON_LENGTH} characters): SageMaker documents it only for supported containers, "
                    "and what a bring-your-own container must provide is undocumented",
                )
        elif reason is not None:
            bad("kv_aware_acknowledgment", f"applies only to KV_AWARE routing (strategy is {self.strategy!r})")
        return found

    def render(self) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
        prefix = None
        if self.strategy == "PREFIX_AWARE":
            prefix = sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
                prefix_length=self.prefix_length, concurrency_threshold=self.concurrency_threshold
            )
        return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
            routing_strategy=self.strategy, prefix_aware_routing_config=prefix
        )
