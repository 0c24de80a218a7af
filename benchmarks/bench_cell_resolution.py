"""What a client's adapter -> cell resolution costs with 10 cells against one.

`ServiceRecord.cell_of` is what a multi-cell client runs before each call. Each timed candidate
resolves 100,000 calls over 10,000 adapters (2,000 families, each with 5 versions, in a skewed
stream), side by side in one run (`interleaved_medians`):

* warm: one record for the whole stream, so after its first call a family is a dict lookup;
* cold: a new record every 1,000 calls, so each new family pays its alias scan and rendezvous
  hash (one sha256 per cell) again.

Then the whole client call: `AdapterClient.invoke` over the same skewed stream (20,000 calls),
with botocore serializing and signing each request and a ``before-send`` hook answering it with a
canned completion instead of the network, so the ratio is everything the client and botocore do
per call with 10 cells against one.

    .venv/bin/python -m benchmarks.bench_cell_resolution [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import sys

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.service_record import ServiceRecord

CALLS = 100_000


def _service(cells: int) -> ServiceRecord:
    records = {
        name: DiscoveryRecord(
            endpoint_name=f"svc-{name}", base_inference_component_name=f"svc-{name}-base", component_prefix=f"svc-{name}"
        )
        for name in cell_names(cells)
    }
    return ServiceRecord.from_placement(records, PlacementRecord())


def _stream() -> list[str]:
    rng = random.Random(7)
    names = [f"tenant{family:04d}-v{version}" for family in range(2_000) for version in range(1, 6)]
    weights = [1 / (rank + 1) for rank in range(len(names))]
    return rng.choices(names, weights=weights, k=CALLS)


def _resolve(cells: int, stream: list[str], renew_every: int | None) -> None:
    service = _service(cells)
    for index, name in enumerate(stream):
        if renew_every is not None and index % renew_every == 0:
            service = _service(cells)
        service.cell_of(name)


WHOLE_CALLS = 20_000
ANSWER = b'{"choices": [{"index": 0, "text": " ok"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'


def _runtime():
    """A real ``sagemaker-runtime`` client that never leaves the process: each request is answered by a hook."""
    import io

    import boto3
    from botocore.awsrequest import AWSResponse

    class _Raw(io.BytesIO):
        def stream(self, **_):
            yield self.getvalue()

    runtime = boto3.client("sagemaker-runtime", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="k")
    runtime.meta.events.register(
        "before-send.sagemaker-runtime.InvokeEndpoint",
        lambda request, **_: AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Raw(ANSWER)),
    )
    return runtime


def _invoke(cells: int, stream: list[str], runtime) -> None:
    from cdk_adapters.client import AdapterClient

    client = AdapterClient(_service(cells), runtime=runtime)
    for name in stream:
        client.invoke(name, "x", max_tokens=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    stream = _stream()
    runs = {
        f"{kind}, {cells} cell(s)": (lambda c=cells, r=renew: _resolve(c, stream, r))
        for kind, renew in (("warm", None), ("cold", 1_000))
        for cells in (1, 10)
    }
    medians = interleaved_medians(runs, rounds=args.rounds)
    print_table(f"{CALLS:,} resolutions (median of {args.rounds} interleaved rounds)", medians, baseline="warm, 1 cell(s)")
    for kind in ("warm", "cold"):
        ratio = medians[f"{kind}, 10 cell(s)"] / medians[f"{kind}, 1 cell(s)"]
        print(f"{kind}: 10 cells / 1 cell = {ratio:.3f}x; {medians[f'{kind}, 10 cell(s)'] / CALLS * 1e6:.2f} us per call with 10")
    runtime, calls = _runtime(), stream[:WHOLE_CALLS]
    whole = interleaved_medians(
        {f"{cells} cell(s)": (lambda c=cells: _invoke(c, calls, runtime)) for cells in (1, 10)}, rounds=args.rounds
    )
    print_table(f"{WHOLE_CALLS:,} whole AdapterClient.invoke calls (botocore, answered in-process)", whole, baseline="1 cell(s)")
    print(
        f"whole call: 10 cells / 1 cell = {whole['10 cell(s)'] / whole['1 cell(s)']:.3f}x; {whole['10 cell(s)'] / WHOLE_CALLS * 1e6:.0f} us per call"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
