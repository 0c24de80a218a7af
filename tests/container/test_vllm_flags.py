"""The launcher's knowledge of vLLM's command line, checked against the real parser of the pinned vLLM.

The launcher avoids importing vLLM (seconds of torch import at every container start); these
tests make sure that what it assumes is exactly what vLLM 0.31 does, and that every command it
builds (including from what the construct's `VllmOptions` renders) parses.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from adapter_server import vllm_flags
from adapter_server.launch import resolve_launch
from cdk_adapters.contract import serving_env
from cdk_adapters.contract.serving_image import SERVING_PORT
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.hosting.vllm_options import VllmOptions


@pytest.fixture(scope="module")
def parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm-api-server"))


def _parse(parser, env: dict[str, str], tmp_path: Path) -> argparse.Namespace:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    model_dir = tmp_path / "opt-ml-model"
    model_dir.mkdir(exist_ok=True)
    plan = resolve_launch(env, python="python", no_custom_code_dir=empty, model_dir=model_dir)
    assert list(plan.command[:3]) == ["python", "-m", vllm_flags.VLLM_MODULE]
    return parser.parse_args(list(plan.command[3:]))


def test_store_true_only_flags_are_exactly_vllms(parser):
    store_true = {action.option_strings[0] for action in parser._actions if isinstance(action, argparse._StoreTrueAction)}
    assert store_true == vllm_flags.STORE_TRUE_ONLY_FLAGS


def _action(parser, flag: str) -> argparse.Action:
    return next(action for action in parser._actions if flag in action.option_strings)


def test_numeric_flags_are_numbers_in_vllms_parser(parser):
    for flag in vllm_flags.INTEGER_FLAGS:
        convert = _action(parser, flag).type
        assert convert("4") == 4, flag
        with pytest.raises((ValueError, argparse.ArgumentTypeError)):
            convert("abc")
    for flag in vllm_flags.FLOAT_FLAGS:
        assert _action(parser, flag).type("0.5") == 0.5, flag
    assert _action(parser, "--max-lora-rank").choices == list(ALLOWED_MAX_LORA_RANKS)


def test_every_other_boolean_flag_has_a_no_form(parser):
    booleans = [a for a in parser._actions if isinstance(a, argparse.BooleanOptionalAction)]
    assert len(booleans) > 50
    for action in booleans:
        positive = next(o for o in action.option_strings if not o.startswith("--no-"))
        assert "--no-" + positive[2:] in action.option_strings


def test_default_command_parses_to_the_contract(parser, tmp_path):
    args = _parse(parser, {}, tmp_path)
    assert args.model == str(tmp_path / "opt-ml-model") and args.port == SERVING_PORT
    assert args.enable_lora is True
    assert args.api_server_count == 1
    assert args.middleware == [vllm_flags.MIDDLEWARE_OBJECT]
    assert args.enable_per_request_metrics is True


def test_booleans_both_ways_integers_and_json_reach_vllm(parser, tmp_path):
    args = _parse(
        parser,
        {
            "CDK_ADAPTERS_VLLM_ENABLE_PREFIX_CACHING": "false",
            "CDK_ADAPTERS_VLLM_ENFORCE_EAGER": "true",
            "CDK_ADAPTERS_VLLM_DISABLE_LOG_STATS": "false",
            "SM_VLLM_TRUST_REMOTE_CODE": "false",
            "CDK_ADAPTERS_VLLM_MAX_LORAS": "4",
            "CDK_ADAPTERS_VLLM_GPU_MEMORY_UTILIZATION": "0.8",
            "CDK_ADAPTERS_VLLM_OVERRIDE_GENERATION_CONFIG": '{"temperature": 0.5}',
            serving_env.BASE_MODEL_ID: "org/model",
            serving_env.EXTRA_ARGS: '["--seed", "7"]',
        },
        tmp_path,
    )
    assert args.enable_prefix_caching is False
    assert args.enforce_eager is True
    assert args.disable_log_stats is False
    assert args.trust_remote_code is False
    assert args.max_loras == 4
    assert args.gpu_memory_utilization == 0.8
    assert args.override_generation_config == {"temperature": 0.5}
    assert args.served_model_name == ["org/model"]
    assert args.seed == 7
    assert args.middleware == [vllm_flags.MIDDLEWARE_OBJECT]  # only ours: more is refused


def test_what_the_construct_renders_is_what_vllm_accepts(parser, tmp_path):
    options = VllmOptions(
        max_loras=3,
        max_cpu_loras=6,
        max_lora_rank=64,
        max_model_len=4096,
        gpu_memory_utilization=0.9,
        dtype="bfloat16",
        limit_mm_per_prompt={"image": 2},
        enforce_eager=False,
        extra_args=("--enable-prefix-caching",),
    )
    assert options.problems("test") == []
    args = _parse(parser, options.environment(), tmp_path)
    assert (args.max_loras, args.max_cpu_loras, args.max_lora_rank, args.max_model_len) == (3, 6, 64, 4096)
    assert args.dtype == "bfloat16" and args.enforce_eager is False
    assert args.limit_mm_per_prompt == {"image": 2}
    assert args.enable_prefix_caching is True


def test_vision_language_options_render_to_what_vllm_accepts(parser, tmp_path):
    bitsandbytes = VllmOptions(
        enable_tower_connector_lora=True,
        quantization="bitsandbytes",
        load_format="bitsandbytes",
        dtype="bfloat16",
        limit_mm_per_prompt={"image": 1},
    )
    assert bitsandbytes.problems("test") == []
    args = _parse(parser, bitsandbytes.environment(), tmp_path)
    assert args.enable_tower_connector_lora is True
    assert (args.quantization, args.load_format, args.dtype) == ("bitsandbytes", "bitsandbytes", "bfloat16")
    off = _parse(parser, VllmOptions(enable_tower_connector_lora=False).environment(), tmp_path)
    assert off.enable_tower_connector_lora is False
    # allow_vision_modules turns the flag on unless it is set.
    from cdk_adapters.endpoint.serving_policy import ServingPolicy

    env, problems = ServingPolicy(allow_vision_modules=True).render(VllmOptions(), "test")
    assert problems == [] and _parse(parser, env, tmp_path).enable_tower_connector_lora is True
    env, _ = ServingPolicy(allow_vision_modules=True).render(VllmOptions(enable_tower_connector_lora=False), "test")
    assert _parse(parser, env, tmp_path).enable_tower_connector_lora is False


def test_vision_language_options_are_validated():
    problems = VllmOptions(enable_tower_connector_lora="yes", quantization="bitsandbytes", load_format="auto", dtype="").problems(
        "ep"
    )
    assert {(p.field, p.message.split(" ")[0]) for p in problems} >= {
        ("vllm.enable_tower_connector_lora", "must"),
        ("vllm.load_format", "quantization"),
        ("vllm.dtype", "must"),
    }


def test_every_refused_flag_is_one_of_vllms_and_nothing_else_is_refused(parser):
    from cdk_adapters.contract import reserved_config

    options = {option for action in parser._actions for option in action.option_strings}
    refused = {spelling for flag in reserved_config.REFUSED_FLAGS for spelling in flag.spellings}
    assert refused <= options, refused - options
    # Real flags that prefix a refused one are exact names, never taken for its abbreviation...
    prefixes = {o for o in options for s in refused if o != s and o.startswith("--") and s.startswith(o)}
    assert prefixes == reserved_config.REAL_FLAGS_THAT_PREFIX_REFUSED_ONES
    # ...and no other flag of vLLM's is refused by accident.
    assert {o for o in options - refused if reserved_config.refused_flag(o)} == set()
    # An abbreviation argparse would expand to a refused flag is refused like the flag.
    assert parser.parse_args(["--trust-remote", "--model", "m"]).trust_remote_code is True
    assert reserved_config.refused_flag("--trust-remote").flag == "--trust-remote-code"
