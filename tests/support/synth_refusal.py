"""What a refusal at synth time looks like from Python, pinned once.

Errors that only the finished tree shows are reported by the constructs' validations; the CDK collects
them and jsii raises them in Python as a `RuntimeError` whose text starts with `VALIDATION_FAILED`,
each error under its construct's path. Pinning that (not any `Exception`) tells a refusal apart from a
crash that merely mentions the same words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

VALIDATION_FAILED = "ValidationFailedWithErrors: Validation failed with the following errors"
TOO_MANY_RESOURCES = "TooManyResourcesInStack: Number of resources in stack"
"""The CDK's own check of a stack's ``maxResources`` (the fleet sets it on each shard)."""


@contextmanager
def refused_at_synth(*texts: str, construct: str | None = None, error: str = VALIDATION_FAILED) -> Iterator[pytest.ExceptionInfo]:
    """Expect the block to fail synth with `error` and every one of `texts` (under `construct`'s path)."""
    with pytest.raises(RuntimeError) as caught:
        yield caught
    message = str(caught.value)
    assert message.startswith(error), message
    for text in texts:
        assert text in message, f"{text!r} not in {message!r}"
    if construct is not None:
        assert f"[{construct}]" in message, message
