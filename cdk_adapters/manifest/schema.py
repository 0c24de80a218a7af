"""The adapter manifest's schema: one base model, serving limits, one row per adapter.

Unknown keys are errors everywhere (``extra="forbid"``): a misspelt ``max_lora_rnak`` must not
silently fall back to a default. Cross-field rules that need the adapters' files (ranks, target
modules, base identity) live in the compatibility gate, not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    StringConstraints,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from cdk_adapters.contract.cell_placement import CELL_NAME_PATTERN
from cdk_adapters.contract.s3_url import S3Url, S3UrlError, as_prefix, parse_s3_url
from cdk_adapters.deploy_check.request import body_messages
from cdk_adapters.gate import vlm_traps
from cdk_adapters.gate.acknowledgments import reason_error, rule_error
from cdk_adapters.manifest.serving_schema import ServingLimits, StrictModel
from cdk_adapters.monitoring import thresholds as alarm_thresholds
from cdk_adapters.private.traffic_bounds import TRAFFIC_BOUNDS

if TYPE_CHECKING:
    from cdk_adapters.contract.capture_record import CaptureSettings
    from cdk_adapters.contract.tenant_limits import AdapterLimits

MANIFEST_VERSION = 1
_VISION_FACTS = ("architecture", "vision_tower_type", "vision_feature_select_strategy")
_NEEDED_FOR = {
    "architecture": "the architectures known to crash vLLM with tower LoRA (vlm-engine-traps)",
    "vision_tower_type": "the key layout of tower adapters' tensors (vision-tower-layout)",
    "vision_feature_select_strategy": "the strategy known to crash vLLM with tower LoRA (vlm-engine-traps)",
}
"""Which gate rule needs each vision-language fact of the base (for the messages)."""

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_Strict = StrictModel


class BaseModelSpec(_Strict):
    """The shared base model and the facts the gate compares every adapter with."""

    id: NonEmpty
    """Hugging Face id the adapters were trained on, e.g. ``meta-llama/Llama-3.1-8B-Instruct``."""
    revision: NonEmpty
    """Pinned commit of that id; adapters recording another revision are refused."""
    artifact: NonEmpty
    """``s3://bucket/prefix/`` (uncompressed weights, fast start) or ``s3://bucket/key.tar.gz``."""
    hidden_size: int = Field(gt=0)
    """``hidden_size`` from the model's config.json."""
    module_names: list[NonEmpty] = Field(min_length=1)
    """Leaf modules with 2-D weights (``q_proj``, ``down_proj`` ...); `cdk-adapters base-facts DIR` prints them."""
    module_shapes: dict[NonEmpty, list[tuple[PositiveInt, PositiveInt]]] | None = None
    """Optional ``[out, in]`` shapes of each module's weights (``k_proj: [[1024, 4096]]``), printed by
    `cdk-adapters base-facts DIR`. With them LoRA shapes are checked exactly (grouped-query attention,
    MLP widths); without them only against `hidden_size`."""
    vision_language: bool = False
    """The base is a vision-language model."""
    allow_vision_modules: bool = False
    """Admit adapters that target the vision tower or connector (needs multimodal LoRA in vLLM)."""
    architecture: NonEmpty | None = Field(default=None, validate_default=True)
    """A vision-language base's ``architectures[0]`` from config.json (``LlavaForConditionalGeneration``);
    required with ``vision_language: true``. `cdk-adapters base-facts DIR` prints it."""
    vision_tower_type: NonEmpty | None = Field(default=None, validate_default=True)
    """A vision-language base's ``vision_config.model_type`` (``clip_vision_model``); required with
    ``allow_vision_modules: true``, so tower adapters' key layout is checked at synth."""
    vision_feature_select_strategy: NonEmpty | None = Field(default=None, validate_default=True)
    """A LLaVA-style base's ``default`` or ``full`` (``default`` when config.json leaves it out);
    required for such a base: with tower LoRA on, ``default`` crashes the pinned vLLM."""

    @field_validator("artifact")
    @classmethod
    def _artifact_is_s3(cls, value: str) -> str:
        try:
            parse_s3_url(value)
        except S3UrlError as error:
            raise ValueError(f"must be s3://<bucket>/<prefix>/ or s3://<bucket>/<key>.tar.gz: {error}") from None
        if not (value.endswith(("/", ".tar.gz"))):
            raise ValueError("must end with '/' (an uncompressed S3 prefix) or '.tar.gz' (one archive)")
        return value

    @model_validator(mode="after")
    def _shapes_name_known_modules(self) -> BaseModelSpec:
        unknown = sorted(set(self.module_shapes or {}) - set(self.module_names))
        if unknown:
            raise ValueError(
                f"module_shapes names {', '.join(unknown)}, which module_names does not list; "
                "copy both from `cdk-adapters base-facts DIR`"
            )
        return self

    @field_validator(*_VISION_FACTS)
    @classmethod
    def _vision_language_facts(cls, value: str | None, info: ValidationInfo) -> str | None:
        """The facts the gate's vision-language rules need at synth, where no weights are read."""
        name, stated = str(info.field_name), info.data
        if not stated.get("vision_language", False):
            if value is not None:
                raise ValueError("describes a vision-language base: set vision_language: true, or remove it")
            return value
        if value is None:
            required_because = {
                "architecture": "with vision_language: true",
                "vision_tower_type": "with allow_vision_modules: true" if stated.get("allow_vision_modules") else None,
                "vision_feature_select_strategy": f"for a {stated['architecture']} base"
                if vlm_traps.uses_feature_select_strategy(stated.get("architecture"))
                else None,
            }[name]
            if required_because:
                raise ValueError(
                    f"is required {required_because}: the gate checks {_NEEDED_FOR[name]} with it at synth; "
                    "copy it from `cdk-adapters base-facts DIR`"
                )
        elif name == "vision_feature_select_strategy" and value not in vlm_traps.FEATURE_SELECT_STRATEGIES:
            allowed = " or ".join(map(repr, vlm_traps.FEATURE_SELECT_STRATEGIES))
            raise ValueError(f"must be {allowed} (config.json's value), got {value!r}")
        return value

    @field_validator("module_names")
    @classmethod
    def _unique_modules(cls, value: list[str]) -> list[str]:
        duplicates = sorted({name for name in value if value.count(name) > 1})
        if duplicates:
            raise ValueError(f"lists {', '.join(duplicates)} more than once")
        return value


