"""The entrypoint's mapping from the container environment to one vLLM command line."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapter_server.launch import LaunchPlan, resolve_launch
from cdk_adapters.contract import serving_env, serving_image
from cdk_adapters.problems import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAD = ["python", "-m", "vllm.entrypoints.openai.api_server"]


def launch(env: dict[str, str], tmp_path: Path) -> LaunchPlan:
    """Resolve `env` as if SageMaker had put a model at the default path (here a temporary one)."""
    empty = tmp_path / "no-custom-code"
    empty.mkdir(exist_ok=True)
    model_dir = tmp_path / "opt-ml-model"
    model_dir.mkdir(exist_ok=True)
    return resolve_launch(env, python="python", no_custom_code_dir=empty, model_dir=model_dir)


def flag_tokens(plan: LaunchPlan) -> list[str]:
    """The command after the fixed head and the fixed flags every launch has."""
    return list(plan.command[len(HEAD) :])


def test_defaults_follow_the_sagemaker_contract(tmp_path):
    assert inspect.signature(resolve_launch).parameters["model_dir"].default == Path(serving_image.MODEL_DIR)
    plan = launch({}, tmp_path)
    assert list(plan.command) == [
        *HEAD,
        "--model",
        str(tmp_path / "opt-ml-model"),
        "--port",
        str(serving_image.SERVING_PORT),
        "--enable-lora",
        "--api-server-count",
        "1",
        "--middleware",
        "adapter_server.middleware.SageMakerAdapterMiddleware",
        "--enable-per-request-metrics",
    ]
    assert plan.environment[serving_env.RUNTIME_LORA_UPDATING] == "true"
    # The standards library looks for model.py in an empty directory, never in the model artifacts.
    assert plan.environment["SAGEMAKER_MODEL_PATH"] == str(tmp_path / "no-custom-code")


def test_values_map_to_flags_booleans_both_ways(tmp_path):
    plan = launch(
        {
            "CDK_ADAPTERS_VLLM_MAX_LORAS": "4",
            "CDK_ADAPTERS_VLLM_GPU_MEMORY_UTILIZATION": "0.85",
            "CDK_ADAPTERS_VLLM_LIMIT_MM_PER_PROMPT": '{"image":2}',
            "CDK_ADAPTERS_VLLM_DTYPE": "bfloat16",
            "CDK_ADAPTERS_VLLM_ENFORCE_EAGER": "true",
            "CDK_ADAPTERS_VLLM_ENABLE_PREFIX_CACHING": "FALSE",
            "CDK_ADAPTERS_VLLM_DISABLE_LOG_STATS": "false",  # no --no- form in vLLM: off means absent
            "CDK_ADAPTERS_VLLM_ENABLE_PER_REQUEST_METRICS": "false",
            "CDK_ADAPTERS_VLLM_MODEL": str(tmp_path),
            serving_env.EXTRA_ARGS: json.dumps(["--seed", "7"]),
        },
        tmp_path,
    )
    tokens = flag_tokens(plan)
    assert tokens[:2] == ["--model", str(tmp_path)]
    assert tokens[-2:] == ["--seed", "7"]
    assert "--max-loras 4" in " ".join(tokens)
    assert "--gpu-memory-utilization 0.85" in " ".join(tokens)
    assert tokens[tokens.index("--limit-mm-per-prompt") + 1] == '{"image":2}'
    assert "--dtype bfloat16" in " ".join(tokens)
    assert "--enforce-eager" in tokens
    assert "--no-enable-prefix-caching" in tokens
    assert "--no-enable-per-request-metrics" in tokens and "--enable-per-request-metrics" not in tokens
    assert not any("log-stats" in token for token in tokens)


def test_our_variables_win_over_sagemaker_convention(tmp_path):
    plan = launch({"SM_VLLM_MAX_LORAS": "8", "CDK_ADAPTERS_VLLM_MAX_LORAS": "3", "SM_VLLM_MAX_NUM_SEQS": "16"}, tmp_path)
    joined = " ".join(plan.command)
    assert "--max-loras 3" in joined and "--max-loras 8" not in joined
    assert "--max-num-seqs 16" in joined


def test_base_model_id_becomes_the_served_model_name(tmp_path):
    plan = launch({serving_env.BASE_MODEL_ID: "meta-llama/Llama-3.1-8B-Instruct"}, tmp_path)
    tokens = list(plan.command)
    assert tokens[tokens.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"


def test_fixed_settings_may_be_repeated_but_not_contradicted(tmp_path):
    plan = launch(
        {"CDK_ADAPTERS_VLLM_PORT": "8080", "SM_VLLM_ENABLE_LORA": "true", "CDK_ADAPTERS_VLLM_API_SERVER_COUNT": "1"},
        tmp_path,
    )
    assert plan.command.count("--enable-lora") == 1 and plan.command.count("--port") == 1


def test_every_problem_is_reported_at_once_and_nothing_starts(tmp_path):
    with pytest.raises(ConfigurationError) as raised:
        launch(
            {
                "CDK_ADAPTERS_VLLM_PORT": "9000",
                "CDK_ADAPTERS_VLLM_ENABLE_LORA": "false",
                "SM_VLLM_API_SERVER_COUNT": "4",
                "CDK_ADAPTERS_VLLM_SERVED_MODEL_NAME": "other",
                "CDK_ADAPTERS_VLLM_MAX_LORAS": "",
                "CDK_ADAPTERS_VLLM_": "x",
                serving_env.EXTRA_ARGS: json.dumps(["--port=9000", "--enforce-eager", "-asc", "2"]),
                serving_env.ALLOW_BASE_MODEL: "yes",
                serving_env.BASE_MODEL_REVISION: "abc",
                "CDK_ADAPTERS_LISTEN_PORT": "http",
            },
            tmp_path,
        )
    found = {(p.subject, p.field) for p in raised.value.problems}
    assert found == {
        ("CDK_ADAPTERS_VLLM_PORT", "value"),
        ("CDK_ADAPTERS_VLLM_ENABLE_LORA", "value"),
        ("CDK_ADAPTERS_VLLM_API_SERVER_COUNT", "value"),
        ("CDK_ADAPTERS_VLLM_SERVED_MODEL_NAME", "name"),
        ("CDK_ADAPTERS_VLLM_MAX_LORAS", "value"),
        ("CDK_ADAPTERS_VLLM_", "name"),
        (serving_env.EXTRA_ARGS, "--port"),
        (serving_env.EXTRA_ARGS, "-asc"),
        (serving_env.ALLOW_BASE_MODEL, "value"),
        (serving_env.BASE_MODEL_REVISION, "value"),
        ("CDK_ADAPTERS_LISTEN_PORT", "value"),
    }
    message = str(raised.value)
    assert "SageMaker always sends requests to port 8080" in message
    assert "each API server process keeps its own adapter list" in message


@pytest.mark.parametrize("raw", ['"--seed 7"', '{"seed": 7}', "[1, 2]", "not json"])
def test_extra_args_must_be_a_json_list_of_strings(tmp_path, raw):
    with pytest.raises(ConfigurationError) as raised:
        launch({serving_env.EXTRA_ARGS: raw}, tmp_path)
    assert [p.subject for p in raised.value.problems] == [serving_env.EXTRA_ARGS]


def test_state_dir_must_be_writable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigurationError) as raised:
        launch({serving_env.STATE_DIR: str(blocker / "state")}, tmp_path)
    assert [(p.subject, p.field) for p in raised.value.problems] == [(serving_env.STATE_DIR, "value")]


def test_the_no_custom_code_directory_must_be_empty(tmp_path):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "model.py").write_text("print('hello')\n")
    with pytest.raises(ConfigurationError) as raised:
        resolve_launch({"CDK_ADAPTERS_NO_CUSTOM_CODE_DIR": str(occupied)}, python="python", model_dir=tmp_path)
    assert [(p.subject, p.field) for p in raised.value.problems] == [("CDK_ADAPTERS_NO_CUSTOM_CODE_DIR", "value")]
    assert "must be an existing empty directory" in str(raised.value)


def test_printed_command_masks_secrets(tmp_path):
    plan = launch({serving_env.EXTRA_ARGS: json.dumps(["--api-key", "s3cr3t", "--hf-token=abc", "--seed", "1"])}, tmp_path)
    shown = plan.printable_command()
    assert "s3cr3t" not in shown and "abc" not in shown
    assert "--api-key '***'" in shown and "'--hf-token=***'" in shown and "--seed 1" in shown
    assert "s3cr3t" in plan.command  # only the log line is masked


def _run_entrypoint(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_ADAPTERS_", "SM_VLLM_"))}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "container")])
    return subprocess.run(
        [sys.executable, "-m", "adapter_server", *args], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_entrypoint_refuses_bad_configuration_before_starting_vllm(tmp_path):
    result = _run_entrypoint(
        ["serve"],
        {"CDK_ADAPTERS_VLLM_MODEL": str(tmp_path), "CDK_ADAPTERS_VLLM_PORT": "9000", serving_env.ALLOW_BASE_MODEL: "maybe"},
    )
    assert result.returncode == 78
    assert "the serving container cannot start (2 problem(s))" in result.stderr
    assert "CDK_ADAPTERS_VLLM_PORT: value" in result.stderr
    assert "CDK_ADAPTERS_ALLOW_BASE_MODEL: value: must be 'true' or 'false'" in result.stderr
    assert "cdk_adapters.launch" not in result.stdout


def test_entrypoint_accepts_only_sagemakers_serve_argument():
    result = _run_entrypoint(["train"], {})
    assert result.returncode == 2
    assert "usage: python -m adapter_server [serve]" in result.stderr


def test_local_short_form_without_a_model_exits_78_with_the_launchers_message():
    # README's local mode, run without CDK_ADAPTERS_VLLM_MODEL: /opt/ml/model exists only on SageMaker.
    result = _run_entrypoint(["serve"], {})
    assert result.returncode == 78, result.stderr
    assert "cdk-adapters: the serving container cannot start (1 problem(s))" in result.stderr
    assert f"CDK_ADAPTERS_VLLM_MODEL: value: is not set, and {serving_image.MODEL_DIR}" in result.stderr
    assert "set CDK_ADAPTERS_VLLM_MODEL to a model directory" in result.stderr
    assert "Traceback" not in result.stderr and "cdk_adapters.launch" not in result.stdout


def test_a_model_path_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(ConfigurationError) as raised:
        launch({"SM_VLLM_MODEL": str(tmp_path / "missing")}, tmp_path)
    assert [(p.subject, p.field) for p in raised.value.problems] == [("SM_VLLM_MODEL", "value")]
    assert f"{tmp_path / 'missing'} does not exist" in str(raised.value)
    # A Hugging Face id is vLLM's to resolve; only paths are checked here.
    assert "--model" in launch({"CDK_ADAPTERS_VLLM_MODEL": "org/model"}, tmp_path).command


def test_numeric_flags_are_checked_by_the_launcher_not_vllms_parser(tmp_path):
    with pytest.raises(ConfigurationError) as raised:
        launch(
            {
                "CDK_ADAPTERS_VLLM_MAX_LORAS": "abc",
                "CDK_ADAPTERS_VLLM_MAX_CPU_LORAS": "0",
                "CDK_ADAPTERS_VLLM_MAX_LORA_RANK": "24",
                "SM_VLLM_TENSOR_PARALLEL_SIZE": "true",
                "CDK_ADAPTERS_VLLM_GPU_MEMORY_UTILIZATION": "most",
            },
            tmp_path,
        )
    messages = {p.subject: p.message for p in raised.value.problems}
    assert messages == {
        "CDK_ADAPTERS_VLLM_MAX_LORAS": "must be a whole number for --max-loras, got 'abc'",
        "CDK_ADAPTERS_VLLM_MAX_CPU_LORAS": "must be at least 1 for --max-cpu-loras, got 0",
        "CDK_ADAPTERS_VLLM_MAX_LORA_RANK": "must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512 for --max-lora-rank "
        "(vLLM's choices), got 24",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "must be a whole number for --tensor-parallel-size, got 'true'",
        "CDK_ADAPTERS_VLLM_GPU_MEMORY_UTILIZATION": "must be a number for --gpu-memory-utilization, got 'most'",
    }


def test_entrypoint_refuses_a_non_numeric_max_loras_with_exit_78(tmp_path):
    result = _run_entrypoint(["serve"], {"CDK_ADAPTERS_VLLM_MODEL": str(tmp_path), "CDK_ADAPTERS_VLLM_MAX_LORAS": "abc"})
    assert result.returncode == 78
    assert "CDK_ADAPTERS_VLLM_MAX_LORAS: value: must be a whole number for --max-loras, got 'abc'" in result.stderr


CODE_RUNNING_CONFIGURATION = {
    "CUSTOM_SCRIPT_FILENAME": "handler.py",
    "CUSTOM_FASTAPI_PING_HANDLER": "mod:ping",
    "CUSTOM_FASTAPI_MIDDLEWARE_THROTTLE": "mod:throttle",
    "CUSTOM_PRE_PROCESS": "mod:pre",
    "CUSTOM_POST_PROCESS": "mod:post",
    "VLLM_SERVER_DEV_MODE": "1",
    "VLLM_LORA_RESOLVER_CACHE_DIR": "/tmp",
    "VLLM_PLUGINS": "lora_filesystem_resolver",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
    "SAGEMAKER_TRANSFORMS_CREATE_SESSION_DEFAULTS": "{}",
    "SM_VLLM_TRUST_REMOTE_CODE": "true",
    "CDK_ADAPTERS_VLLM_MIDDLEWARE": "other.Middleware",
    "CDK_ADAPTERS_VLLM_TOOL_PARSER_PLUGIN": "/opt/ml/model/parser.py",
}


def test_configuration_that_would_run_code_is_refused_all_at_once(tmp_path):
    extra = [
        "--trust-remote-code",
        "--middleware",
        "x.Y",
        "--trust_remote_code",
        "--trust-remote",
        "--config=a.yaml",
        "--logits-processors",
        "m:C",
        "--worker-extension-cls=m.C",
        "--no-enable-lora",
        "--middlew",
        "x.Z",
    ]
    with pytest.raises(ConfigurationError) as raised:
        launch({**CODE_RUNNING_CONFIGURATION, serving_env.EXTRA_ARGS: json.dumps(extra)}, tmp_path)
    found = {(p.subject, p.field) for p in raised.value.problems}
    assert found == {(name, "name") for name in CODE_RUNNING_CONFIGURATION} | {
        (serving_env.EXTRA_ARGS, token.split("=")[0]) for token in extra if token.startswith("--")
    }
    message = str(raised.value)
    assert (
        "SM_VLLM_TRUST_REMOTE_CODE: name: is refused (--trust-remote-code: it runs Python code shipped with the model files)"
        in message
    )
    assert "--middlew: is refused (--middleware:" in message  # argparse would expand the abbreviation


def test_safe_spellings_of_those_flags_still_pass(tmp_path):
    plan = launch(
        {"SM_VLLM_TRUST_REMOTE_CODE": "false", serving_env.EXTRA_ARGS: json.dumps(["--reasoning-parser", "deepseek_r1"])},
        tmp_path,
    )
    assert "--no-trust-remote-code" in plan.command and "--reasoning-parser" in plan.command


def test_vllm_starts_offline_with_no_plugins(tmp_path):
    plan = launch({"HF_HUB_OFFLINE": "0"}, tmp_path)
    assert plan.environment["VLLM_PLUGINS"] == ""
    assert plan.environment["VLLM_NO_USAGE_STATS"] == "1" and plan.environment["DO_NOT_TRACK"] == "1"
    assert plan.environment["TRANSFORMERS_OFFLINE"] == "1"
    assert plan.environment["HF_HUB_OFFLINE"] == "0"  # an explicit choice is kept


def test_entrypoint_refuses_the_local_only_body_rule_on_a_public_listener(tmp_path):
    result = _run_entrypoint(["serve"], {"CDK_ADAPTERS_VLLM_MODEL": str(tmp_path), serving_env.LOCAL_BODY_NAMES_ADAPTER: "true"})
    assert result.returncode == 78
    assert f"{serving_env.LOCAL_BODY_NAMES_ADAPTER}: value: is for local runs only" in result.stderr


@pytest.mark.parametrize(
    "env, batch",
    [
        ({}, "256"),
        ({"CDK_ADAPTERS_VLLM_MAX_NUM_SEQS": "4"}, "4"),
        ({"CDK_ADAPTERS_EXTRA_ARGS": '["--max-num-seqs=12"]'}, "12"),
        ({"CDK_ADAPTERS_VLLM_MAX_NUM_SEQS": "8", "VLLM_MAX_N_SEQUENCES": "16384"}, "8"),
    ],
)
def test_no_request_may_ask_vllm_for_more_sequences_than_one_batch(tmp_path, env, batch):
    """vLLM takes ``n`` up to VLLM_MAX_N_SEQUENCES (16,384 by default): the launcher sets it to the
    engine's batch, over anything configured, so one request can never outsize the engine."""
    assert launch(env, tmp_path).environment["VLLM_MAX_N_SEQUENCES"] == batch
