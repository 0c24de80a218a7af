"""The gate's rules, one per module (cdk-nag style). Order is the order problems are reported in."""

from __future__ import annotations

from cdk_adapters.gate.checks import (
    adapter_config,
    archive_layout,
    base_altering_init,
    base_identity,
    dora,
    embedding_targets,
    linked_files,
    lora_bias,
    lora_variant,
    merged_weights,
    modules_to_save,
    pattern_scaling,
    rank_limit,
    size_bound,
    target_modules_in_base,
    tensor_shapes,
    tower_connector_lora,
    vision_modules,
    vision_tower_layout,
    vlm_engine_traps,
    weights_file,
)
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.gate.checks.co_hosted import CO_HOSTED_CHECKS, CoHostedRule

ADAPTER_CHECKS: tuple[AdapterRule, ...] = (
    archive_layout.CHECK,
    linked_files.CHECK,
    adapter_config.CHECK,
    weights_file.CHECK,
    rank_limit.CHECK,
    pattern_scaling.CHECK,
    dora.CHECK,
    modules_to_save.CHECK,
    lora_bias.CHECK,
    lora_variant.CHECK,
    base_altering_init.CHECK,
    embedding_targets.CHECK,
    vision_modules.CHECK,
    tower_connector_lora.CHECK,
    vision_tower_layout.CHECK,
    vlm_engine_traps.CHECK,
    target_modules_in_base.CHECK,
    base_identity.CHECK,
    tensor_shapes.CHECK,
    merged_weights.CHECK,
    size_bound.CHECK,
)
"""Checks for one adapter, run by every gate (synth, `cdk-adapters validate`, the container)."""

_ALL_CHECKS: tuple[AdapterRule | CoHostedRule, ...] = (*ADAPTER_CHECKS, *CO_HOSTED_CHECKS)

RULES: dict[str, AdapterRule | CoHostedRule] = {check.id: check for check in _ALL_CHECKS}
"""Every rule of the gate by its id: what problems carry and manifest rows acknowledge."""

__all__ = ["ADAPTER_CHECKS", "CO_HOSTED_CHECKS", "RULES", "AdapterRule", "AdapterRuleContext", "CoHostedRule"]