class TrafficSpec(_Strict):
    """One adapter's expected load, for `cdk-adapters plan` (docs/planner.md); deploys ignore it."""

    requests_per_minute: float = Field(
        ge=TRAFFIC_BOUNDS["requests_per_minute"][0], le=TRAFFIC_BOUNDS["requests_per_minute"][1], allow_inf_nan=False
    )
    """Average requests per minute (finite, at most 1,000,000)."""
    prompt_tokens: int = Field(default=0, ge=TRAFFIC_BOUNDS["prompt_tokens"][0], le=TRAFFIC_BOUNDS["prompt_tokens"][1])
    """Average prompt length in tokens."""
    output_tokens: int = Field(ge=TRAFFIC_BOUNDS["output_tokens"][0], le=TRAFFIC_BOUNDS["output_tokens"][1])
    """Average generated tokens per request; decode time is what a GPU spends."""
    peak_factor: float = Field(
        default=2.0, ge=TRAFFIC_BOUNDS["peak_factor"][0], le=TRAFFIC_BOUNDS["peak_factor"][1], allow_inf_nan=False
    )
    """Peak request rate over the average (1 = flat traffic, at most 100)."""


class RuleAcknowledgment(_Strict):
    """A gate rule this row's adapter knowingly breaks, and why (cdk-nag's model: rule id + reason).

    Its findings are listed as acknowledged by `cdk-adapters validate` and do not fail the gate.
    """

    rule: NonEmpty
    """The rule's id, as problems show it in brackets, e.g. ``identical-target-modules``."""
    reason: str | None = Field(default=None, validate_default=True)
    """Why the rule does not apply to this adapter; required, kept for review."""

    @field_validator("rule")
    @classmethod
    def _known_rule(cls, value: str) -> str:
        error = rule_error(value)
        if error:
            raise ValueError(error)
        return value

    @field_validator("reason")
    @classmethod
    def _has_reason(cls, value: str | None) -> str | None:
        error = reason_error(value)
        if error:
            raise ValueError(error)
        return value


