"""One adapter identity, whichever name SageMaker sends.

The construct names an adapter's inference component ``<component prefix>-<adapter name key>``
(`adapter_names.adapter_component_name`). What SageMaker passes to the container is UNCONFIRMED:
the registration's ``name``, the ``X-Amzn-SageMaker-Adapter-Alias`` header and the
``X-Amzn-SageMaker-Adapter-Identifier`` header on each invocation may carry the component name or
the adapter's own name. The container is therefore told the component prefix
(`COMPONENT_PREFIX_ENV`) and maps every name it is given through `adapter_key`, so that either
answer reaches the same registration, limits, fair-share lane, capture policy, metrics dimension
and usage row. The construct renders limits and capture under the same key, and its metrics,
alarms and dashboard query it.

Standard library only (the serving image copies this package).
"""

from __future__ import annotations

from collections.abc import Mapping

from cdk_adapters.contract.adapter_names import adapter_name_key

COMPONENT_PREFIX_ENV = "CDK_ADAPTERS_COMPONENT_PREFIX"
"""The endpoint's component prefix (``<stack prefix>-<hash>``), rendered by the construct so the
container can recognise a component name and reduce it to the adapter it serves."""


def adapter_key(name: str, component_prefix: str | None) -> str:
    """The adapter's identity for every per-adapter feature: its name key, with the component
    prefix (``<prefix>-``) removed when `name` is a component name of this endpoint.

    ``adapters-dev-69212e86-Support-EN-v1`` and ``support-en-v1`` are one adapter (the prefix is
    compared ignoring case, as SageMaker compares names). A name outside the prefix is its own key.
    """
    key = adapter_name_key(name)
    if component_prefix:
        lead = adapter_name_key(component_prefix) + "-"
        if key.startswith(lead) and len(key) > len(lead):
            return key[len(lead) :]
    return key


def component_prefix_from(environ: Mapping[str, str]) -> str | None:
    """`COMPONENT_PREFIX_ENV` as the container reads it (None: unset, names are taken as given)."""
    value = environ.get(COMPONENT_PREFIX_ENV, "").strip()
    return value or None


def environment(component_prefix: str) -> dict[str, str]:
    """The container variable for `component_prefix` (the construct renders it)."""
    return {COMPONENT_PREFIX_ENV: component_prefix}
