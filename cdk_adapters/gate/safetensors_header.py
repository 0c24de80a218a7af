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
from typing import BinaryIO

MAX_HEADER_BYTES = 100 * 1024 * 1024
"""The reference implementation refuses larger headers; so do we, before allocating them."""

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


def read_safetensors_header(source: Path | BinaryIO) -> SafetensorsHeader:
    """Parse the header of a safetensors file (a path or an open binary stream)."""
    if isinstance(source, (str, Path)):
        with open(source, "rb") as stream:
            return _read(stream)
    return _read(source)


def _read(stream: BinaryIO) -> SafetensorsHeader:
    prefix = stream.read(8)
    if len(prefix) < 8:
        raise SafetensorsHeaderError("file is shorter than the 8-byte safetensors header length")
    (length,) = struct.unpack("<Q", prefix)
    if length == 0 or length > MAX_HEADER_BYTES:
        raise SafetensorsHeaderError(
            f"declared header length {length} is not plausible; this is not a safetensors file"
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
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        tensors[name] = _tensor_info(name, entry)
    return SafetensorsHeader(tensors=tensors, metadata=dict(metadata), header_bytes=length)


def _tensor_info(name: str, entry: object) -> TensorInfo:
    try:
        dtype = entry["dtype"]  # type: ignore[index]
        shape = tuple(int(dim) for dim in entry["shape"])  # type: ignore[index]
        start, end = (int(offset) for offset in entry["data_offsets"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise SafetensorsHeaderError(f"tensor {name!r} has a malformed header entry") from None
    if end < start or start < 0:
        raise SafetensorsHeaderError(f"tensor {name!r} has invalid data offsets")
    return TensorInfo(dtype=str(dtype), shape=shape, data_offsets=(start, end))