class _AlarmOverridesBase(_Strict):
    """A row's alarm settings over the endpoint's adapter defaults; ``null`` turns one alarm off.

    Only the keys written are overrides (``alarms: {latency_p95_ms: 8000}`` keeps the other
    defaults). The keys and their value rules are `cdk_adapters.monitoring.thresholds`' (the same
    as `AlarmThresholds`'), except that the period is written in whole minutes (``period_minutes``).
    """

    @field_validator("*", mode="after", check_fields=False)
    @classmethod
    def _value_allowed(cls, value: object, info: ValidationInfo) -> object:
        field = _ALARM_FIELD_OF_KEY[str(info.field_name)]
        error = alarm_thresholds.value_error(field, value)
        if error:
            raise ValueError(error)
        if field in alarm_thresholds.NULLABLE_FIELDS and isinstance(value, (int, float)):
            return float(value)  # a threshold is a float, as `AlarmThresholds` declares it (20000 -> 20000.0)
        return value

    def overrides(self) -> dict[str, Any]:
        """Only what the row wrote, keyed by the threshold field names (``period`` in minutes)."""
        return {_ALARM_FIELD_OF_KEY[key]: getattr(self, key) for key in self.model_fields_set}


_PERIOD_KEY = "period_minutes"
_ALARM_FIELD_OF_KEY = {
    (_PERIOD_KEY if name == alarm_thresholds.PERIOD_FIELD else name): name for name in alarm_thresholds.THRESHOLD_FIELDS
}
"""Manifest key -> `AlarmThresholds` field: every field, none listed twice."""
if TYPE_CHECKING:  # the fields are made from the threshold names; a type checker sees the base
    AlarmOverrides = _AlarmOverridesBase
else:
    AlarmOverrides = create_model(
        "AlarmOverrides",
        __base__=_AlarmOverridesBase,
        __module__=__name__,
        **{key: ((PositiveInt | None) if key == _PERIOD_KEY else Any, None) for key in _ALARM_FIELD_OF_KEY},
    )


class LimitsSpec(_Strict):
    """What one adapter may take from the shared engine (`cdk_adapters.contract.tenant_limits.AdapterLimits`).

    Over ``max_queue`` or ``max_queue_wait_s`` the container answers 429 with ``Retry-After``.
    """

    weight: float | None = Field(default=None, ge=0.01, le=100)
    """Share of the engine while adapters compete (default 1): weight 2 is let in twice as often."""
    max_in_flight: PositiveInt | None = None
    """Places in the engine this adapter may hold at once (default: any)."""
    max_queue: int | None = Field(default=None, ge=0)
    """Requests that may wait for a place; one more gets 429 (default: any)."""
    max_queue_wait_s: float | None = Field(default=None, gt=0, le=60)
    """Seconds a request may wait before it gets 429 (default: as long as it takes)."""
    max_n: PositiveInt | None = None
    """Sequences one request may ask for (``n`` times its prompts); more gets 400 (default 4)."""

    def to_limits(self) -> AdapterLimits:
        """The contract's `AdapterLimits` for this row, its defaults for what the row leaves out."""
        from cdk_adapters.contract.tenant_limits import AdapterLimits

        return AdapterLimits(**self.model_dump(exclude_none=True))


class CaptureSpec(_Strict):
    """Per-adapter capture (`cdk_adapters.contract.capture_record.CaptureSettings`): a sampled copy of
    requests and answers in the endpoint's log, for drift checks and ``cdk-adapters eval --from-capture``."""

    sample_rate: float = Field(default=1.0, gt=0, le=1)
    """Share of requests captured (default 1: all)."""
    max_bytes: int = Field(default=16384, ge=1024, le=200_000)
    """Longest record written whole; a longer one keeps only its metadata (default 16384)."""
    redact: list[Literal["prompt", "messages", "response"]] = Field(default_factory=list)
    """Parts replaced by ``[redacted]`` before the record is written (a redacted record cannot be replayed)."""

    def to_settings(self) -> CaptureSettings:
        """The contract's `CaptureSettings` for this row (what the endpoint renders for the container)."""
        from cdk_adapters.contract.capture_record import CaptureSettings

        return CaptureSettings(self.sample_rate, self.max_bytes, tuple(dict.fromkeys(self.redact)))


