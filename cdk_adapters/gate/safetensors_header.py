"""Reading a safetensors file's header without loading a single tensor.

A safetensors file starts with an 8-byte little-endian header length, then a JSON header naming
every tensor with its dtype, shape and byte range. Everything the gate needs (which modules an
adapter touches, at what rank, how big it should be) is in that header, so checks stay fast and
need neither torch nor the `safetensors` package.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MAX_TENSORS = 131_072
"""The most tensors an adapter's safetensors file may declare.

A dense model's largest plausible adapter: Llama-3-70B has 80 layers x 7 linear modules (q, k, v,
o, gate, up, down); all-linear LoRA saves lora_A and lora_B for each = 80 x 7 x 2 = 1,120 tensors
(rank does not change the count; DoRA's magnitude vectors or lora_B biases add one per module:
at most 80 x 7 x 4 = 2,240). The largest MoE case we know of, per-expert LoRA on DeepSeek-V3 (61
layers x 256 experts x 3 expert matrices x 2) = 93,696, still fits with a 40% margin; dense adapters
sit 58x below the cap. Parsing and checking 131,072 entries takes well under a second here, where
an unbounded header of a few million tiny entries took tens of seconds."""

MAX_TENSOR_DIMS = 8
"""A LoRA tensor is 2-D (DoRA magnitudes 1-D, MoE expert stacks 3-D); a long shape list is an attack."""

HEADER_BYTES_PER_TENSOR = 256
"""A PEFT header entry is ~160 bytes (``"base_model.model.model.layers.79.mlp.experts.255.gate_proj.lora_A.weight":
{"dtype":"BF16","shape":[512,7168],"data_offsets":[12345678901,12345678901]}``); 256 leaves room."""

MAX_HEADER_BYTES = MAX_TENSORS * HEADER_BYTES_PER_TENSOR + 1024 * 1024
"""131,072 x 256 B + 1 MiB of ``__metadata__`` = 33 MiB (the reference implementation allows 100 MB, which
here took 27 s to gate). Checked before a byte of the header is read or allocated."""

DTYPE_BYTES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "F4": 1,
    "F6_E2M3": 1,
    "F6_E3M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}


class SafetensorsHeaderError(ValueError):
    """The bytes are not a readable safetensors header; the message says why."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header declares it."""

    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]


@dataclass(frozen=True)
class SafetensorsHeader:
    """The parsed header: tensors by name, metadata, and the size the file must have."""

    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    header_bytes: int

    @property
    def expected_file_size(self) -> int:
        """8 length bytes + header + the end of the last tensor's data."""
        data_end = max((info.data_offsets[1] for info in self.tensors.values()), default=0)
        return 8 + self.header_bytes + data_end


def read_safetensors_header(source: Path | IO[bytes]) -> SafetensorsHeader:
    """Parse the header of a safetensors file (a path or an open binary stream)."""
    if isinstance(source, (str, Path)):
        with open(source, "rb") as stream:
            return _read(stream)
    return _read(source)


def _read(stream: IO[bytes]) -> SafetensorsHeader:
    prefix = stream.read(8)
    if len(prefix) < 8:
        raise SafetensorsHeaderError("file is shorter than the 8-byte safetensors header length")
    (length,) = struct.unpack("<Q", prefix)
    if length == 0:
        raise SafetensorsHeaderError("declared header length 0 is not plausible; this is not a safetensors file")
    if length > MAX_HEADER_BYTES:
        raise SafetensorsHeaderError(
            f"declared header length {length} bytes is above the {MAX_HEADER_BYTES} an adapter's header can need "
            f"({MAX_TENSORS} tensors at most); this is not a LoRA adapter's weights file"
        )
    raw = stream.read(length)
    if len(raw) < length:
        raise SafetensorsHeaderError("file ends inside the safetensors header (truncated)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:  # ValueError: JSONDecodeError, or a 5000-digit number
        raise SafetensorsHeaderError(f"header is not JSON ({str(error)[:200]}); this is not a safetensors file") from None
    except RecursionError:
        raise SafetensorsHeaderError("header nests too deeply; this is not a safetensors file") from None
    if not isinstance(header, dict):
        raise SafetensorsHeaderError("header is not a JSON object; this is not a safetensors file")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise SafetensorsHeaderError("header's __metadata__ is not a JSON object; this is not a safetensors file")
    if len(header) > MAX_TENSORS:
        raise SafetensorsHeaderError(
            f"header declares {len(header)} tensors; a LoRA adapter has far fewer (at most {MAX_TENSORS} are "
            "read): this is not a LoRA adapter's weights file"
        )
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        tensors[name] = _tensor_info(name, entry)
    return SafetensorsHeader(tensors=tensors, metadata=dict(metadata), header_bytes=length)


def _tensor_info(name: str, entry: object) -> TensorInfo:
    raw_shape = entry.get("shape") if isinstance(entry, dict) else None
    if isinstance(raw_shape, list) and len(raw_shape) > MAX_TENSOR_DIMS:  # refused before converting a single dim
        raise SafetensorsHeaderError(f"tensor {name!r} declares more than {MAX_TENSOR_DIMS} dimensions")
    try:
        fields: dict[str, Any] = entry  # type: ignore[assignment]  # a non-dict entry raises TypeError below, as intended
        dtype = fields["dtype"]
        shape = tuple(int(dim) for dim in fields["shape"])
        start, end = (int(offset) for offset in fields["data_offsets"])
    except (TypeError, KeyError, ValueError):
        raise SafetensorsHeaderError(f"tensor {name!r} has a malformed header entry") from None
    if end < start or start < 0:
        raise SafetensorsHeaderError(f"tensor {name!r} has invalid data offsets")
    return TensorInfo(dtype=str(dtype), shape=shape, data_offsets=(start, end))
