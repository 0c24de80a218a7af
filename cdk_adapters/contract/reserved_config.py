"""Configuration the serving container owns or refuses, for the construct and the launcher alike.

Two sides read these rules: `VllmOptions` / `ServingPolicy` refuse them at synth, and the
container's launcher refuses them again at start (exit 78), because an image can be configured by
hand too. Keeping them here is what stops the two lists drifting apart.

Two kinds of rule:

* flags the container sets itself (SageMaker's contract fixes them): configuration may not
  contradict them, in any spelling vLLM's parser accepts (``--no-`` forms, underscores, aliases,
  unambiguous abbreviations);
* flags and variables that would make the server run code named by configuration or shipped in
  model files: remote model code, plugins, extra middleware, custom handlers, LoRA resolvers that
  load adapters past the register-time gate. Model artifacts never run code in this server;
* flags and variables that would break the tenant boundary: a lost adapter answered by the base
  model, a session store shared by every tenant, a chat template taken from the request.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReservedFlag:
    """A vLLM flag that configuration may not set."""

    flag: str
    reason: str
    aliases: tuple[str, ...] = ()
    boolean: bool = False
    """A boolean flag: its ``--no-`` form is reserved too."""
    fixed_value: str | None = None
    """For a flag the container forces to a value: the value a repeat may agree with."""

    @property
    def spellings(self) -> tuple[str, ...]:
        names = (self.flag, *self.aliases)
        if self.boolean:
            names += tuple("--no-" + name[2:] for name in names if name.startswith("--"))
        return names


ENABLE_LORA = ReservedFlag("--enable-lora", "the container serves LoRA adapters registered at run time", boolean=True)
API_SERVER_COUNT = ReservedFlag(
    "--api-server-count",
    "each API server process keeps its own adapter list, so runtime registration needs exactly one",
    aliases=("-asc",),
    fixed_value="1",
)
FIXED_FLAGS: tuple[ReservedFlag, ...] = (ENABLE_LORA, API_SERVER_COUNT)
"""Flags the container always sets; configuration may repeat the container's value, never another."""

PORT = ReservedFlag("--port", "SageMaker always sends requests to port 8080")
HOST = ReservedFlag("--host", "the container listens where SageMaker connects")
MODEL = ReservedFlag("--model", "the model is where SageMaker puts it (or CDK_ADAPTERS_VLLM_MODEL in local runs)")
SERVED_MODEL_NAME = ReservedFlag("--served-model-name", "the base model is served under CDK_ADAPTERS_BASE_MODEL_ID")
MIDDLEWARE = ReservedFlag(
    "--middleware",
    "the container installs its own middleware (the adapter contract and tenant boundary); more would run "
    "code named by configuration in front of it",
)
CONFIG = ReservedFlag("--config", "a config file would set flags past these checks")

CONTAINER_FLAGS: tuple[ReservedFlag, ...] = (*FIXED_FLAGS, PORT, HOST, MODEL, SERVED_MODEL_NAME, MIDDLEWARE, CONFIG)
"""Every flag the container sets or owns, in no configurable form (the launcher sets them by these names)."""

CODE_LOADING_FLAGS: tuple[ReservedFlag, ...] = (
    ReservedFlag("--trust-remote-code", "it runs Python code shipped with the model files"),
    ReservedFlag("--tool-parser-plugin", "it imports a Python file named by configuration"),
    ReservedFlag("--reasoning-parser-plugin", "it imports a Python file named by configuration"),
    ReservedFlag("--logits-processors", "it imports Python classes named by configuration"),
    ReservedFlag("--worker-cls", "it imports a Python class named by configuration"),
    ReservedFlag("--worker-extension-cls", "it imports a Python class named by configuration"),
    ReservedFlag("--io-processor-plugin", "it loads a plugin named by configuration"),
)
"""Flags that make vLLM import code named by configuration or shipped with the model."""

