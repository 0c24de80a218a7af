"""`MultiAdapterEndpoint`'s option objects, and the flat props they replaced.

Each option object must be of its class (checked before anything reads it). The old flat props
are still accepted, each mapped into its group, with a `FlatPropWarning` (a
`FutureWarning`) that names the new spelling, so existing stacks synthesize the same
template while their owners move. This table is the one place that knows the old names.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import jsii

import cdk_adapters
from cdk_adapters.endpoint.base_model_identity import BaseModelIdentity
from cdk_adapters.hosting.base_copies import BaseCopies
from cdk_adapters.hosting.instances import Instances
from cdk_adapters.hosting.networking import Networking
from cdk_adapters.problems import Problem, wrong_kind

GROUPS: Mapping[str, type[Any]] = {
    "instances": Instances,
    "base_copies": BaseCopies,
    "base_model": BaseModelIdentity,
    "networking": Networking,
}
"""Prop name -> its option object."""

FLAT_PROPS: Mapping[str, tuple[str, str]] = {
    "instance_type": ("instances", "instance_type"),
    "instance_pools": ("instances", "pools"),
    "instance_provisioning_timeout": ("instances", "provisioning_timeout"),
    "initial_instance_count": ("instances", "initial_count"),
    "min_instance_count": ("instances", "min_count"),
    "max_instance_count": ("instances", "max_count"),
    "volume_key": ("instances", "volume_key"),
    "volume_size_in_gb": ("instances", "volume_size_in_gb"),
    "inference_ami_version": ("instances", "ami_version"),
    "data_cache": ("instances", "data_cache"),
    "ssm_access": ("instances", "ssm_access"),
    "capacity_reservation": ("instances", "capacity_reservation"),
    "copy_count": ("base_copies", "count"),
    "startup": ("base_copies", "startup"),
    "copy_placement": ("base_copies", "placement"),
    "base_model_id": ("base_model", "model_id"),
    "base_model_revision": ("base_model", "revision"),
    "base_model_facts": ("base_model", "facts"),
    "vpc": ("networking", "vpc"),
    "vpc_subnets": ("networking", "vpc_subnets"),
    "security_groups": ("networking", "security_groups"),
    "network_isolation": ("networking", "network_isolation"),
}
"""Old flat prop -> (option prop, field of its option object)."""


class FlatPropWarning(FutureWarning):
    """A `MultiAdapterEndpoint` prop that now lives in an option object was passed flat.

    A FutureWarning, like the manifest's deprecations: Python shows it by default wherever the
    app's code is (a DeprecationWarning shows only for ``__main__``, so a stack module would hide it)."""


def regroup(groups: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """The option objects, with `flat` props folded into theirs (a given group object and one of
    its own flat props together are refused: which should win is not ours to guess)."""
    unknown = [name for name in flat if name not in FLAT_PROPS]
    if unknown:
        raise TypeError(f"MultiAdapterEndpoint() got an unexpected keyword argument {unknown[0]!r}")
    merged = dict(groups)
    moved: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        group, field = FLAT_PROPS[name]
        moved.setdefault(group, {})[field] = value
    for group, fields in moved.items():
        old = [name for name in flat if FLAT_PROPS[name][0] == group]
        if merged.get(group) is not None:
            raise TypeError(f"MultiAdapterEndpoint() got {group}= and {', '.join(old)}; give {_spelling(group, fields)} only")
        merged[group] = GROUPS[group](**fields)
        warnings.warn(
            f"MultiAdapterEndpoint({', '.join(f'{name}=' for name in old)}) is deprecated; pass {_spelling(group, fields)}",
            FlatPropWarning,
            stacklevel=_callers_level(),
        )
    return merged


def type_problems(groups: Mapping[str, Any], subject: str) -> list[Problem]:
    """An option object of another class (say, a string for ``instances``) is named, not read."""
    return [problem for group, value in groups.items() for problem in wrong_kind(subject, group, value, GROUPS[group])]


def _callers_level() -> int:
    """The `stacklevel` of the first frame outside this library and jsii (whose metaclass runs
    every construct's ``__init__``), so the warning names the user's line."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _is_ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _is_ours(filename: str) -> bool:
    return filename.startswith(_OUR_PACKAGES)


_OUR_PACKAGES = tuple(os.path.dirname(package.__file__ or "") + os.sep for package in (cdk_adapters, jsii))
"""The installed folders of this library and of jsii (a user's own folder of either name is not)."""


def _spelling(group: str, fields: Mapping[str, Any]) -> str:
    inner = ", ".join(f"{field}=..." for field in fields)
    return f"{group}={GROUPS[group].__name__}({inner})"
