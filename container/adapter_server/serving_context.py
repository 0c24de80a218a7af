"""What start-up learns about this server, and every request reads.

Start-up fills it in once, from the environment and vLLM's own arguments. Until then it holds
harmless defaults, and `Readiness` refuses every request that would need the rest (for good, if
start-up fails part way).
"""

from __future__ import annotations

from adapter_server import observability
from adapter_server.admission import FairAdmission
from adapter_server.capture_log import CaptureLog, StandardOutputCaptureLog
from adapter_server.engine_routes import EngineRoutes
from adapter_server.refusal_pacing import RefusalPacing
from adapter_server.registrations import RegistrationStore
from adapter_server.settings import ServingSettings
from cdk_adapters.gate import BaseModelFacts, Reference
from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK


class ServingContext:
    """The settings, engine, base model and registrations shared by registration and inference."""

    def __init__(self) -> None:
        self.settings = ServingSettings()
        self.store = RegistrationStore(None)
        self.engine: EngineRoutes | None = None
        self.base: BaseModelFacts | None = None
        self.max_lora_rank = VLLM_DEFAULT_MAX_LORA_RANK
        self.tower_connector_lora = False
        """vLLM's --enable-tower-connector-lora, read from its parsed arguments at start-up."""
        self.served_model_names: frozenset[str] = frozenset()
        self.base_model_name = ""
        """The name requests for the base model are sent to vLLM under (its first served name)."""
        self.residency = observability.ResidencyTracker(1)
        self.admission: FairAdmission | None = None
        """Fair share across adapters (None: off, requests go to vLLM as they come)."""
        self.refusal_pacing = RefusalPacing()
        """Each tenant's refusals past a burst leave at a bounded rate (`refusal_pacing`)."""
        self.capture_log: CaptureLog = StandardOutputCaptureLog()
        """Where captured records go (the capture log group, one stream per adapter, once start-up
        has read the settings)."""

    @property
    def reference(self) -> Reference:
        """What registered adapters are checked against: the served base, vLLM's --max-lora-rank
        and --enable-tower-connector-lora, and CDK_ADAPTERS_ALLOW_VISION_MODULES (available once
        start-up has read the base)."""
        assert self.base is not None, "start-up reads the base model before any registration"
        return Reference(self.base, self.max_lora_rank, self.settings.allow_vision_modules, self.tower_connector_lora)
