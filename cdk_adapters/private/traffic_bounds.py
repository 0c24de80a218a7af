"""How much traffic a plan may be asked about: one rule the manifest's ``traffic:`` schema and
``cdk-adapters plan``'s what-if flags both hold (standard library only, so the planner starts fast)."""

from __future__ import annotations

MAX_REQUESTS_PER_MINUTE = 1_000_000.0
"""Per tenant: about 16,700 requests a second, far past any one adapter's share of an endpoint."""
MAX_TOKENS = 1_048_576
"""Per request, prompt or output: past every context length vLLM serves today."""
MAX_PEAK_FACTOR = 100.0

TRAFFIC_BOUNDS = {
    # field -> (smallest, largest): the manifest's ``traffic:`` and the command line's what-if
    "requests_per_minute": (0.0, MAX_REQUESTS_PER_MINUTE),
    "prompt_tokens": (0, MAX_TOKENS),
    "output_tokens": (1, MAX_TOKENS),
    "peak_factor": (1.0, MAX_PEAK_FACTOR),
}
"""Every traffic number is finite and within these bounds, so no plan overflows or runs away."""
