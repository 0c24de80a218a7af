"""``python -m cdk_adapters.cli.synth_summary cdk.out``: what ``cdk synth`` produced, in a few lines.

Prints each stack with its resource count, the nested stacks its adapters are spread over (with
theirs), the adapters, the instance types (instance pools in priority order, with what a copy
reserves on each), how instances and base-model copies scale (and how a scaled-to-zero
endpoint wakes up), and the policy-validation (cdk-nag) result. Exits non-zero when the cloud assembly is missing or incomplete, or when the validation
report lists any violation, so ``make synth`` fails loudly instead of summarising a broken build.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdk_adapters.contract.serving_env import flag_variable
from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK

STACK_ARTIFACT = "aws:cloudformation:stack"
VALIDATION_REPORT = "validation-report.json"
"""CDK writes it whenever a policy-validation plugin (cdk-nag, CloudFormation Validate) reports."""
COMPONENT_TYPE = "AWS::SageMaker::InferenceComponent"
SHOWN_ADAPTERS = 20
"""A fleet of a thousand adapters is summarised, not listed."""
NESTED_STACK_TYPE = "AWS::CloudFormation::Stack"
ASSET_PATH_METADATA = "aws:asset:path"
COPY_COUNT_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
"""CDK records a nested stack's template file (relative to the assembly) under this metadata key."""


@dataclass
class StackSummary:
    name: str
    resource_count: int
    resource_types: Counter[str]
    adapters: dict[str, str] = field(default_factory=dict)
    """Inference component name -> its base component, for adapter components (nested ones too)."""
    nested: dict[str, int] = field(default_factory=dict)
    """Nested stack (construct path) -> its resource count."""
    scaling: list[str] = field(default_factory=list)
    """How the endpoint's instances and base-component copies scale, one line each."""
    services: list[str] = field(default_factory=list)
    """The service records (of a service of cells) this stack publishes, one line each."""
    tiers: list[str] = field(default_factory=list)
    """An endpoint's rank tiers (more than one base component on it), one line each."""


@dataclass
class AssemblySummary:
    stacks: list[StackSummary]
    violations: list[str]
    errors: list[str]
    notices: list[str] = field(default_factory=list)
    """Findings of validation plugins that passed (e.g. CloudFormation Validate warnings)."""

    @property
    def ok(self) -> bool:
        return not self.violations and not self.errors


def summarize(outdir: Path) -> AssemblySummary:
    errors: list[str] = []
    manifest_path = outdir / "manifest.json"
    if not manifest_path.is_file():
        return AssemblySummary([], [], [f"{manifest_path} not found: did cdk synth run?"])
    manifest = json.loads(manifest_path.read_text())
    stacks: list[StackSummary] = []
    for artifact_id, artifact in sorted(manifest.get("artifacts", {}).items()):
        if artifact.get("type") != STACK_ARTIFACT:
            continue
        template_path = outdir / artifact["properties"]["templateFile"]
        if not template_path.is_file():
            errors.append(f"{artifact_id}: template {template_path} missing")
            continue
        resources = json.loads(template_path.read_text()).get("Resources", {})
        summary = StackSummary(
            name=artifact.get("displayName", artifact_id),
            resource_count=len(resources),
            resource_types=Counter(resource["Type"] for resource in resources.values()),
        )
        _collect_adapters(resources, summary.adapters)
        summary.scaling = describe_scaling(resources)
        summary.services = describe_services(resources)
        for logical_id, resource in sorted(resources.items()):
            nested_file = resource.get("Metadata", {}).get(ASSET_PATH_METADATA)
            if resource["Type"] != NESTED_STACK_TYPE or not nested_file:
                continue
            nested_path = outdir / nested_file
            if not nested_path.is_file():
                errors.append(f"{artifact_id}: nested template {nested_path} missing")
                continue
            nested_resources = json.loads(nested_path.read_text()).get("Resources", {})
            path = resource["Metadata"].get("aws:cdk:path", logical_id)
            summary.nested[path.split(".NestedStack/")[0]] = len(nested_resources)
            _collect_adapters(nested_resources, summary.adapters)
        summary.tiers = describe_tiers(resources, summary.adapters)  # after the shards: their adapters count
        stacks.append(summary)
    if not stacks and not errors:
        errors.append(f"{outdir}: the cloud assembly has no stacks")
    failed, passed = _violations(outdir / VALIDATION_REPORT)
    return AssemblySummary(stacks, failed, errors, passed)


def _collect_adapters(resources: dict[str, Any], adapters: dict[str, str]) -> None:
    for resource in resources.values():
        properties = resource.get("Properties", {})
        base = properties.get("Specification", {}).get("BaseInferenceComponentName")
        if resource["Type"] == COMPONENT_TYPE and base:
            adapters[str(properties.get("InferenceComponentName"))] = str(base)


