"""The environment contract between `MultiAdapterEndpoint` and the serving container.

The construct renders these variables into the SageMaker model's container environment; the
container's entrypoint turns them into vLLM flags. Keeping the names in one standard-library
module lets both sides (and their tests) agree without importing each other.

Value encoding, for every `VLLM_FLAG_PREFIX` variable: integers and floats as decimal strings,
booleans as ``true``/``false`` (``false`` becomes ``--no-<flag>``), structured values as JSON,
anything else as the plain string. ``CDK_ADAPTERS_VLLM_MAX_LORAS=4`` becomes ``--max-loras 4``.
"""

from __future__ import annotations

VLLM_FLAG_PREFIX = "CDK_ADAPTERS_VLLM_"
"""``CDK_ADAPTERS_VLLM_<FLAG_NAME>`` -> ``--flag-name <value>``; rendered from `VllmOptions`."""

SAGEMAKER_VLLM_FLAG_PREFIX = "SM_VLLM_"
"""The convention of AWS's own vLLM images; read too, with lower precedence than ours."""

EXTRA_ARGS = "CDK_ADAPTERS_EXTRA_ARGS"
"""A JSON list of strings appended verbatim to the vLLM command line."""

ALLOW_BASE_MODEL = "CDK_ADAPTERS_ALLOW_BASE_MODEL"
"""``true`` lets requests without an adapter reach the base model; default ``false`` (they get 400)."""

BASE_MODEL_ID = "CDK_ADAPTERS_BASE_MODEL_ID"
BASE_MODEL_REVISION = "CDK_ADAPTERS_BASE_MODEL_REVISION"
"""The pinned base identity the register-time gate compares each adapter's config against."""

ALLOW_VISION_MODULES = "CDK_ADAPTERS_ALLOW_VISION_MODULES"
"""``true`` admits adapters that target a vision-language model's vision tower or connector."""

LOCAL_BODY_NAMES_ADAPTER = "CDK_ADAPTERS_LOCAL_BODY_NAMES_ADAPTER"
"""Local runs only: ``true`` lets a request on the OpenAI routes (``/v1/completions``,
``/v1/chat/completions``) with no adapter header pick a registered adapter by the body's ``model``,
the OpenAI API's convention, for OpenAI clients pointed at a local server. Never on
``/invocations``; the container refuses it unless it listens on loopback."""

STATE_DIR = "CDK_ADAPTERS_STATE_DIR"
"""Where the container persists adapter registrations so they are replayed after an engine restart."""

RUNTIME_LORA_UPDATING = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
"""vLLM mounts ``/adapters`` only when this is ``true``; the construct always sets it."""