class CheckSpec(_Strict):
    """This adapter's deploy-check request and expected answer (`cdk_adapters.deploy_check.deploy_check.AdapterCheck`);
    used when the endpoint has its deploy check on."""

    body: dict[NonEmpty, Any] | None = None
    """The request (completions ``prompt`` or chat ``messages``, no ``model``). Default: the endpoint's."""
    expect_text: NonEmpty | None = None
    """Text the answer must contain."""
    expect_json_keys: list[NonEmpty] | None = Field(default=None, min_length=1)
    """The answer must be a JSON object with these keys."""

    @field_validator("body")
    @classmethod
    def _body_routable(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        problems = body_messages(value) if value is not None else []
        if problems:
            raise ValueError("; ".join(f"{sub}: {message}" if sub else message for sub, message in problems))
        return value


class AdapterRow(_Strict):
    """One adapter: a versioned name, where it comes from, and who owns it."""

    name: NonEmpty
    """Versioned name such as ``support-triage-v3``; callers pass it as InferenceComponentName's suffix."""
    source: NonEmpty
    """``s3://bucket/key.tar.gz`` (published; needs a lock entry) or a local PEFT output directory
    (relative to the manifest file), packaged deterministically at synth."""
    owner: str | None = None
    """Team or person to ask about this adapter."""
    tags: dict[NonEmpty, str] = Field(default_factory=dict)
    """Free-form labels (tenant, cost centre); not sent to AWS."""
    include_tokenizer: bool = False
    """Local sources only: package tokenizer files saved beside the adapter too."""
    acknowledge: RuleAcknowledgment | None = None
    """One gate rule this adapter is allowed to break, with the reason: ``{rule: ..., reason: ...}``."""
    target_modules_differ_reason: NonEmpty | None = None
    """Deprecated (read for one more version): ``acknowledge: {rule: identical-target-modules, reason: ...}``."""
    traffic: TrafficSpec | None = None
    """Expected load (requests per minute, prompt and output tokens, peak factor) for `cdk-adapters plan`."""
    alarms: AlarmOverrides | None = None
    """Per-adapter alarms (error rate, p95 latency, cold-start share; throttled share and p95 queue
    wait when given a threshold): ``true`` with the endpoint's defaults, or a mapping of overrides of
    any `AlarmThresholds` field (``{latency_p95_ms: 8000, cold_start_share_percent: null}``).
    Default (or ``false``): none."""
    limits: LimitsSpec | None = None
    """Fair-share limits for this tenant: ``{weight: 2, max_in_flight: 8, max_queue: 32, max_queue_wait_s: 10}``.
    Default: the endpoint's (none unless the app sets ``adapter_limits``)."""
    capture: CaptureSpec | None = None
    """Capture a sampled copy of this adapter's requests and answers to the endpoint's log: ``true``
    (every request, 16 KiB at most each) or ``{sample_rate: 0.05, max_bytes: 8192, redact: [response]}``.
    Default (or ``false``): the endpoint's (nothing unless the app sets ``adapter_capture``)."""
    check: CheckSpec | None = None
    """Deploy check of this adapter: ``{body: {...}, expect_text: ..., expect_json_keys: [...]}``.
    Default: the endpoint's request, and any answer the adapter itself generated passes."""
    canary: bool = False
    """Serve a copy of this adapter on the canary endpoint too (the example app's canary stack),
    where base-model and image upgrades are validated first."""
    cell: str | None = Field(default=None, pattern=CELL_NAME_PATTERN)
    """In a service of several cells: the cell (``cell-0``, ``cell-1``, ...) this adapter's family
    is pinned to, e.g. a noisy or regulated tenant alone in its own. Default: the placement file,
    else the placement hash. Ignored by a single endpoint."""
    tier: int | None = Field(default=None, ge=1)
    """With ``serving.tiers``: the tier (its ``max_lora_rank``) this adapter is attached to, instead
    of the smallest holding its rank; how a row says to stay on, or move to, a tier when the tiers
    change (docs/rank-tiers.md). Default: the smallest tier holding its rank."""

    @property
    def is_s3(self) -> bool:
        return self.source.startswith("s3://")

    @field_validator("alarms", mode="before")
    @classmethod
    def _alarms_flag(cls, value: object) -> object:
        """``true`` is the defaults (no overrides), ``false`` none; anything else but a mapping is refused."""
        if value is True:
            return {}
        if value is False or value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"must be true, false or a mapping of overrides such as {{latency_p95_ms: 8000}}, got {value!r}")
        return value

    @field_validator("capture", mode="before")
    @classmethod
    def _capture_flag(cls, value: object) -> object:
        """``true`` is the defaults, ``false`` none."""
        if value is True:
            return {}
        if value is False:
            return None
        return value

    @field_validator("source")
    @classmethod
    def _source_form(cls, value: str) -> str:
        if value.startswith("s3://"):
            shape = "an S3 source must be s3://<bucket>/<key>.tar.gz (what cdk-adapters publish prints)"
            try:
                url = parse_s3_url(value)
            except S3UrlError as error:
                raise ValueError(f"{shape}: {error}") from None
            if not url.key.endswith(".tar.gz"):
                raise ValueError(shape)
        elif "://" in value:
            raise ValueError("must be s3://<bucket>/<key>.tar.gz or a local directory path")
        return value

    @property
    def acknowledgment(self) -> RuleAcknowledgment | None:
        """`acknowledge`, or what the deprecated `target_modules_differ_reason` stands for."""
        if self.acknowledge is None and self.target_modules_differ_reason is not None:
            return RuleAcknowledgment(rule="identical-target-modules", reason=self.target_modules_differ_reason)
        return self.acknowledge

    @model_validator(mode="after")
    def _one_acknowledgment(self) -> AdapterRow:
        if self.acknowledge is not None and self.target_modules_differ_reason is not None:
            raise ValueError(
                "give acknowledge or the deprecated target_modules_differ_reason, not both (a row acknowledges one rule)"
            )
        return self

    @model_validator(mode="after")
    def _tokenizer_only_local(self) -> AdapterRow:
        if self.include_tokenizer and self.is_s3:
            raise ValueError("include_tokenizer applies to local sources only; a published archive is packaged already")
        return self


