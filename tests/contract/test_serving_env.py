"""The serving environment is encoded by the construct and decoded by the container from one module.

Each case renders with the construct's own types (`VllmOptions`, `ServingPolicy`) and decodes with
the container's own readers (`ServingSettings`, the launcher), so a rule or a name that drifted on
one side fails here.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from adapter_server.launch import resolve_launch
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import serving_env
from cdk_adapters.endpoint.serving_policy import ServingPolicy
from cdk_adapters.hosting.vllm_options import VllmOptions


@pytest.mark.parametrize(
    "policy",
    [
        ServingPolicy(),
        ServingPolicy(allow_base_model=True, base_model_id="org/base"),
        ServingPolicy(allow_vision_modules=True, base_model_id="org/vlm", base_model_revision="0123abc"),
    ],
)
def test_what_the_construct_renders_the_container_reads_back(policy):
    env, problems = policy.render(VllmOptions(), "endpoint")
    assert problems == []
    settings, decode_problems = ServingSettings.from_environ(env)
    assert decode_problems == []
    assert (settings.allow_base_model, settings.allow_vision_modules, settings.base_model_id, settings.base_model_revision) == (
        policy.allow_base_model,
        policy.allow_vision_modules,
        policy.base_model_id,
        policy.base_model_revision,
    )


def test_a_revision_needs_an_id_on_both_sides_by_the_same_rule():
    _, problems = ServingPolicy(base_model_revision="0123abc").render(VllmOptions(), "endpoint")
    assert [(p.subject, p.field, p.message) for p in problems] == [
        ("endpoint", "base_model.revision", serving_env.revision_problem(None, "0123abc", "base_model.model_id"))
    ]
    assert "without base_model.model_id, the model it is a revision of; set both or neither" in problems[0].message
    _, problems = ServingSettings.from_environ({serving_env.BASE_MODEL_REVISION: "0123abc"})
    assert [(p.subject, p.field, p.message) for p in problems] == [
        (serving_env.BASE_MODEL_REVISION, "value", serving_env.revision_problem(None, "0123abc", serving_env.BASE_MODEL_ID))
    ]
    assert serving_env.BASE_MODEL_ID in problems[0].message
    for identity in [(None, None), ("org/base", None), ("org/base", "0123abc")]:
        assert serving_env.revision_problem(*identity, "base_model_id") is None


def test_every_typed_option_has_one_variable_and_the_launcher_reads_it_as_its_flag(tmp_path):
    for option in fields(VllmOptions):
        if option.name == "extra_args":
            continue
        variable = serving_env.flag_variable(option.name)
        flag = "--" + option.name.replace("_", "-")
        assert (variable.startswith(serving_env.VLLM_FLAG_PREFIX), serving_env.variable_flag(variable)) == (True, flag)
    (tmp_path / "empty").mkdir()
    options = VllmOptions(
        max_loras=2, max_cpu_loras=6, enforce_eager=True, limit_mm_per_prompt={"image": 1}, extra_args=("--seed", "7")
    )
    plan = resolve_launch(options.environment(), python="python", no_custom_code_dir=tmp_path / "empty", model_dir=tmp_path)
    command = list(plan.command)
    for tokens in (["--max-loras", "2"], ["--max-cpu-loras", "6"], ["--limit-mm-per-prompt", '{"image":1}'], ["--seed", "7"]):
        start = command.index(tokens[0])
        assert command[start : start + len(tokens)] == tokens
    assert "--enforce-eager" in command


def test_extra_arguments_round_trip_and_a_bad_value_names_the_variable():
    args = ["--seed", "7", "--enable-prefix-caching"]
    assert serving_env.decode_extra_args({serving_env.EXTRA_ARGS: serving_env.encode_extra_args(args)}) == (args, [])
    for raw in ("[unclosed", '{"a": 1}', "[1, 2]"):
        extra, problems = serving_env.decode_extra_args({serving_env.EXTRA_ARGS: raw})
        assert (extra, [(p.subject, p.field) for p in problems]) == ([], [(serving_env.EXTRA_ARGS, "value")])