TENANT_BOUNDARY_FLAGS: tuple[ReservedFlag, ...] = (
    ReservedFlag(
        "--trust-request-chat-template",
        "a request's own chat_template would be rendered (a Jinja template named by the caller, not the model)",
        boolean=True,
    ),
)
"""Flags that would let one caller change how the shared engine treats requests."""

REFUSED_FLAGS: tuple[ReservedFlag, ...] = CONTAINER_FLAGS + CODE_LOADING_FLAGS + TENANT_BOUNDARY_FLAGS

CODE_LOADING_VARIABLES: dict[str, str] = {
    "CUSTOM_SCRIPT_FILENAME": "AWS's standards library imports that script from the model directory",
    "CUSTOM_PRE_PROCESS": "AWS's standards library imports that handler",
    "CUSTOM_POST_PROCESS": "AWS's standards library imports that handler",
    "VLLM_PLUGINS": "the container loads no vLLM plugins",
    "VLLM_SERVER_DEV_MODE": "it opens vLLM's development routes (weights, sleep, RPC)",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "it lets vLLM unpickle objects",
}
"""Variables (by exact name) that would run code or open routes past the container's checks."""

CODE_LOADING_VARIABLE_PREFIXES: dict[str, str] = {
    "CUSTOM_FASTAPI_": "AWS's standards library imports those handlers and middleware",
    "VLLM_LORA_RESOLVER_": "LoRA resolvers load adapters by name, past the register-time gate",
    "SAGEMAKER_TRANSFORMS_": "AWS's standards library would rewrite requests before the container's checks",
}
"""Variables (by prefix) of the same kind."""

TENANT_BOUNDARY_VARIABLES: dict[str, str] = {
    "VLLM_SKIP_MODEL_NAME_VALIDATION": "vLLM would answer a call naming a lost or unknown adapter with the base model",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "AWS's standards library would keep one session store for the whole endpoint, "
    "shared by every tenant",
}
"""Variables (by exact name) that would break the tenant boundary."""

REAL_FLAGS_THAT_PREFIX_REFUSED_ONES: frozenset[str] = frozenset({"--reasoning-parser"})
"""vLLM 0.31 flags that are a prefix of a refused flag: exact names, so not abbreviations of it
(argparse prefers an exact match). Checked against the real parser by the tests."""


def flag_name(token: str) -> str | None:
    """The option a command-line token names, as vLLM's parser reads it (``--a_b=1`` -> ``--a-b``);
    ``None`` for a value."""
    if not token.startswith("-") or token in ("-", "--"):
        return None
    name = token.split("=", 1)[0]
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-").lower()
    return name


def refused_flag(token: str) -> ReservedFlag | None:
    """The reserved flag `token` sets, exactly or as an abbreviation argparse would expand to it."""
    name = flag_name(token)
    if name is None:
        return None
    abbreviation = name.startswith("--") and len(name) > 3 and name not in REAL_FLAGS_THAT_PREFIX_REFUSED_ONES
    for reserved in REFUSED_FLAGS:
        for spelling in reserved.spellings:
            if name == spelling or (abbreviation and spelling.startswith(name)):
                return reserved
    return None


def refused_variable(name: str) -> str | None:
    """Why the container refuses environment variable `name`, or ``None`` when it may be set."""
    if name in CODE_LOADING_VARIABLES:
        return CODE_LOADING_VARIABLES[name]
    if name in TENANT_BOUNDARY_VARIABLES:
        return TENANT_BOUNDARY_VARIABLES[name]
    for prefix, reason in CODE_LOADING_VARIABLE_PREFIXES.items():
        if name.startswith(prefix):
            return reason
    return None


OFFLINE_ENVIRONMENT: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_PLUGINS": "",
}
"""What the launcher sets before vLLM starts: no hub access, no usage statistics, no plugins.
(The hub and statistics settings may be overridden on purpose; `VLLM_PLUGINS` may not.)"""
