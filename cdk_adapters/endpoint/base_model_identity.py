"""`BaseModelIdentity`: which base model the endpoint serves, as adapters must name it; one option
object of `MultiAdapterEndpoint`.

The container checks every adapter SageMaker registers against it (``base_model_name_or_path``,
the pinned revision); with `facts`, `add_adapter` runs the same base-comparing rules on local
archives at synth.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_adapters.gate import BaseModelFacts


@dataclass(frozen=True)
class BaseModelIdentity:
    """The base model adapters are checked against. ``BaseModelIdentity()`` checks nothing."""

    model_id: str | None = None
    """The base model's identity (e.g. a Hugging Face repo id) that adapters must name in
    ``base_model_name_or_path``. Default: not checked."""
    revision: str | None = None
    """The base model's pinned revision (needs `model_id`). Default: not checked."""
    facts: BaseModelFacts | None = None
    """The base model's modules and shapes (``BaseModelFacts.from_model_dir(...)``;
    `endpoint_from_manifest` passes the manifest's), so the gate that checks each local archive at
    `add_adapter` also runs the rules comparing adapters with the base. Default None: those rules
    (``target-modules-in-base``, ``base-identity``, the layer widths of ``tensor-shapes``) run only
    in the container, when SageMaker registers the adapter."""
