"""``cdk-adapters invoke ADAPTER PROMPT``: call an adapter (or alias) and stream its answer to the terminal.

Against local mode (``--local URL``) or a deployed endpoint through its discovery record
(``--parameter NAME``), with the same `AdapterClient` an application uses. What the model (or the
record, or the container's error) says is printed without terminal escape sequences.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cdk_adapters.cli.common import PROG, Failure, UsageError
from cdk_adapters.cli.terminal import TerminalText, printable
from cdk_adapters.problems import Problem

if TYPE_CHECKING:
    from cdk_adapters.client import Target

DEFAULT_LOCAL_URL = "http://127.0.0.1:8080"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    invoke = commands.add_parser(
        "invoke",
        help="call an adapter or alias and stream the answer (local mode or a deployed endpoint)",
        description=(
            "Call ADAPTER (an adapter or alias name) with PROMPT and stream the answer to stdout; which "
            "adapter served it goes to stderr. Against local mode (--local, the default) or a deployed "
            "endpoint found through its discovery record (--parameter, an SSM parameter name)."
        ),
    )
    invoke.add_argument(
        "words",
        nargs="+",
        metavar="ADAPTER PROMPT",
        help="the adapter or alias, then the prompt (only the prompt with --base-model)",
    )
    where = invoke.add_mutually_exclusive_group()
    where.add_argument("--local", metavar="URL", help=f"cdk-adapters local at URL (default: {DEFAULT_LOCAL_URL})")
    where.add_argument("--parameter", metavar="NAME", help="SSM parameter holding the endpoint's discovery record")
    invoke.add_argument("--region", help="AWS region for --parameter (default: your AWS configuration's)")
    invoke.add_argument(
        "--accept-endpoint",
        action="append",
        metavar="NAME",
        dest="accept_endpoints",
        help="only call this endpoint (repeatable; a trailing '*' makes it a prefix, e.g. 'prod-chat-*'): "
        "a discovery record naming another is refused (default: the one the record names)",
    )
    invoke.add_argument("--chat", action="store_true", help="send PROMPT as a chat message (default: a completion)")
    invoke.add_argument(
        "--image", action="append", type=Path, default=[], help="attach an image file (repeatable; implies --chat)"
    )
    invoke.add_argument("--max-tokens", type=int, default=64, help="default: 64")
    invoke.add_argument("--temperature", type=float, help="sampling temperature (default: the model's)")
    invoke.add_argument("--no-stream", action="store_true", help="wait for the whole answer instead of streaming it")
    invoke.add_argument("--base-model", action="store_true", help="call the base model (only where the endpoint allows it)")
    invoke.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from cdk_adapters.client import AdapterClient, AdapterClientError

    expected = 1 if args.base_model else 2
    if len(args.words) != expected:
        shape = "PROMPT (with --base-model)" if args.base_model else "ADAPTER PROMPT"
        raise UsageError("ADAPTER PROMPT", f"expected {shape}, got {len(args.words)} word(s); quote the prompt")
    adapter, prompt = (None, args.words[0]) if args.base_model else (args.words[0], args.words[1])
    options = {"max_tokens": args.max_tokens}
    if args.temperature is not None:
        options["temperature"] = args.temperature
    if args.chat or args.image:
        call = {"messages": [{"role": "user", "content": prompt}], "images": args.image}
    else:
        call = {"prompt": prompt}
    subject = f"adapter '{adapter}'" if adapter else "base model"
    try:
        try:
            if args.parameter:
                client = AdapterClient.from_parameter(
                    args.parameter, region_name=args.region, accept_endpoints=args.accept_endpoints
                )
            else:
                client = AdapterClient.from_local(args.local or DEFAULT_LOCAL_URL, accept_endpoints=args.accept_endpoints)
        except ValueError as error:  # only a malformed --accept-endpoint (client errors are AdapterClientError)
            if isinstance(error, AdapterClientError):
                raise
            raise UsageError("--accept-endpoint", str(error)) from None
        if args.no_stream:
            answer = client.invoke(adapter, base_model=args.base_model, **call, **options)
            _served_by(err, adapter, answer.target)
            out.write(printable(answer.text))
        else:
            stream = client.stream(adapter, base_model=args.base_model, **call, **options)
            _served_by(err, adapter, stream.target)
            safe = TerminalText()
            for piece in stream.text():
                out.write(safe.feed(piece))
                out.flush()
            out.write(safe.finish())
        out.write("\n")
    except AdapterClientError as error:
        raise Failure([Problem(subject, "invoke", printable(str(error)))], "the call failed") from None


def _served_by(err: TextIO, asked: str | None, target: Target) -> None:
    shown = asked if asked == target.adapter else f"{asked} -> {target.adapter}"
    where = f", canary endpoint {target.endpoint_name}" if target.canary else ""
    err.write(printable(f"{PROG}: {shown or 'base model'} (InferenceComponentName={target.component}{where})") + "\n")
    err.flush()
