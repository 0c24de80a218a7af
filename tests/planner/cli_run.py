"""Run `cdk-adapters` in-process and keep its exit status, stdout and stderr."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from cdk_adapters.cli import main


@dataclass
class Result:
    status: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


def plan(*args: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    status = main(["plan", *args], stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())
