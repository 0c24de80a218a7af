"""The serving container's environment: every variable the construct renders and the container
reads, and the value codec, defined once (encode and decode side by side).

The construct renders these variables into the SageMaker model's container environment; the
container's entrypoint turns the ``CDK_ADAPTERS_VLLM_*`` ones into vLLM flags and its middleware
reads the policy ones. The request-metrics and tenant-limits variables live beside their codecs
(`request_metrics`, `tenant_limits`); every other ``CDK_ADAPTERS_*`` name is here.

Value encoding, for every `VLLM_FLAG_PREFIX` variable: integers and floats as decimal strings,
booleans as ``true``/``false`` (``false`` becomes ``--no-<flag>``), structured values as JSON,
anything else as the plain string. ``CDK_ADAPTERS_VLLM_MAX_LORAS=4`` becomes ``--max-loras 4``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cdk_adapters.contract.env_values import parse_bool
from cdk_adapters.problems import Problem

VARIABLE_PREFIX = "CDK_ADAPTERS_"
"""Every variable of this contract starts so; configuration may not set one by hand."""

# ------------------------------------------------------------------------------------ vLLM flags

VLLM_FLAG_PREFIX = "CDK_ADAPTERS_VLLM_"
"""``CDK_ADAPTERS_VLLM_<FLAG_NAME>`` -> ``--flag-name <value>``; rendered from `VllmOptions`."""

SAGEMAKER_VLLM_FLAG_PREFIX = "SM_VLLM_"
"""The convention of AWS's own vLLM images; read too, with lower precedence than ours."""

EXTRA_ARGS = "CDK_ADAPTERS_EXTRA_ARGS"
"""A JSON list of strings appended verbatim to the vLLM command line."""

RUNTIME_LORA_UPDATING = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
"""vLLM mounts ``/adapters`` only when this is ``true``; the construct always sets it."""

# --------------------------------------------------------------------------------- serving policy

ALLOW_BASE_MODEL = "CDK_ADAPTERS_ALLOW_BASE_MODEL"
"""``true`` lets requests without an adapter reach the base model; default ``false`` (they get 400)."""

ALLOW_VISION_MODULES = "CDK_ADAPTERS_ALLOW_VISION_MODULES"
"""``true`` admits adapters that target a vision-language model's vision tower or connector."""

BASE_MODEL_ID = "CDK_ADAPTERS_BASE_MODEL_ID"
BASE_MODEL_REVISION = "CDK_ADAPTERS_BASE_MODEL_REVISION"
"""The pinned base identity the register-time gate compares each adapter's config against."""

# ------------------------------------------------------------------------------- the container's own

STATE_DIR = "CDK_ADAPTERS_STATE_DIR"
"""Where the container persists adapter registrations so they are replayed after an engine restart
(set by the image)."""

NO_CUSTOM_CODE_DIR = "CDK_ADAPTERS_NO_CUSTOM_CODE_DIR"
"""An empty directory the SageMaker standards library is pointed at instead of the model
directory, so a `model.py` inside model artifacts is never imported (set by the image)."""

LOCAL_BODY_NAMES_ADAPTER = "CDK_ADAPTERS_LOCAL_BODY_NAMES_ADAPTER"
"""Local runs only: ``true`` lets a request on the OpenAI routes (``/v1/completions``,
``/v1/chat/completions``) with no adapter header pick a registered adapter by the body's ``model``,
the OpenAI API's convention, for OpenAI clients pointed at a local server. Never on
``/invocations``; the container refuses it unless it listens on loopback."""

LISTEN_PORT = "CDK_ADAPTERS_LISTEN_PORT"
"""Local runs and tests only: the port to listen on instead of SageMaker's 8080."""

LISTEN_HOST = "CDK_ADAPTERS_LISTEN_HOST"
"""Local runs and tests only: the interface to bind (default: all interfaces)."""

# ----------------------------------------------------------------------------------- flag codec


