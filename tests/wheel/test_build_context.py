"""The build context `from_asset()` assembles outside a checkout, without building a wheel: laid out
from this checkout's files as an installed package holds them, it must be exactly the context the
repository's `.dockerignore` lets through, so the two ways of building the image cannot drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdk_adapters.hosting import image_build_context
from cdk_adapters.hosting.container_image import ContainerImage
from tests.container.test_image import in_build_context

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture
def installed_layout(monkeypatch, tmp_path):
    """No checkout beside the package, and the wheel's `_container/` where the checkout has `container/`."""
    monkeypatch.setattr(image_build_context, "REPOSITORY_ROOT", tmp_path / "no-checkout")
    monkeypatch.setattr(image_build_context, "PACKAGED_CONTAINER", REPO_ROOT / "container")
    assert not image_build_context.in_checkout()


def test_assembled_context_is_what_dockerignore_lets_through(installed_layout, tmp_path):
    assembled = _tree(image_build_context.assemble(tmp_path / "context"))
    # The checkout's context, as Docker reads it: .dockerignore lets the Dockerfile through too.
    expected = {
        f"{top}/{name}": data
        for top in ("cdk_adapters", "container")
        for name, data in _tree(REPO_ROOT / top).items()
        if in_build_context(f"{top}/{name}")
    }
    assert "cdk_adapters/gate/check.py" in assembled and "cdk_adapters/endpoint/endpoint.py" not in assembled
    assert assembled == expected


def test_assembling_again_replaces_what_was_there(installed_layout, tmp_path):
    stale = tmp_path / "context" / "cdk_adapters" / "endpoint.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("left over")
    image_build_context.assemble(tmp_path / "context")
    assert not stale.exists()


def test_an_installation_without_the_image_sources_is_a_problem(monkeypatch, tmp_path):
    monkeypatch.setattr(image_build_context, "REPOSITORY_ROOT", tmp_path / "no-checkout")
    monkeypatch.setattr(image_build_context, "PACKAGED_CONTAINER", tmp_path / "missing")
    (problem,) = ContainerImage.from_asset().problems("E")
    assert (problem.subject, problem.field) == ("E", "image")
    assert "lacks container/Dockerfile of the serving image's build context" in problem.message


def test_another_dockerfile_needs_a_directory_outside_a_checkout(installed_layout):
    (problem,) = ContainerImage.from_asset(file="container/Dockerfile.gpu").problems("E")
    assert "file='container/Dockerfile.gpu' needs directory=" in problem.message
    assert ContainerImage.from_asset().problems("E") == []
