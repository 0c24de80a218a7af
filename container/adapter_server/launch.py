"""The container's entrypoint: environment in, one vLLM command line out, then `exec`.

SageMaker starts the image as ``docker run <image> serve``. The construct configures vLLM
through ``CDK_ADAPTERS_VLLM_<FLAG>`` variables (AWS's ``SM_VLLM_<FLAG>`` convention is read too,
with lower precedence) and ``CDK_ADAPTERS_EXTRA_ARGS``. Settings SageMaker's contract depends on
(port 8080, LoRA on, runtime adapter loading, one API server process, our middleware) are fixed:
configuration may repeat them but never contradict them. Every problem is reported at once,
before vLLM spends a minute loading the model.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adapter_server import vllm_flags
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import reserved_config, serving_env, serving_image
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.problems import ConfigurationError, Problem

_FLAG_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SECRET_SUFFIXES = ("-key", "-token", "-secret", "-password")
_STANDARDS_MODEL_PATH = "SAGEMAKER_MODEL_PATH"
"""Where AWS's standards library looks for `model.py` to import at start-up."""


@dataclass(frozen=True)
class LaunchPlan:
    """The resolved vLLM command and the environment it runs with."""

    command: tuple[str, ...]
    environment: Mapping[str, str] = field(repr=False)

    def printable_command(self) -> str:
        """The command line with secret-looking flag values masked, for the start-up log."""
        shown: list[str] = []
        hide_next = False
        for token in self.command:
            if hide_next:
                shown.append("***")
                hide_next = False
                continue
            name, has_value, _ = token.partition("=")
            if name.startswith("--") and name.endswith(_SECRET_SUFFIXES):
                if has_value:
                    shown.append(f"{name}=***")
                else:
                    shown.append(token)
                    hide_next = True
                continue
            shown.append(token)
        return shlex.join(shown)


def resolve_launch(
    environ: Mapping[str, str],
    *,
    python: str = sys.executable,
    no_custom_code_dir: Path | None = None,
    model_dir: Path = Path(serving_image.MODEL_DIR),
) -> LaunchPlan:
    """Turn the container environment into a vLLM command; raise `ConfigurationError` listing every problem.

    `model_dir` is where SageMaker puts the model, served when no model is configured.
    """
    problems: list[Problem] = []
    _, settings_problems = ServingSettings.from_environ(environ)
    problems.extend(settings_problems)

    _check_variables(environ, problems)
    sources: dict[str, str] = {}
    flags = _flags_from_environment(environ, problems, sources)
    model = flags.pop(vllm_flags.MODEL_FLAG, None)
    model_value = model[1] if model else str(model_dir)
    _check_model(model_value, configured=model is not None, environ=environ, problems=problems)
    _check_port(flags.pop(vllm_flags.PORT_FLAG, None), problems)
    for fixed in vllm_flags.FIXED_FLAGS:
        _check_fixed(fixed, flags.pop(fixed.flag, None), problems)
    if flags.pop(vllm_flags.SERVED_MODEL_NAME_FLAG, None) is not None:
        problems.append(
            Problem(
                serving_env.flag_variable(vllm_flags.SERVED_MODEL_NAME_FLAG),
                "name",
                f"the container serves the base model under {serving_env.BASE_MODEL_ID}; set that instead",
            )
        )
    for flag in sorted(flags):
        reserved = reserved_config.refused_flag(flags[flag][0]) if flags[flag] else None
        if reserved is not None:
            problems.append(Problem(sources[flag], "name", f"is refused ({reserved.flag}: {reserved.reason})"))
    base_model_id = environ.get(serving_env.BASE_MODEL_ID, "").strip()
    metrics = flags.pop(vllm_flags.PER_REQUEST_METRICS_FLAG, None)
    extra = _extra_args(environ, problems)

    port = _listen_port(environ, problems)
    host = environ.get(serving_env.LISTEN_HOST, "").strip()
    state_dir = environ.get(serving_env.STATE_DIR, "").strip()
    if state_dir:
        _check_writable_dir(Path(state_dir), serving_env.STATE_DIR, problems)
    custom_code_dir = _empty_dir_for_standards_library(environ, no_custom_code_dir, problems)

    if problems:
        raise ConfigurationError(problems, "the serving container cannot start")
    if custom_code_dir is None:
        custom_code_dir = Path(tempfile.mkdtemp(prefix="cdk-adapters-no-custom-code-"))

    command: list[str] = [python, "-m", vllm_flags.VLLM_MODULE]
    command += [vllm_flags.MODEL_FLAG, model_value, vllm_flags.PORT_FLAG, str(port)]
    if host:
        command += [vllm_flags.HOST_FLAG, host]
    if base_model_id:
        command += [vllm_flags.SERVED_MODEL_NAME_FLAG, base_model_id]
    for fixed in vllm_flags.FIXED_FLAGS:
        command += [fixed.flag] if fixed.fixed_value is None else [fixed.flag, fixed.fixed_value]
    command += [vllm_flags.MIDDLEWARE_FLAG, vllm_flags.MIDDLEWARE_OBJECT]
    command += list(metrics) if metrics is not None else [vllm_flags.PER_REQUEST_METRICS_FLAG]
    for flag in sorted(flags):
        command += flags[flag]
    command += extra

    environment = {**reserved_config.OFFLINE_ENVIRONMENT, **environ}
    environment["VLLM_PLUGINS"] = reserved_config.OFFLINE_ENVIRONMENT["VLLM_PLUGINS"]
    environment[serving_env.RUNTIME_LORA_UPDATING] = "true"
    environment[_STANDARDS_MODEL_PATH] = str(custom_code_dir)
    # vLLM accepts n up to 16,384 by default; no request may ask for more sequences than one batch.
    environment[MAX_N_SEQUENCES_VARIABLE] = str(_engine_batch(flags, extra))
    return LaunchPlan(command=tuple(command), environment=environment)


