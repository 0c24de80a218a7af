"""An adapter cannot be much larger than its LoRA matrices; if it is, something else rode along.

A directory (what the container registers: SageMaker's extracted folder) is held to the same rule as
an archive: only the files an adapter needs, and a total within the LoRA bound. Sizes come from the
`lstat` listing, so an 8 GiB file is refused without reading a byte of it.

The bound is computed from the LoRA tensor shapes (rank x (in + out) per adapted module, in the
declared dtype) plus the small files that are allowed beside them.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import prod
from pathlib import PurePosixPath

from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG, ADAPTER_WEIGHTS, PICKLED_WEIGHTS, TOKENIZER_FILES
from cdk_adapters.gate.adapter_facts import module_path_of
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.gate.checks.merged_weights import FULL_MODEL_FILES
from cdk_adapters.gate.safetensors_header import DTYPE_BYTES, SafetensorsHeader
from cdk_adapters.problems import Problem

TAR_BLOCK = 512
ARCHIVE_SLACK_RATIO = 1.25
ARCHIVE_SLACK_BYTES = 64 * 1024
"""gzip of random-looking floats barely shrinks and never grows past a few per mille; tar pads to blocks."""


def lora_weights_bound(header: SafetensorsHeader) -> int:
    """Bytes a safetensors file needs for just its LoRA tensors (plus its header)."""
    data = 0
    for name, info in header.tensors.items():
        if module_path_of(name) is not None or name.endswith("lora_magnitude_vector"):
            data += prod(info.shape) * DTYPE_BYTES.get(info.dtype, 8)
    return 8 + header.header_bytes + data


DIRECTORY_ALLOWED = (ADAPTER_CONFIG, ADAPTER_WEIGHTS, *TOKENIZER_FILES, "README.md")
"""What a registered adapter directory may hold: PEFT's output (config, weights, model card) and the
tokenizer files packaged beside them. `cdk-adapters package` archives the same set."""

DIRECTORY_SMALL_FILE_BYTES = 16 * 1024 * 1024
"""A config, model card or tokenizer file above 16 MiB is no such file (a 256k-token tokenizer.json is ~10 MB)."""


def _refused_elsewhere(basename: str) -> bool:
    """Full-model weights (merged-weights) and pickled adapter weights (weights-file) have their own rules."""
    return basename in PICKLED_WEIGHTS or bool(FULL_MODEL_FILES.match(basename))


def _directory_problems(context: AdapterRuleContext) -> Iterator[Problem]:
    """A directory is bounded like an archive, from `lstat` sizes only (no file is read to size it)."""
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    others = {
        name: size
        for name, size in contents.files.items()
        if PurePosixPath(name).name not in DIRECTORY_ALLOWED and not _refused_elsewhere(PurePosixPath(name).name)
    }
    if others:
        biggest = sorted(others.items(), key=lambda item: (-item[1], item[0]))
        shown = "; ".join(f"{name} ({size} bytes)" for name, size in biggest[:4])
        more = f"; and {len(biggest) - 4} more" if len(biggest) > 4 else ""
        yield context.problem(
            "source",
            f"the directory holds files an adapter does not need ({shown}{more}); it may hold only "
            f"{', '.join(DIRECTORY_ALLOWED[:2])}, README.md and tokenizer files: copy those into a new folder "
            "and use that folder as the source",
        )
    small = {
        name: size
        for name, size in contents.files.items()
        if PurePosixPath(name).name != ADAPTER_WEIGHTS and name not in others and size > DIRECTORY_SMALL_FILE_BYTES
    }
    for name, size in small.items():
        yield context.problem(
            "source",
            f"{name} is {size} bytes; a config, model card or tokenizer file is at most {DIRECTORY_SMALL_FILE_BYTES}: "
            "replace it with the file PEFT or the tokenizer saved",
        )
    # With only those files, the total is bounded: the weights file must end where its header says (below),
    # and tensors that are not LoRA matrices are refused by merged-weights / modules-to-save.


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    header = contents.weights_header
    if not contents.is_archive and contents.complete:  # an incomplete listing: archive-layout refuses it
        yield from _directory_problems(context)
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
            size for name, size in contents.files.items() if PurePosixPath(name).name in (ADAPTER_CONFIG, *TOKENIZER_FILES)
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


CHECK = AdapterRule(
    id="size-bound",
    description="weights file ends where its header says; an archive, or a directory (allowed files only), is not far larger than its LoRA shapes allow",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
