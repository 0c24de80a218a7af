"""A package's names imported on first use (PEP 562 ``__getattr__``), so importing the package
starts no heavy dependency (aws-cdk-lib's runtime) until a name that needs it is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's ``__getattr__``: `exports` maps each name to the module that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
