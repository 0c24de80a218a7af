"""The mutants: each a one-place edit a developer could plausibly make, in the code where a silent
bug hurts most, with the fast tests (no vLLM) that should catch it.

A mutant names its file, the exact text it replaces (found exactly once, or the runner says the
catalogue is stale), the replacement, and the test files to run. Add one whenever a review finds a
bug the suite let through.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    area: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    """Test files or node ids; fast tier only."""


GATE = ("tests/gate",)
ADMISSION = ("tests/container/test_admission.py", "tests/container/test_middleware_asgi.py")
BOUNDARY = ("tests/container/test_middleware_asgi.py", "tests/container/test_request_json.py")
GRANTS = ("tests/constructs/test_invoke_grants.py", "tests/tenancy/test_tenant_grants.py")
DISCOVERY = ("tests/contract/test_discovery_record.py",)
VERDICT = ("tests/evaluation/test_verdict.py", "tests/evaluation/test_golden_set_refusals.py")
PLANNER = ("tests/planner/test_plan_cost_model.py", "tests/planner/test_plan_bad_input.py")
TIERS = ("tests/constructs/test_rank_tiers.py",)
CAPTURE = (
    "tests/container/test_capture_outcomes.py",
    "tests/container/test_capture_log.py",
    "tests/contract/test_capture_record.py",
)

MUTANTS: tuple[Mutant, ...] = (
    # --- the gate's rules
    Mutant(
        "target-modules-all-missing",
        "gate",
        "cdk_adapters/gate/checks/target_modules_in_base.py",
        "    if missing:\n",
        "    if missing and len(missing) == len(facts.target_modules):\n",
        GATE,
    ),
    Mutant(
        "rank-limit-off-by-one",
        "gate",
        "cdk_adapters/gate/checks/rank_limit.py",
        "    elif facts.max_rank > limit:",
        "    elif facts.max_rank > limit + 1:",
        GATE,
    ),
    Mutant(
        "dora-ignored",
        "gate",
        "cdk_adapters/gate/checks/dora.py",
        "    if context.facts.use_dora:",
        "    if context.facts.use_dora and False:",
        GATE,
    ),
    Mutant(
        "open-follows-links",
        "gate",
        "cdk_adapters/gate/adapter_contents.py",
        'os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)',
        "os.O_RDONLY",
        GATE,
    ),
    Mutant(
        "siglip-tower-unchecked",
        "gate",
        "cdk_adapters/gate/vlm_traps.py",
        'frozenset({"clip_vision_model", "siglip_vision_model"})',
        'frozenset({"clip_vision_model"})',
        GATE,
    ),
    Mutant(
        "archive-size-bound-off",
        "gate",
        "cdk_adapters/gate/checks/size_bound.py",
        "        if contents.archive_size > limit:",
        "        if contents.archive_size > 2 * limit:",
        GATE,
    ),
    # --- fair-share admission and tenant limits
    Mutant(
        "abandon-leaks-a-place",
        "admission",
        "container/adapter_server/admission.py",
        "        if ticket.done() and not ticket.cancelled():\n            self._release(lane, cost)\n",
        "        if ticket.done() and not ticket.cancelled():\n            pass\n",
        ADMISSION,
    ),
    Mutant(
        "max-n-off-by-one",
        "admission",
        "container/adapter_server/admission.py",
        "    if cost > limits.max_n:",
        "    if cost > limits.max_n + 1:",
        ADMISSION,
    ),
    Mutant(
        "cost-ignores-n",
        "admission",
        "container/adapter_server/invocation_request.py",
        "        per_prompt = max(per_prompt, value)",
        "        per_prompt = max(per_prompt, 1)",
        ADMISSION,
    ),
    Mutant(
        "cost-ignores-batched-prompts",
        "admission",
        "container/adapter_server/invocation_request.py",
        "    return per_prompt * max(1, prompts)",
        "    return per_prompt",
        ADMISSION,
    ),
    Mutant(
        "in-flight-cap-off",
        "admission",
        "container/adapter_server/admission.py",
        "        return cap is None or self.in_engine + cost <= cap or self.in_engine == 0",
        "        return True",
        ADMISSION,
    ),
    Mutant(
        "queue-cap-off-by-one",
        "admission",
        "container/adapter_server/admission.py",
        "len(lane.waiting) >= limits.max_queue:",
        "len(lane.waiting) > limits.max_queue:",
        ADMISSION,
    ),
    Mutant(
        "headroom-ignored",
        "admission",
        "container/adapter_server/admission.py",
        "        if lane.in_engine == 0 or self.capacity - self.in_engine - cost >= self.headroom:",
        "        if True:",
        ADMISSION,
    ),
    # --- the invocation boundary
    Mutant(
        "route-allow-list-open",
        "boundary",
        "container/adapter_server/invocation_request.py",
        "    if route not in sagemaker_contract.ROUTABLE_PATHS:",
        "    if False:",
        BOUNDARY,
    ),
    Mutant(
        "body-names-adapter-on-invocations",
        "boundary",
        "container/adapter_server/invocation.py",
        "self._context.settings.body_names_adapter and path != sagemaker_contract.INVOCATIONS_PATH",
        "self._context.settings.body_names_adapter",
        BOUNDARY,
    ),
    Mutant(
        "last-adapter-header-wins",
        "boundary",
        "container/adapter_server/invocation.py",
        "        if name in _LOGGED_HEADERS and name not in found:",
        "        if name in _LOGGED_HEADERS:",
        BOUNDARY,
    ),
    Mutant(
        "base-reachable-with-access-off",
        "boundary",
        "container/adapter_server/invocation.py",
        "        if not self._context.settings.allow_base_model:\n            raise Refusal(",
        "        if False:\n            raise Refusal(",
        BOUNDARY,
    ),
    # --- grant rendering
    Mutant(
        "tenant-default-grants-everything",
        "grants",
        "cdk_adapters/endpoint/invoke_grant.py",
        'arns = [endpoint.endpoint_arn, component(f"{record.component_prefix}-*")]',
        "arns = [endpoint.endpoint_arn]",
        GRANTS,
    ),
    # --- the discovery codec
    Mutant(
        "record-drops-base-access",
        "discovery",
        "cdk_adapters/contract/discovery.py",
        '            "allow_base_model": self.allow_base_model,\n',
        "",
        DISCOVERY,
    ),
    Mutant(
        "record-base-access-default-on",
        "discovery",
        "cdk_adapters/contract/discovery.py",
        'allow_base_model=document.get("allow_base_model", False),',
        'allow_base_model=document.get("allow_base_model", True),',
        DISCOVERY,
    ),
    # --- the eval verdict
    Mutant(
        "verdict-margin-doubled",
        "verdict",
        "cdk_adapters/evaluation/runner.py",
        "if rates.get(name, 0.0) < ref[name] - margin - 1e-9",
        "if rates.get(name, 0.0) < ref[name] - 2 * margin - 1e-9",
        VERDICT,
    ),
    Mutant(
        "verdict-failed-call-uncounted",
        "verdict",
        "cdk_adapters/evaluation/runner.py",
        "if case.checks or case.error is not None]",
        "if case.checks]",
        VERDICT,
    ),
    Mutant(
        "percentile-rank-off-by-one",
        "verdict",
        "cdk_adapters/evaluation/runner.py",
        "    return round(float(ordered[int(rank) - 1]), 3)",
        "    return round(float(ordered[min(int(rank), len(ordered) - 1)]), 3)",
        VERDICT,
    ),
    # --- the planner's cost arithmetic
    Mutant(
        "peak-factor-plain-mean",
        "planner",
        "cdk_adapters/planner/cost.py",
        "    return sum(t.peak_output_tokens_per_second for t in tenants) / demand",
        "    return sum(t.peak_factor for t in tenants) / len(tenants)",
        PLANNER,
    ),
    Mutant(
        "break-even-ignores-headroom",
        "planner",
        "cdk_adapters/planner/cost.py",
        "    return (1 - swap_headroom) / peak_factor",
        "    return 1 / peak_factor",
        PLANNER,
    ),
    Mutant(
        "tenants-unbounded",
        "planner",
        "cdk_adapters/planner/traffic.py",
        "    if not 1 <= count <= MAX_TENANTS:",
        "    if not 1 <= count:",
        PLANNER,
    ),
    Mutant(
        "lora-padding-ignored",
        "planner",
        "cdk_adapters/planner/lora_kernels.py",
        "        lora = lora16 * _rank_factor(rank, tokens)",
        "        lora = lora16",
        ("tests/planner/test_gpu_lora.py",),
    ),
    Mutant(
        "lru-host-order-frozen",
        "planner",
        "cdk_adapters/planner/swaps.py",
        "        if name in host:\n            host.move_to_end(name)\n",
        "        if name in host:\n            pass\n",
        ("tests/planner/test_gpu_lora.py",),
    ),
    Mutant(
        "cell-over-its-cap",
        "planner",
        "cdk_adapters/planner/cells.py",
        "        if len(members[target]) < cap:\n",
        "        if len(members[target]) <= cap:\n",
        ("tests/planner/test_plan_cells.py",),
    ),
    Mutant(
        "cells-without-their-floor",
        "planner",
        "cdk_adapters/planner/cells.py",
        "        instances = shared_instances_needed(peak, inputs)\n",
        "        instances = max(1, shared_instances_needed(peak, inputs) - inputs.min_instances + 1)\n",
        ("tests/planner/test_plan_cells.py",),
    ),
    # --- capture
    Mutant(
        "capture-skips-failures",
        "capture",
        "container/adapter_server/capture.py",
        "        self._write_if_ready(force=status is not None and status != 200)",
        "        self._write_if_ready()",
        CAPTURE,
    ),
    Mutant(
        "capture-one-stream-for-all",
        "capture",
        "container/adapter_server/invocation.py",
        "        stream = capture_record.capture_stream(adapter)",
        "        stream = capture_record.capture_stream(None)",
        CAPTURE,
    ),
    Mutant(
        "capture-redaction-off",
        "capture",
        "cdk_adapters/contract/capture_record.py",
        '        case["prompt"] = REDACTED if "prompt" in settings.redact else request["prompt"]',
        '        case["prompt"] = request["prompt"]',
        CAPTURE,
    ),
    # --- the endpoint's grouped props and alarm text
    Mutant(
        "flat-prop-maps-to-another-field",
        "props",
        "cdk_adapters/endpoint/prop_groups.py",
        '    "max_instance_count": ("instances", "max_count"),',
        '    "max_instance_count": ("instances", "min_count"),',
        ("tests/constructs/test_prop_groups.py",),
    ),
    Mutant(
        "alarm-forgets-its-runbook",
        "props",
        "cdk_adapters/monitoring/alarms.py",
        "            alarm_description=description + runbook_line(runbook_url, kind),",
        "            alarm_description=description,",
        ("tests/monitoring/test_alarm_runbook.py",),
    ),
    Mutant(
        "refusals-never-paced",
        "boundary",
        "container/adapter_server/refusal_pacing.py",
        "        return 0.0 if tokens >= 0 else -tokens / self._rate",
        "        return 0.0",
        ("tests/container/test_refusal_pacing.py",),
    ),
    Mutant(
        "503-paced-like-a-refusal",
        "boundary",
        "container/adapter_server/refusal_pacing.py",
        "        if not 400 <= status < 500 or status == 429:",
        "        if not 400 <= status < 600 or status == 429:",
        ("tests/container/test_refusal_pacing.py",),
    ),
    Mutant(
        "placement-file-ignored",
        "placement",
        "cdk_adapters/contract/cell_placement.py",
        "    chosen = (pinned or {}).get(family) or (recorded or {}).get(family)",
        "    chosen = (pinned or {}).get(family)",
        ("tests/contract/test_cell_placement.py",),
    ),
    Mutant(
        "placement-by-modulo-hash",
        "placement",
        "cdk_adapters/contract/cell_placement.py",
        "    return max(cells, key=lambda cell: (_weight(cell, family), cell))",
        '    return sorted(cells)[_weight("", family) % len(cells)]',
        ("tests/contract/test_cell_placement.py",),
    ),
    Mutant(
        "service-record-ignores-its-placement",
        "placement",
        "cdk_adapters/contract/service_record.py",
        "                found = self.placement.get(family) or hashed_cell(family, self._names)",
        "                found = hashed_cell(family, self._names)",
        ("tests/contract/test_service_record.py",),
    ),
    Mutant(
        "service-record-ignores-aliases",
        "placement",
        "cdk_adapters/contract/service_record.py",
        "        found = self._aliases.get(key)",
        "        found = None",
        ("tests/contract/test_service_record.py",),
    ),
    Mutant(
        "client-calls-the-first-cell",
        "cells",
        "cdk_adapters/client/client.py",
        "        record = self.service.record_of(adapter)",
        "        record = next(iter(self.service.cells.values()))",
        ("tests/client/test_client_cells.py",),
    ),
    Mutant(
        "service-ignores-the-placement-file",
        "cells",
        "cdk_adapters/service/service.py",
        "            or cell_for(family, self._names, recorded=self.placement_file.families, hashed_over=self.hashed_over)",
        "            or cell_for(family, self._names, hashed_over=self.hashed_over)",
        ("tests/service/test_adapter_service.py",),
    ),
    Mutant(
        "service-grants-every-cell",
        "cells",
        "cdk_adapters/service/service.py",
        "            grants = [self.cell(where).endpoint.grant_invoke(grantee, names) for where, names in sorted(by_cell.items())]",
        "            grants = [cell.endpoint.grant_invoke(grantee) for cell in self.cells]",
        ("tests/service/test_adapter_service.py",),
    ),
    Mutant(
        "imported-service-uses-the-first-cell",
        "cells",
        "cdk_adapters/service/imported.py",
        "        return self.cell_endpoint(self.cell_of(name)).add_adapter(name, artifact=artifact, **options)",
        "        return self.cell_endpoint(next(iter(self.record.cells))).add_adapter(name, artifact=artifact, **options)",
        ("tests/service/test_imported_service.py",),
    ),
    Mutant(
        "bake-watches-other-endpoints",
        "cells",
        "cdk_adapters/service/wave_handler/index.py",
        '                if rest.startswith("/") or (rest.startswith("-") and "/" in rest):',
        "                if True:",
        ("tests/cli/test_bake.py",),
    ),
    Mutant(
        "wave-gate-bakes-in-a-rollback",
        "cells",
        "cdk_adapters/service/wave_handler/index.py",
        '    until = now() + float(properties["BakeSeconds"]) if changed and not rolling_back(cloudformation, event["StackId"]) else 0.0',
        '    until = now() + float(properties["BakeSeconds"]) if changed else 0.0',
        ("tests/service/test_wave_gate.py",),
    ),
    Mutant(
        "wave-gate-ignores-alarms",
        "cells",
        "cdk_adapters/service/wave_handler/index.py",
        "    if fired:",
        "    if False:",
        ("tests/service/test_wave_gate.py",),
    ),
    Mutant(
        "alias-may-shadow-an-adapter",
        "cells",
        "cdk_adapters/contract/cell_placement.py",
        "        if adapter_name_key(alias) in cell_by_key:",
        "        if False:",
        ("tests/contract/test_cell_placement.py",),
    ),
    Mutant(
        "service-record-ignores-hashed-over",
        "cells",
        "cdk_adapters/contract/service_record.py",
        "        self._names.extend(hash_cells(list(self.cells), self.hashed_over))",
        "        self._names.extend(self.cells)",
        ("tests/contract/test_service_record.py",),
    ),
    # --- rank tiers
    Mutant(
        "tier-adapter-on-the-first-base",
        "tiers",
        "cdk_adapters/endpoint/fleet.py",
        "        base = base or self._base",
        "        base = self._base",
        TIERS,
    ),
    Mutant(
        "tier-largest-holding",
        "tiers",
        "cdk_adapters/gate/ranks.py",
        "    return min((tier for tier in tier_ranks if tier >= rank), default=None)",
        "    return max((tier for tier in tier_ranks if tier >= rank), default=None)",
        TIERS,
    ),
    Mutant(
        "tier-engine-is-the-first-tiers",
        "tiers",
        "cdk_adapters/endpoint/rank_tiers.py",
        "        own.update(tier.engine(endpoint.vllm).environment())",
        "        own.update(endpoint.vllm.environment())",
        TIERS,
    ),
    Mutant(
        "tier-copies-uncounted",
        "tiers",
        "cdk_adapters/endpoint/rank_tiers.py",
        "        bases = [endpoint.base_component] + [tier.base_component for tier in self._tiers]",
        "        bases = [endpoint.base_component]",
        TIERS,
    ),
    Mutant(
        "deploy-check-may-invoke-a-tier-base",
        "tiers",
        "cdk_adapters/deploy_check/deploy_check.py",
        "        bases = [base_component_name, *tier_component_names]",
        "        bases = [base_component_name]",
        TIERS,
    ),
    Mutant(
        "tier-move-unnoticed",
        "tiers",
        "cdk_adapters/manifest/tier_record.py",
        "        if pin is None and was is not None and was != now:",
        "        if False:",
        ("tests/manifest/test_rank_tier_manifest.py",),
    ),
    Mutant(
        "import-ignores-tiers",
        "tiers",
        "cdk_adapters/endpoint/imported.py",
        "        base = next((b for tier, b in tiers if tier == held), self.base_component_name)",
        "        base = self.base_component_name",
        TIERS,
    ),
)