MAX_N_SEQUENCES_VARIABLE = "VLLM_MAX_N_SEQUENCES"
DEFAULT_ENGINE_BATCH = 256
"""vLLM 0.31's default ``--max-num-seqs`` on GPUs under 70 GB (the largest it picks for ours)."""


def _engine_batch(flags: Mapping[str, list[str]], extra: list[str]) -> int:
    """The engine's running-batch size as configured (``--max-num-seqs``), else vLLM's default."""
    tokens = [*(token for values in flags.values() for token in values), *extra]
    for index, token in enumerate(tokens):
        if token.startswith("--max-num-seqs="):
            value = token.split("=", 1)[1]
        elif token == "--max-num-seqs" and index + 1 < len(tokens):
            value = tokens[index + 1]
        else:
            continue
        if value.isdigit() and int(value) > 0:
            return int(value)
    return DEFAULT_ENGINE_BATCH


def _check_variables(environ: Mapping[str, str], problems: list[Problem]) -> None:
    """Variables that would make the server run code named by configuration are refused outright."""
    for name in sorted(environ):
        reason = reserved_config.refused_variable(name)
        if reason is not None:
            problems.append(Problem(name, "name", f"is refused: {reason}; model artifacts and configuration never run code here"))


def _flags_from_environment(environ: Mapping[str, str], problems: list[Problem], sources: dict[str, str]) -> dict[str, list[str]]:
    """``--flag`` -> its tokens (and, in `sources`, the variable it came from);
    ``CDK_ADAPTERS_VLLM_*`` wins over ``SM_VLLM_*`` for the same flag."""
    flags: dict[str, list[str]] = {}
    for prefix in (serving_env.SAGEMAKER_VLLM_FLAG_PREFIX, serving_env.VLLM_FLAG_PREFIX):
        for variable in sorted(key for key in environ if key.startswith(prefix)):
            flag = serving_env.variable_flag(variable, prefix)
            if not _FLAG_NAME.match(flag[2:]):
                problems.append(Problem(variable, "name", f"does not name a vLLM flag (expected {prefix}<FLAG_NAME>)"))
                continue
            tokens = _flag_tokens(flag, environ[variable], variable, problems)
            if tokens is not None:
                flags[flag] = tokens
                sources[flag] = variable
    return flags


def _flag_tokens(flag: str, raw: str, variable: str, problems: list[Problem]) -> list[str] | None:
    value = raw.strip()
    if value == "":
        problems.append(Problem(variable, "value", "is empty; unset the variable to use vLLM's default"))
        return None
    number_problem = _number_problem(flag, value)
    if number_problem is not None:
        problems.append(Problem(variable, "value", number_problem))
        return None
    lowered = value.lower()
    if lowered == "true":
        return [flag]
    if lowered == "false":
        if flag in vllm_flags.STORE_TRUE_ONLY_FLAGS:
            return []  # vLLM has no --no- form for these: off means absent.
        return ["--no-" + flag[2:]]
    return [flag, value]


def _number_problem(flag: str, value: str) -> str | None:
    """Why `value` is not what vLLM's parser reads for a numeric `flag` (None when it is, or when
    `flag` is not numeric)."""
    if flag in vllm_flags.INTEGER_FLAGS:
        minimum = vllm_flags.INTEGER_FLAGS[flag]
        if not re.fullmatch(r"-?[0-9]+", value):
            return f"must be a whole number for {flag}, got {value!r}"
        if minimum is not None and int(value) < minimum:
            return f"must be at least {minimum} for {flag}, got {value}"
        if flag == "--max-lora-rank" and int(value) not in ALLOWED_MAX_LORA_RANKS:
            return f"must be one of {', '.join(map(str, ALLOWED_MAX_LORA_RANKS))} for {flag} (vLLM's choices), got {value}"
    if flag in vllm_flags.FLOAT_FLAGS:
        try:
            float(value)
        except ValueError:
            return f"must be a number for {flag}, got {value!r}"
    return None


