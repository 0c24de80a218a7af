"""Typed vLLM engine options, rendered into the serving container's environment.

The container turns each ``CDK_ADAPTERS_VLLM_<FLAG>`` variable into ``--<flag>`` (see
`cdk_adapters.contract.serving_env`). Typing the options here means a wrong rank or a cache smaller than the
active set fails at synth, not an hour into an endpoint deployment. Standard-library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from cdk_adapters.contract import reserved_config, serving_env
from cdk_adapters.gate import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class VllmOptions:
    """vLLM engine settings for the base model and its LoRA adapters.

    Every option left ``None`` is not rendered, so vLLM's own default applies.
    """

    max_loras: int | None = 4
    """Adapters resident on the GPU at once (a batch mixes at most this many). Default 4."""
    max_cpu_loras: int | None = None
    """Adapters cached in host memory; must be >= `max_loras`. Default: vLLM's (= max_loras)."""
    max_lora_rank: int | None = VLLM_DEFAULT_MAX_LORA_RANK
    """Highest adapter rank accepted; one of `ALLOWED_MAX_LORA_RANKS`. Default 16 (vLLM's own)."""
    max_model_len: int | None = None
    """Context length in tokens. Default: the model's."""
    gpu_memory_utilization: float | None = None
    """Fraction of GPU memory vLLM may use, in (0, 1]. Default: vLLM's (0.9)."""
    dtype: str | None = None
    """``auto``, ``float16``, ``bfloat16``, ``float32``. Default: vLLM's (auto)."""
    quantization: str | None = None
    """e.g. ``awq``, ``gptq``, ``fp8``. Default: none."""
    tensor_parallel_size: int | None = None
    """GPUs per model copy; must equal the base component's accelerator count when set."""
    limit_mm_per_prompt: Mapping[str, int] | None = None
    """Vision-language models: items per prompt by modality, e.g. ``{"image": 2}``."""
    max_num_seqs: int | None = None
    """Requests in vLLM's running batch (``--max-num-seqs``); fair share lets this many into the
    engine at once. Default: vLLM's."""
    enforce_eager: bool | None = None
    """Skip CUDA graph capture (faster start, slower decode). Default: vLLM's (false)."""
    extra_args: tuple[str, ...] = field(default=())
    """Further vLLM flags, verbatim, e.g. ``("--enable-prefix-caching",)``."""

    # --- Vision-language models (kept together; `dtype` and `quantization` above complete the
    # BitsAndBytes trio ``quantization="bitsandbytes", load_format="bitsandbytes", dtype="bfloat16"``). ---
    enable_tower_connector_lora: bool | None = None
    """Apply LoRA to the vision tower and connector (vLLM's experimental multimodal LoRA). Default:
    on when the endpoint's `allow_vision_modules` is, off otherwise; without it vLLM ignores tower
    and connector LoRA weights, so the gate refuses adapters that have them."""
    load_format: str | None = None
    """How vLLM reads the weights, e.g. ``bitsandbytes`` for a prequantized BitsAndBytes checkpoint. Default: vLLM's (auto)."""

    def problems(self, subject: str) -> list[Problem]:
        """Every problem with these options; `subject` names the construct in messages."""
        found: list[Problem] = []

        def bad(name: str, message: str) -> None:
            found.append(Problem(subject, f"vllm.{name}", message))

        for name in ("max_loras", "max_cpu_loras", "max_model_len", "tensor_parallel_size", "max_num_seqs"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                bad(name, f"must be a positive integer, got {value!r}")
        if self.max_lora_rank is not None and (
            type(self.max_lora_rank) is not int or self.max_lora_rank not in ALLOWED_MAX_LORA_RANKS
        ):
            allowed = ", ".join(map(str, ALLOWED_MAX_LORA_RANKS))
            bad("max_lora_rank", f"vLLM accepts only {allowed}; got {self.max_lora_rank!r}")
        if isinstance(self.max_loras, int) and isinstance(self.max_cpu_loras, int) and self.max_cpu_loras < self.max_loras:
            bad(
                "max_cpu_loras",
                f"({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}): the host cache "
                "holds every adapter that is on the GPU",
            )
        utilization = self.gpu_memory_utilization
        if utilization is not None and not (
            isinstance(utilization, (int, float)) and math.isfinite(utilization) and 0 < utilization <= 1
        ):
            bad("gpu_memory_utilization", f"must be in (0, 1], got {utilization!r}")
        if self.limit_mm_per_prompt is not None and (
            not isinstance(self.limit_mm_per_prompt, Mapping)
            or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in self.limit_mm_per_prompt.items()
            )
        ):
            bad("limit_mm_per_prompt", "must map modality names to non-negative integers")
        if self.enable_tower_connector_lora is not None and not isinstance(self.enable_tower_connector_lora, bool):
            bad("enable_tower_connector_lora", f"must be true or false, got {self.enable_tower_connector_lora!r}")
        bitsandbytes = {name: getattr(self, name) for name in ("quantization", "load_format")}
        if "bitsandbytes" in bitsandbytes.values() and len(set(bitsandbytes.values()) - {None}) > 1:
            bad(
                "load_format",
                f"quantization {self.quantization!r} and load_format {self.load_format!r} disagree: a "
                "BitsAndBytes checkpoint is served with both set to 'bitsandbytes'",
            )
        for name in ("dtype", "quantization", "load_format"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                bad(name, f"must be a non-empty string, got {value!r}")
        if isinstance(self.extra_args, str) or not all(isinstance(a, str) for a in self.extra_args):
            bad("extra_args", "must be a sequence of strings, one per argument")
        else:
            typed_flags = {"--" + _flag(f.name) for f in fields(self) if f.name != "extra_args"}
            for arg in self.extra_args:
                flag = reserved_config.flag_name(arg)
                reserved = reserved_config.refused_flag(arg)
                if reserved is not None:
                    bad(
                        "extra_args",
                        f"{arg.split('=', 1)[0]} is refused by the serving container ({reserved.flag}: {reserved.reason}); remove it",
                    )
                elif flag in typed_flags:
                    bad("extra_args", f"{flag} has a typed option; set {flag[2:].replace('-', '_')} instead")
        return found

    def environment(self) -> dict[str, str]:
        """The container variables for these options (plus the runtime-LoRA switch, always on)."""
        env = {serving_env.RUNTIME_LORA_UPDATING: "true"}
        for option in fields(self):
            value = getattr(self, option.name)
            if option.name == "extra_args":
                if value:
                    env[serving_env.EXTRA_ARGS] = serving_env.encode_extra_args(value)
                continue
            if value is None:
                continue
            env[serving_env.flag_variable(option.name)] = serving_env.encode_flag_value(value)
        return env


def _flag(option_name: str) -> str:
    return option_name.replace("_", "-")
