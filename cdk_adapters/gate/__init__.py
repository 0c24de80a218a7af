"""The compatibility gate: one implementation used at synth, by `cdk-adapters validate`, and by
the serving container when SageMaker registers an adapter. Standard-library only (plus
`cdk_adapters.problems`): the container imports it without aws-cdk-lib, pydantic or torch."""

from cdk_adapters.gate.acknowledgments import AcknowledgedFinding, Acknowledgment, split_acknowledged
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.adapter_facts import AdapterFacts
from cdk_adapters.gate.base_model import BaseModelFacts
from cdk_adapters.gate.check import (
    check_adapter_archive,
    check_adapter_contents,
    check_adapter_dir,
    check_adapter_facts,
    check_co_hosted,
    covering_max_lora_rank,
)
from cdk_adapters.gate.checks import ADAPTER_CHECKS, RULES, AdapterRule
from cdk_adapters.gate.checks.co_hosted import CO_HOSTED_CHECKS, CoHostedAdapter, CoHostedRule
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS, smallest_allowed_max_lora_rank
from cdk_adapters.gate.reference import Reference
from cdk_adapters.gate.safetensors_header import SafetensorsHeaderError, read_safetensors_header

__all__ = [
    "ADAPTER_CHECKS",
    "ALLOWED_MAX_LORA_RANKS",
    "CO_HOSTED_CHECKS",
    "RULES",
    "AcknowledgedFinding",
    "Acknowledgment",
    "AdapterContents",
    "AdapterFacts",
    "AdapterRule",
    "BaseModelFacts",
    "CoHostedAdapter",
    "CoHostedRule",
    "Reference",
    "SafetensorsHeaderError",
    "check_adapter_archive",
    "check_adapter_contents",
    "check_adapter_dir",
    "check_adapter_facts",
    "check_co_hosted",
    "covering_max_lora_rank",
    "read_safetensors_header",
    "smallest_allowed_max_lora_rank",
    "split_acknowledged",
]