def _check_model(model: str, *, configured: bool, environ: Mapping[str, str], problems: list[Problem]) -> None:
    """A model directory that is not there would reach vLLM as a Hugging Face repo id, and fail
    a minute later in a long transformers traceback; say what is missing instead."""
    variable = serving_env.flag_variable(vllm_flags.MODEL_FLAG)
    if not configured:
        if not Path(model).is_dir():
            problems.append(
                Problem(
                    variable,
                    "value",
                    f"is not set, and {model} (where SageMaker puts the model) does not exist; outside SageMaker "
                    f"(local mode) set {variable} to a model directory",
                )
            )
        return
    sagemaker_variable = serving_env.flag_variable(vllm_flags.MODEL_FLAG, serving_env.SAGEMAKER_VLLM_FLAG_PREFIX)
    if sagemaker_variable in environ and variable not in environ:
        variable = sagemaker_variable
    looks_local = model.startswith(("/", ".", "~")) or "\\" in model
    if looks_local and not Path(model).expanduser().exists():
        problems.append(Problem(variable, "value", f"{model} does not exist; give the model's directory"))


def _check_port(tokens: list[str] | None, problems: list[Problem]) -> None:
    if tokens is not None and tokens[1:] != [str(serving_image.SERVING_PORT)]:
        problems.append(
            Problem(
                serving_env.flag_variable(vllm_flags.PORT_FLAG),
                "value",
                f"SageMaker always sends requests to port {serving_image.SERVING_PORT}; remove this setting",
            )
        )


def _check_fixed(fixed: reserved_config.ReservedFlag, tokens: list[str] | None, problems: list[Problem]) -> None:
    expected = [fixed.flag] if fixed.fixed_value is None else [fixed.flag, fixed.fixed_value]
    if tokens is not None and tokens != expected:
        variable = serving_env.flag_variable(fixed.flag)
        shown = "true" if fixed.fixed_value is None else fixed.fixed_value
        problems.append(Problem(variable, "value", f"is fixed at {shown}: {fixed.reason}"))


def _extra_args(environ: Mapping[str, str], problems: list[Problem]) -> list[str]:
    extra, found = serving_env.decode_extra_args(environ)
    problems.extend(found)
    for token in extra:
        reserved = reserved_config.refused_flag(token)
        if reserved is not None:
            problems.append(
                Problem(
                    serving_env.EXTRA_ARGS,
                    token.split("=", 1)[0],
                    f"is refused ({reserved.flag}: {reserved.reason}); remove it from the extra arguments",
                )
            )
    return extra


def _listen_port(environ: Mapping[str, str], problems: list[Problem]) -> int:
    raw = environ.get(serving_env.LISTEN_PORT, "").strip()
    if not raw:
        return serving_image.SERVING_PORT
    if raw.isdigit() and 0 < int(raw) < 65536:
        return int(raw)
    problems.append(Problem(serving_env.LISTEN_PORT, "value", f"must be a TCP port number, got {raw!r}"))
    return serving_image.SERVING_PORT


def _check_writable_dir(path: Path, variable: str, problems: list[Problem]) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        problems.append(Problem(variable, "value", f"cannot create {path}: {error.strerror}"))
        return
    if not os.access(path, os.W_OK):
        problems.append(Problem(variable, "value", f"{path} is not writable by this user"))


def _empty_dir_for_standards_library(environ: Mapping[str, str], given: Path | None, problems: list[Problem]) -> Path | None:
    """An empty directory for ``SAGEMAKER_MODEL_PATH``: model artifacts must never run code here.

    ``None`` when none is configured: the caller makes a fresh one once nothing else is wrong.
    """
    configured = given
    if configured is None and environ.get(serving_env.NO_CUSTOM_CODE_DIR, "").strip():
        configured = Path(environ[serving_env.NO_CUSTOM_CODE_DIR].strip())
    if configured is None:
        return None
    if not configured.is_dir() or any(configured.iterdir()):
        problems.append(Problem(serving_env.NO_CUSTOM_CODE_DIR, "value", f"{configured} must be an existing empty directory"))
    return configured


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adapter_server [serve]``: log the resolved command once, then become vLLM."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["serve"]):
        print(f"usage: python -m adapter_server [serve]  (got {shlex.join(args)!r})", file=sys.stderr)
        return 2
    try:
        plan = resolve_launch(os.environ)
    except ConfigurationError as error:
        print(f"cdk-adapters: {error}", file=sys.stderr)
        return 78  # EX_CONFIG: SageMaker shows the container's exit and its log.
    model_code = Path(plan.command[plan.command.index(vllm_flags.MODEL_FLAG) + 1]) / "model.py"
    if model_code.is_file():
        print(
            f"cdk-adapters: ignoring {model_code}: model artifacts do not run code in this server",
            file=sys.stderr,
        )
    print(json.dumps({"event": "cdk_adapters.launch", "command": plan.printable_command()}), flush=True)
    os.execvpe(plan.command[0], list(plan.command), dict(plan.environment))  # never returns: this process becomes vLLM
