"""What pyproject.toml cannot say: the serving image's sources travel inside the wheel.

`ContainerImage.from_asset()` builds the image from `container/Dockerfile`, which copies
`container/adapter_server/` and the standard-library part of `cdk_adapters`. A pip-installed
library has no repository around it, so the wheel carries `container/` as the package data
directory `cdk_adapters/_container/` (as aws-cdk ships asset sources inside its packages, e.g.
aws-ecs/lib/drain-hook/lambda-source/). Mapping the directory, rather than copying it into the
package, keeps one copy of every file in the repository.
"""

from setuptools import find_packages, setup

CONTAINER_PACKAGE = "cdk_adapters._container"
"""Must match `cdk_adapters.hosting.image_build_context.PACKAGED_CONTAINER`."""

setup(
    packages=[
        *find_packages(include=["cdk_adapters", "cdk_adapters.*"]),
        CONTAINER_PACKAGE,
        f"{CONTAINER_PACKAGE}.adapter_server",
    ],
    package_dir={CONTAINER_PACKAGE: "container"},
    package_data={CONTAINER_PACKAGE: ["Dockerfile"]},
)
