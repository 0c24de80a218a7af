"""One list of refused configuration, enforced by both sides: the construct at synth, the launcher at start.

Each case below is given to `VllmOptions` / `ServingPolicy` (what the construct renders) and to the
container's launcher (what it would refuse if someone configured the image by hand); both must
refuse exactly the same things, naming the same flag or variable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapter_server.launch import resolve_launch
from cdk_adapters.contract import reserved_config, serving_env
from cdk_adapters.endpoint.serving_policy import ServingPolicy
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import ConfigurationError

REFUSED_ARGS = [
    "--no-enable-lora",
    "--no_enable_lora",
    "--middleware",
    "--trust-remote-code",
    "--trust_remote_code",
    "--config",
    "--api-server-count=2",
    "-asc",
    "--port",
    "--tool-parser-plugin",
    "--worker-cls",
    "--middlew",
    "--trust-request-chat-template",
    "--no-trust-request-chat-template",
]
REFUSED_VARIABLES = [
    "CUSTOM_SCRIPT_FILENAME",
    "CUSTOM_FASTAPI_PING_HANDLER",
    "CUSTOM_PRE_PROCESS",
    "VLLM_SERVER_DEV_MODE",
    "VLLM_LORA_RESOLVER_CACHE_DIR",
    "VLLM_PLUGINS",
    "SAGEMAKER_TRANSFORMS_X",
    # the tenant boundary: a lost adapter answered by the base, one session store for every tenant
    "VLLM_SKIP_MODEL_NAME_VALIDATION",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS",
]


def launcher_refusals(environ: dict[str, str], tmp_path: Path) -> set[str]:
    (tmp_path / "empty").mkdir(exist_ok=True)
    with pytest.raises(ConfigurationError) as raised:
        resolve_launch(environ, python="python", no_custom_code_dir=tmp_path / "empty", model_dir=tmp_path)
    return {p.field if p.subject == serving_env.EXTRA_ARGS else p.subject for p in raised.value.problems}


@pytest.mark.parametrize("arg", REFUSED_ARGS)
def test_an_extra_argument_is_refused_at_synth_and_at_start(arg, tmp_path):
    problems = VllmOptions(extra_args=(arg, "x")).problems("endpoint")
    assert [(p.field, p.message.split(" is refused")[0]) for p in problems] == [("vllm.extra_args", arg.split("=")[0])]
    rendered = VllmOptions(extra_args=(arg, "x")).environment()
    assert launcher_refusals(rendered, tmp_path) == {arg.split("=")[0]}


@pytest.mark.parametrize("variable", REFUSED_VARIABLES)
def test_a_code_loading_variable_is_refused_at_synth_and_at_start(variable, tmp_path):
    _, problems = ServingPolicy(environment={variable: "x"}).render(VllmOptions(), "endpoint")
    assert [(p.field, "is refused by the serving container" in p.message) for p in problems] == [
        (f"environment.{variable}", True)
    ]
    assert launcher_refusals({variable: "x"}, tmp_path) == {variable}


def test_aws_convention_flags_are_not_a_side_door_at_synth():
    _, problems = ServingPolicy(environment={"SM_VLLM_TRUST_REMOTE_CODE": "true"}).render(VllmOptions(), "endpoint")
    assert [p.field for p in problems] == ["environment.SM_VLLM_TRUST_REMOTE_CODE"]


def test_what_the_construct_renders_by_default_starts(tmp_path):
    env, problems = ServingPolicy(base_model_id="org/m").render(VllmOptions(extra_args=("--enable-prefix-caching",)), "e")
    assert problems == []
    (tmp_path / "empty").mkdir()
    plan = resolve_launch(env, python="python", no_custom_code_dir=tmp_path / "empty", model_dir=tmp_path)
    assert json.loads(env[serving_env.EXTRA_ARGS]) == ["--enable-prefix-caching"]
    assert "--enable-prefix-caching" in plan.command


def test_every_reserved_spelling_is_refused():
    for flag in reserved_config.REFUSED_FLAGS:
        for spelling in flag.spellings:
            assert reserved_config.refused_flag(spelling) is flag
            assert reserved_config.refused_flag(spelling + "=1") is flag