def flag_variable(flag: str, prefix: str = VLLM_FLAG_PREFIX) -> str:
    """The variable that sets vLLM flag `flag`: ``--max-loras`` (or ``max_loras``) ->
    ``CDK_ADAPTERS_VLLM_MAX_LORAS``."""
    return prefix + flag.removeprefix("--").replace("-", "_").upper()


def variable_flag(variable: str, prefix: str = VLLM_FLAG_PREFIX) -> str:
    """The vLLM flag a `prefix` variable sets: ``CDK_ADAPTERS_VLLM_MAX_LORAS`` -> ``--max-loras``."""
    return "--" + variable.removeprefix(prefix).lower().replace("_", "-")


def encode_flag_value(value: object) -> str:
    """A flag's value as its variable carries it (the encoding this module's docstring states)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, Mapping):
        return json.dumps(dict(value), sort_keys=True, separators=(",", ":"))
    return json.dumps(value)


def encode_extra_args(args: Iterable[str]) -> str:
    """`EXTRA_ARGS`'s value: a JSON list of strings."""
    return json.dumps(list(args))


def decode_extra_args(environ: Mapping[str, str]) -> tuple[list[str], list[Problem]]:
    """The extra arguments `EXTRA_ARGS` carries (none when unset), and its problems."""
    raw = environ.get(EXTRA_ARGS, "").strip()
    if not raw:
        return [], []
    try:
        extra = json.loads(raw)
    except json.JSONDecodeError as error:
        return [], [Problem(EXTRA_ARGS, "value", f"is not JSON ({error}); expected a list of strings")]
    if not isinstance(extra, list) or not all(isinstance(token, str) for token in extra):
        return [], [Problem(EXTRA_ARGS, "value", "must be a JSON list of strings")]
    return extra, []


# --------------------------------------------------------------------------------- policy codec


def revision_problem(base_model_id: str | None, base_model_revision: str | None, id_name: str) -> str | None:
    """The revision rule: a revision is a revision *of* a model, so it needs the model's id
    (`id_name`: what the id is called where it is missing, a prop or a variable)."""
    if base_model_revision and not base_model_id:
        return (
            f"revision {base_model_revision!r} pins nothing without {id_name}, the model it is a revision of; set both or neither"
        )
    return None


@dataclass(frozen=True)
class PolicySettings:
    """What the container admits and the base identity adapters must name (`ServingPolicy` renders it)."""

    allow_base_model: bool = False
    allow_vision_modules: bool = False
    base_model_id: str | None = None
    base_model_revision: str | None = None

    def environment(self) -> dict[str, str]:
        """The container variables for these settings (identity variables only when set)."""
        env = {
            ALLOW_BASE_MODEL: encode_flag_value(self.allow_base_model),
            ALLOW_VISION_MODULES: encode_flag_value(self.allow_vision_modules),
        }
        if self.base_model_id is not None:
            env[BASE_MODEL_ID] = self.base_model_id
        if self.base_model_revision is not None:
            env[BASE_MODEL_REVISION] = self.base_model_revision
        return env


def decode_policy(environ: Mapping[str, str]) -> tuple[PolicySettings, list[Problem]]:
    """`PolicySettings` from the environment, and every problem, each naming its variable."""
    problems: list[Problem] = []
    settings = PolicySettings(
        allow_base_model=parse_bool(environ, ALLOW_BASE_MODEL, False, problems),
        allow_vision_modules=parse_bool(environ, ALLOW_VISION_MODULES, False, problems),
        base_model_id=environ.get(BASE_MODEL_ID, "").strip() or None,
        base_model_revision=environ.get(BASE_MODEL_REVISION, "").strip() or None,
    )
    revision = revision_problem(settings.base_model_id, settings.base_model_revision, BASE_MODEL_ID)
    if revision:
        problems.append(Problem(BASE_MODEL_REVISION, "value", revision))
    return settings, problems
