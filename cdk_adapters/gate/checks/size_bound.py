"""An adapter cannot be much larger than its LoRA matrices; if it is, something else rode along.

The bound is computed from the LoRA tensor shapes (rank x (in + out) per adapted module, in the
declared dtype) plus the small files that are allowed beside them.
"""

from __future__ import annotations

from math import prod
from pathlib import PurePosixPath

from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG, ADAPTER_WEIGHTS, TOKENIZER_FILES
from cdk_adapters.gate.adapter_facts import module_path_of
from cdk_adapters.gate.checks.base import AdapterCheck, AdapterCheckContext
from cdk_adapters.gate.safetensors_header import DTYPE_BYTES

TAR_BLOCK = 512
ARCHIVE_SLACK_RATIO = 1.25
ARCHIVE_SLACK_BYTES = 64 * 1024
"""gzip of random-looking floats barely shrinks and never grows past a few per mille; tar pads to blocks."""


def lora_weights_bound(header) -> int:
    """Bytes a safetensors file needs for just its LoRA tensors (plus its header)."""
    data = 0
    for name, info in header.tensors.items():
        if module_path_of(name) is not None or name.endswith("lora_magnitude_vector"):
            data += prod(info.shape) * DTYPE_BYTES.get(info.dtype, 8)
    return 8 + header.header_bytes + data


def _run(context: AdapterCheckContext):
    contents = context.contents
    header = contents.weights_header
    if header is None:
        return
    if contents.weights_size is not None and contents.weights_size > header.expected_file_size:
        extra = contents.weights_size - header.expected_file_size
        yield context.problem(
            ADAPTER_WEIGHTS,
            f"{ADAPTER_WEIGHTS} has {extra} bytes after the tensors its header declares; "
            "the file is damaged or was appended to: re-save the adapter",
        )
    if contents.is_archive and contents.archive_size is not None:
        allowed_small = sum(
            size
            for name, size in contents.files.items()
            if PurePosixPath(name).name in (ADAPTER_CONFIG, *TOKENIZER_FILES)
        )
        members = len(contents.files)
        bound = lora_weights_bound(header) + allowed_small + TAR_BLOCK * (2 * members + 2) + 10 * 1024
        limit = int(bound * ARCHIVE_SLACK_RATIO) + ARCHIVE_SLACK_BYTES
        if contents.archive_size > limit:
            yield context.problem(
                "source",
                f"the archive is {contents.archive_size} bytes but a LoRA of these shapes "
                f"(rank {context.facts.max_rank if context.facts else '?'}) with its config and tokenizer files "
                f"needs at most about {bound}; it carries something else (a merged model, checkpoints, "
                "optimizer state): package it with cdk-adapters package DIR -o FILE",
            )


CHECK = AdapterCheck(
    id="size-bound",
    description="weights file ends where its header says; archive is not far larger than its LoRA shapes allow",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
