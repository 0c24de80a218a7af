"""Where the serving image comes from: a digest-pinned ECR URI, or an asset built from `container/`.

The asset's build context is the repository root in a checkout, and the same files assembled from
the installed package otherwise (`cdk_adapters.hosting.image_build_context`), so the default works from a
``pip install`` too.

A tag can be moved after review; a digest cannot. So a tag-only URI is refused unless the caller
opts in with ``allow_floating_tag=True``. SageMaker pulls only from Amazon ECR (private registries
need VPC mode, which this library does not model), so URIs must name an ECR repository; that also
lets the execution role be scoped to exactly that repository.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Stage, Token
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from cdk_adapters.hosting import image_build_context
from cdk_adapters.problems import Problem

_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?P<china>\.cn)?"
    r"/(?P<repository>[a-z0-9][a-z0-9._/-]*?)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)

DEFAULT_DOCKERFILE = image_build_context.DOCKERFILE
REPOSITORY_ROOT = image_build_context.REPOSITORY_ROOT
"""Build context of `ContainerImage.from_asset()` in a checkout: the repository root, so the image
can copy `cdk_adapters/` (the shared compatibility gate) beside `container/`."""

ASSEMBLED_CONTEXT_DIR = "cdk-adapters-image-context"
"""Outside a checkout, the build context is assembled here, in the cloud assembly's asset folder:
it lives exactly as long as the assembly that refers to it."""

ALWAYS_EXCLUDED = (".git", ".venv", "node_modules", "cdk.out", "**/__pycache__", ".pytest_cache", ".tmp")
"""Never part of the build context, whatever `.dockerignore` says: big, local or generated."""


@dataclass(frozen=True)
class ContainerImageConfig:
    """What the endpoint needs from a bound image."""

    image_uri: str
    repository_arn: str
    """The ECR repository the execution role may pull from (and nothing else)."""


class ContainerImage(ABC):
    """The serving image for the base model's container."""

    @staticmethod
    def from_digest_uri(uri: str) -> ContainerImage:
        """An ECR image pinned by digest: ``<acct>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:<hex>``."""
        return _UriImage(uri, require_digest=True, allow_floating_tag=False)

    @staticmethod
    def from_uri(uri: str, *, allow_floating_tag: bool = False) -> ContainerImage:
        """An ECR image by URI. A tag without a digest is refused unless `allow_floating_tag` is True,
        because whoever can push that tag can change what runs."""
        return _UriImage(uri, require_digest=False, allow_floating_tag=allow_floating_tag)

    @staticmethod
    def from_asset(
        directory: str | Path | None = None,
        *,
        file: str = DEFAULT_DOCKERFILE,
        build_args: Mapping[str, str] | None = None,
        platform: ecr_assets.Platform | None = None,
    ) -> ContainerImage:
        """Built by ``cdk deploy`` from this library's `container/Dockerfile`.

        `directory` is the build context and `file` the Dockerfile relative to it. Default: the
        repository root in a checkout; from a pip install, the same files assembled from the
        installed package. ``cdk synth`` only fingerprints the context; it does not build.
        """
        return _AssetImage(Path(directory) if directory else None, file, dict(build_args or {}), platform)

    @abstractmethod
    def problems(self, subject: str) -> list[Problem]:
        """Every problem with this image; `subject` names the construct in messages."""

    @abstractmethod
    def bind(self, scope: Construct) -> ContainerImageConfig:
        """Create what the image needs under `scope` and say how to use it."""


class _UriImage(ContainerImage):
    def __init__(self, uri: str, *, require_digest: bool, allow_floating_tag: bool) -> None:
        self.uri = uri
        self.require_digest = require_digest
        self.allow_floating_tag = allow_floating_tag

    def problems(self, subject: str) -> list[Problem]:
        if not isinstance(self.uri, str) or Token.is_unresolved(self.uri):
            return [Problem(subject, "image", "the image URI must be a literal string, so it can be checked and pinned")]
        match = _ECR_URI.match(self.uri)
        if not match:
            return [
                Problem(
                    subject,
                    "image",
                    f"{self.uri!r} is not an Amazon ECR image URI "
                    "(<account>.dkr.ecr.<region>.amazonaws.com/<repository>[:tag]@sha256:<digest>); "
                    "copy the image into ECR first",
                )
            ]
        if match["digest"]:
            return []
        if self.require_digest:
            return [Problem(subject, "image", f"{self.uri!r} has no @sha256: digest; from_digest_uri needs one")]
        if not self.allow_floating_tag:
            return [
                Problem(
                    subject,
                    "image",
                    f"{self.uri!r} is pinned only by a tag, which can be moved to another image; pin a "
                    "digest (ContainerImage.from_digest_uri) or opt in with allow_floating_tag=True",
                )
            ]
        return []

    def bind(self, scope: Construct) -> ContainerImageConfig:
        match = _ECR_URI.match(self.uri)
        assert match, "bind() is only called after problems() found none"
        partition = "aws-cn" if match["china"] else Aws.PARTITION
        arn = f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"
        return ContainerImageConfig(image_uri=self.uri, repository_arn=arn)


class _AssetImage(ContainerImage):
    def __init__(
        self, directory: Path | None, file: str, build_args: dict[str, str], platform: ecr_assets.Platform | None
    ) -> None:
        self.directory = directory
        """``None``: this library's own context (the checkout's, or assembled from the package)."""
        self.file = file
        self.build_args = build_args
        self.platform = platform

    @property
    def _assembled(self) -> bool:
        return self.directory is None and not image_build_context.in_checkout()

    def problems(self, subject: str) -> list[Problem]:
        if self._assembled:
            if self.file != DEFAULT_DOCKERFILE:
                return [
                    Problem(
                        subject,
                        "image",
                        f"file={self.file!r} needs directory=: outside a checkout the build context is the one "
                        f"the installed package carries, whose Dockerfile is {DEFAULT_DOCKERFILE}",
                    )
                ]
            missing = image_build_context.missing_from_installation()
            if missing:
                return [
                    Problem(
                        subject,
                        "image",
                        f"the installed cdk-adapters at {image_build_context.PACKAGE_DIR} lacks {', '.join(missing)} "
                        "of the serving image's build context; reinstall it from a wheel built from the repository "
                        "(or pass directory= and file= to ContainerImage.from_asset)",
                    )
                ]
            return []
        dockerfile = (self.directory or REPOSITORY_ROOT) / self.file
        if not dockerfile.is_file():
            return [
                Problem(
                    subject,
                    "image",
                    f"no Dockerfile at {dockerfile}; ContainerImage.from_asset() needs this repository's "
                    "container/ directory (or pass directory= and file=)",
                )
            ]
        return []

    def bind(self, scope: Construct) -> ContainerImageConfig:
        directory = self.directory or REPOSITORY_ROOT
        if self._assembled:
            directory = image_build_context.assemble(Path(_stage(scope).asset_outdir) / ASSEMBLED_CONTEXT_DIR)
        asset = ecr_assets.DockerImageAsset(
            scope,
            "ServingImage",
            directory=str(directory),
            file=self.file,
            build_args=self.build_args or None,
            platform=self.platform or ecr_assets.Platform.LINUX_AMD64,
            exclude=list(ALWAYS_EXCLUDED),
        )
        return ContainerImageConfig(image_uri=asset.image_uri, repository_arn=asset.repository.repository_arn)


def _stage(scope: Construct) -> Stage:
    """The stage (app) holding `scope`; every construct tree synthesized has one."""
    stage = Stage.of(scope)
    if stage is None:
        raise ValueError(f"{scope.node.path!r} is in no CDK app or stage")
    return stage
