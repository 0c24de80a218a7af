"""``cdk-adapters bake``: the gate between upgrade waves of a service of cells.

Deploy the first wave's cell stacks, then run ``bake``: it watches every alarm of those cells'
endpoints (the endpoint rollup's and each adapter's, named ``<component prefix>/...`` and
``<component prefix>-<adapter>/...``) for the bake time, and exits 1 naming the first one that
goes to ALARM, or 0 once the time passed quietly. Only then deploy the rest. A cell's own rolling
update already rolls its base component back on its alarms; ``bake`` stops the wave from reaching
the other cells.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cdk_adapters.cli.common import Failure, UsageError
from cdk_adapters.problems import Problem
from cdk_adapters.service.wave_handler.index import ALARM, watched_alarms


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "bake",
        help="watch a first wave's alarms for a bake time before the next wave deploys",
        description=(
            "Watch every alarm of the given cells' endpoints (read from the service record in SSM) or of the "
            "given endpoints, for --minutes. Exit 0 when none went to ALARM; exit 1 naming the first that did, "
            "or when there is no alarm to watch (a bake without alarms proves nothing)."
        ),
        epilog="Exit status: 0 quiet for the whole bake time; 1 an alarm fired, or nothing to watch; 2 usage error.",
    )
    parser.add_argument("--parameter", help="the service record's SSM parameter (with --cells)")
    parser.add_argument("--cells", nargs="+", default=["cell-0"], help="the first wave's cells (default: cell-0)")
    parser.add_argument("--endpoint", action="append", default=[], help="watch this endpoint's alarms instead (repeatable)")
    parser.add_argument("--minutes", type=float, required=True, help="the bake time")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between checks (default: 60)")
    parser.add_argument("--region", help="AWS region (default: the configured one)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    if args.minutes <= 0 or args.interval <= 0:
        raise UsageError("--minutes" if args.minutes <= 0 else "--interval", "must be above 0")
    if not args.parameter and not args.endpoint:
        raise UsageError("--parameter", "give the service record's --parameter (and --cells), or --endpoint")
    if args.parameter and args.endpoint:
        raise UsageError("--endpoint", "give --parameter (and --cells) or --endpoint, not both")
    import boto3

    session = boto3.session.Session(region_name=args.region)
    prefixes = args.endpoint or wave_prefixes(session.client("ssm"), args.parameter, args.cells)
    fired = watch(session.client("cloudwatch"), prefixes, seconds=args.minutes * 60, interval=args.interval, out=out)
    if fired:
        raise Failure([Problem("bake", "alarm", f"{name} is in ALARM: stop the wave") for name in fired], "the wave stops")
    out.write(f"bake passed: no alarm of {', '.join(prefixes)} fired in {args.minutes:g} minute(s); deploy the next wave\n")


def wave_prefixes(ssm: Any, parameter: str, cells: Sequence[str]) -> list[str]:
    """The component prefixes (alarm name prefixes) of `cells`, from the service record."""
    from cdk_adapters.contract.discovery import DiscoveryRecordError
    from cdk_adapters.contract.service_record import ServiceRecord

    try:
        record = ServiceRecord.from_json(ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    except DiscoveryRecordError as error:
        raise Failure(
            [Problem(parameter, "parameter", f"is no service record: {error}")], "cannot read the service record"
        ) from None
    unknown = [cell for cell in cells if cell not in record.cells]
    if unknown:
        known = ", ".join(record.cells)
        problems = [Problem(parameter, "--cells", f"{cell!r} is not a cell of the service ({known})") for cell in unknown]
        raise Failure(problems, "cannot find the first wave")
    return [record.cells[cell].component_prefix for cell in cells]


def watch(
    cloudwatch: Any,
    prefixes: Sequence[str],
    *,
    seconds: float,
    interval: float,
    out: TextIO,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Check the alarms of `prefixes` every `interval` seconds for `seconds`: the names in ALARM at
    the first check that finds any (empty: the bake passed). No alarm at all is a failure."""
    deadline = clock() + seconds
    while True:
        alarms = watched_alarms(cloudwatch, prefixes)
        if not alarms:
            raise Failure(
                [Problem("bake", "alarm", f"no alarm is named after {', '.join(prefixes)}: give the endpoints alarms first")],
                "nothing to watch",
            )
        fired = sorted(name for name, state in alarms.items() if state == ALARM)
        if fired:
            return fired
        left = deadline - clock()
        if left <= 0:
            return []
        out.write(f"{len(alarms)} alarm(s) quiet; {left / 60:.1f} minute(s) of bake time left\n")
        out.flush()
        sleep(min(interval, left))
