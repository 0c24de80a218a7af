"""`BaseCopies`: how many copies of the base model run, how long one may take to start, and how
they spread over instances; one option object of `MultiAdapterEndpoint`."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdk_adapters.hosting.compute import StartupTimeouts
from cdk_adapters.hosting.copy_placement import CopyPlacement


@dataclass(frozen=True)
class BaseCopies:
    """The base inference component's copies. ``BaseCopies()`` is one copy, 20-minute startup."""

    count: int = 1
    """Copies at creation, kept in every later template (autoscaling moves the live count; the
    template never follows it). Default 1."""
    startup: StartupTimeouts = field(default_factory=StartupTimeouts)
    """Download and health-check timeouts. Default 20 minutes each."""
    placement: CopyPlacement | None = None
    """How the copies spread over instances and zones (`CopyPlacement(strategy="SPREAD")` spreads
    them). Default None: SageMaker's placement."""

    def __post_init__(self) -> None:
        if self.startup is None:  # None means the default, as the flat ``startup=None`` always did
            object.__setattr__(self, "startup", StartupTimeouts())