def describe_tiers(resources: dict[str, Any], adapters: dict[str, str]) -> list[str]:
    """Each endpoint with rank tiers: every base component with its model's rank and its adapter count."""
    endpoints: dict[str, list[tuple[int, str]]] = {}
    for resource in resources.values():
        properties = resource.get("Properties", {})
        spec: dict[str, Any] = properties.get("Specification") or next(
            iter(properties.get("Specifications") or []), {}
        )  # pools: one per type
        if resource["Type"] != COMPONENT_TYPE or "BaseInferenceComponentName" in spec or "ModelName" not in spec:
            continue
        model = resources.get(spec["ModelName"].get("Fn::GetAtt", [""])[0], {}) if isinstance(spec["ModelName"], dict) else {}
        environment = model.get("Properties", {}).get("PrimaryContainer", {}).get("Environment", {})
        rank = int(environment.get(flag_variable("max_lora_rank"), VLLM_DEFAULT_MAX_LORA_RANK))
        endpoints.setdefault(json.dumps(properties.get("EndpointName"), sort_keys=True), []).append(
            (rank, str(properties.get("InferenceComponentName")))
        )
    lines = []
    counts = Counter(adapters.values())
    for bases in endpoints.values():
        if len(bases) < 2:
            continue
        described = ", ".join(f"{name} max_lora_rank {rank} ({counts[name]} adapters)" for rank, name in sorted(bases))
        lines.append(f"  rank tiers ({len(bases)}): {described}")
    return lines


def describe_services(resources: dict[str, Any]) -> list[str]:
    """Each service record an SSM parameter holds: its cells, their endpoints, the families placed off the hash."""
    from cdk_adapters.contract.service_record import SERVICE_KIND, ServiceRecord

    lines = []
    for resource in resources.values():
        value = resource.get("Properties", {}).get("Value")
        if resource["Type"] != "AWS::SSM::Parameter" or not isinstance(value, str) or SERVICE_KIND not in value:
            continue
        record = ServiceRecord.from_json(value)
        cells = ", ".join(f"{cell} -> endpoint {r.endpoint_name}" for cell, r in record.cells.items())
        lines.append(
            f"  service record {resource['Properties'].get('Name')}: {len(record.cells)} cells ({cells}); "
            f"{len(record.placement)} famil{'y' if len(record.placement) == 1 else 'ies'} placed off the hash"
        )
    return lines