class AdapterLocationSpec(_Strict):
    """A bucket prefix published adapters live under; the endpoint's role reads by location."""

    url: NonEmpty
    """``s3://bucket/prefix/`` (a missing trailing ``/`` is added)."""
    kms_key_arn: NonEmpty | None = None
    """The customer managed KMS key of the objects, if any."""

    @field_validator("url")
    @classmethod
    def _url_form(cls, value: str) -> str:
        try:
            parsed = parse_s3_url(value, key_required=False)
        except S3UrlError as error:
            raise ValueError(str(error)) from None
        if "*" in parsed.key or "?" in parsed.key:
            raise ValueError("a location is a plain key prefix such as s3://bucket/adapters/ (no wildcards)")
        return str(S3Url(parsed.bucket, as_prefix(parsed.key)))

    def contains(self, url: str) -> bool:
        """Whether the object at `url` lies under this prefix (the construct's rule: `S3Url.holds`)."""
        try:
            location, item = parse_s3_url(self.url, key_required=False), parse_s3_url(url)
        except S3UrlError:
            return False
        return location.holds(item.bucket, item.key)


class Manifest(_Strict):
    """The whole manifest file."""

    version: int = MANIFEST_VERSION
    """Schema version; only 1 exists."""
    base_model: BaseModelSpec
    serving: ServingLimits = Field(default_factory=ServingLimits)
    adapter_locations: list[AdapterLocationSpec] = Field(default_factory=list)
    """Where ``s3://`` rows may come from; every such row must lie under one of them."""
    adapters: list[AdapterRow] = Field(default_factory=list)
    aliases: dict[NonEmpty, NonEmpty | dict[NonEmpty, Any]] = Field(default_factory=dict)
    """Stable names callers use -> one versioned adapter (``support-en: support-en-v4``) or weights in
    percent (``support-en: {support-en-v4: 90, support-en-v5: 10}``). Published in the discovery
    record; rolling back is changing one row. The gate checks targets and weights (`alias_weights`)."""

    @field_validator("adapter_locations", mode="before")
    @classmethod
    def _plain_urls(cls, value: object) -> object:
        """``- s3://bucket/prefix/`` is short for ``- {url: s3://bucket/prefix/}``."""
        if isinstance(value, list):
            return [{"url": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != MANIFEST_VERSION:
            raise ValueError(f"only manifest version {MANIFEST_VERSION} exists")
        return value

    @property
    def cell_pins(self) -> dict[str, str]:
        """Adapter -> the cell its row pins it to (``cell:``), for the rows that pin one."""
        return {row.name: row.cell for row in self.adapters if row.cell is not None}

    @property
    def alias_weights(self) -> dict[str, dict[str, Any]]:
        """`aliases` with a single target written as ``{target: 100}``, the discovery record's form."""
        return {alias: {target: 100} if isinstance(target, str) else dict(target) for alias, target in self.aliases.items()}