def describe_scaling(resources: dict[str, Any]) -> list[str]:
    """Instance range per endpoint config, and copy range, policies and wake-up per base component."""
    lines = []
    for resource in resources.values():
        if resource["Type"] != "AWS::SageMaker::EndpointConfig":
            continue
        for variant in resource["Properties"].get("ProductionVariants", []):
            managed = variant.get("ManagedInstanceScaling", {})
            if managed.get("Status") == "ENABLED":
                low, high = managed.get("MinInstanceCount"), managed.get("MaxInstanceCount")
                zero = " (may scale to zero)" if low == 0 else ""
                wait = variant.get("VariantInstanceProvisionTimeoutInSeconds")
                waits = f"; waits up to {wait} s for capacity before the next pool or failing" if wait is not None else ""
                lines.append(f"  instances: {_instance_types(variant)} x {low}..{high}, managed instance scaling{zero}{waits}")
    for resource in resources.values():
        properties = resource.get("Properties", {})
        if resource["Type"] == COMPONENT_TYPE and properties.get("Specifications"):
            per_type = "; ".join(_reservation(spec) for spec in properties["Specifications"])
            lines.append(f"  copy of {properties.get('InferenceComponentName')} reserves, per pool: {per_type}")
    targets = {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
        and resource["Properties"].get("ScalableDimension") == COPY_COUNT_DIMENSION
    }
    scaled = {str(target["ResourceId"]).split("/", 1)[-1] for target in targets.values()}
    for resource in resources.values():
        properties = resource.get("Properties", {})
        name = properties.get("InferenceComponentName")
        is_base = resource["Type"] == COMPONENT_TYPE and "BaseInferenceComponentName" not in properties.get("Specification", {})
        if is_base and name not in scaled:
            lines.append(f"  copies of {name}: fixed at {properties.get('RuntimeConfig', {}).get('CopyCount')} (no autoscaling)")
    for logical_id, target in sorted(targets.items()):
        name = str(target["ResourceId"]).split("/", 1)[-1]
        policies = {
            policy_id: policy["Properties"]
            for policy_id, policy in resources.items()
            if policy["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
            and policy["Properties"].get("ScalingTargetId") == {"Ref": logical_id}
        }
        parts = []
        for policy_id, policy in sorted(policies.items()):
            tracking = policy.get("TargetTrackingScalingPolicyConfiguration")
            if tracking:
                metric = tracking.get("PredefinedMetricSpecification", {}).get("PredefinedMetricType", "a custom metric")
                parts.append(f"target tracking {metric} at {tracking.get('TargetValue'):g}")
            elif policy.get("StepScalingPolicyConfiguration"):
                parts.append("scale to zero, " + _wake_up(resources, policy_id))
        lines.append(
            f"  copies of {name}: {target['MinCapacity']}..{target['MaxCapacity']}, " + ("; ".join(parts) or "no policy")
        )
    return lines


def _instance_types(variant: dict[str, Any]) -> str:
    """One type, or the instance pools in priority order."""
    pools = sorted(variant.get("InstancePools") or [], key=lambda pool: pool.get("Priority", 0))
    if not pools:
        return str(variant.get("InstanceType"))
    return "pools " + ", then ".join(str(pool.get("InstanceType")) for pool in pools)


def _reservation(spec: dict[str, Any]) -> str:
    compute = spec.get("ComputeResourceRequirements", {})
    parts = [f"{compute.get('NumberOfAcceleratorDevicesRequired', 0)} GPU(s)", f"{compute.get('MinMemoryRequiredInMb')} MiB"]
    if "NumberOfCpuCoresRequired" in compute:
        parts.append(f"{compute['NumberOfCpuCoresRequired']:g} vCPUs")
    return f"{spec.get('InstanceType')} {', '.join(parts)}"


def _wake_up(resources: dict[str, Any], policy_id: str) -> str:
    for alarm in resources.values():
        properties = alarm.get("Properties", {})
        if alarm["Type"] != "AWS::CloudWatch::Alarm" or {"Ref": policy_id} not in properties.get("AlarmActions", []):
            continue
        operator = {"GreaterThanOrEqualToThreshold": ">=", "GreaterThanThreshold": ">"}.get(
            properties.get("ComparisonOperator"), "?"
        )
        condition = f"{operator} {properties.get('Threshold'):g}"
        queries = [m["Expression"] for m in properties.get("Metrics", []) if "Expression" in m]
        if queries:
            return f"wakes on {condition} from Metrics Insights: {queries[0]}"
        dimensions = ", ".join(f"{d['Name']}={d['Value']}" for d in properties.get("Dimensions", []))
        return f"wakes on {properties.get('MetricName')} {condition} ({dimensions})"
    return "no wake-up alarm"


def _violations(report_path: Path) -> tuple[list[str], list[str]]:
    """(violations of failed plugins, findings of plugins that still passed) from CDK's report."""
    if not report_path.is_file():
        return [], []
    report = json.loads(report_path.read_text())
    failed: list[str] = []
    passed: list[str] = []
    for plugin in report.get("pluginReports", []):
        target = failed if plugin.get("conclusion") == "failure" else passed
        for violation in plugin.get("violations", []):
            for construct in violation.get("violatingConstructs") or [{}]:
                target.append(
                    f"{plugin.get('pluginName', '?')}: {violation.get('severity', '?')} {violation.get('ruleName')} "
                    f"at {construct.get('constructPath', '?')}: {violation.get('description', '')}"
                )
    return failed, passed


def render(summary: AssemblySummary) -> str:
    lines = []
    for stack in summary.stacks:
        lines.append(f"stack {stack.name}: {stack.resource_count} resources")
        for resource_type, count in sorted(stack.resource_types.items()):
            lines.append(f"    {count:3d}  {resource_type}")
        if stack.nested:
            lines.append(
                f"  adapter shards ({len(stack.nested)} nested stack{'' if len(stack.nested) == 1 else 's'}): "
                + ", ".join(f"{path.rsplit('/', 1)[-1]} {count}" for path, count in sorted(stack.nested.items()))
                + " resources"
            )
        names = sorted(stack.adapters)
        shown = ", ".join(names[:SHOWN_ADAPTERS]) or "none"
        more = f", and {len(names) - SHOWN_ADAPTERS} more" if len(names) > SHOWN_ADAPTERS else ""
        lines.append(f"  adapters ({len(stack.adapters)}): {shown}{more}")
        lines += stack.tiers
        lines += stack.services
        if stack.scaling:
            lines.append("  scaling:")
            lines += [f"  {line}" for line in stack.scaling]
    if summary.errors:
        pass
    elif summary.violations:
        lines.append(f"policy validation (cdk-nag): {len(summary.violations)} unacknowledged finding(s)")
        lines += [f"  - {violation}" for violation in summary.violations]
    else:
        lines.append("policy validation (cdk-nag packs registered by the app): no unacknowledged findings")
    lines += [f"  note: {notice}" for notice in summary.notices]
    lines += [f"error: {error}" for error in summary.errors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    outdir = Path(args[0] if args else "cdk.out")
    summary = summarize(outdir)
    print(render(summary))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
