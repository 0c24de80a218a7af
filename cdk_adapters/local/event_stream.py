"""AWS's binary event-stream framing, written by local mode the way SageMaker's streaming route is.

InvokeEndpointWithResponseStream answers ``application/vnd.amazon.eventstream``: a sequence of
messages, each ``prelude (total length, headers length, CRC32 of both) | headers | payload |
CRC32 of everything before``, all integers big-endian. botocore parses it with
``botocore.eventstream``; a ``PayloadPart`` event carries the container's bytes, and an
exception message (``ModelStreamError``) ends a stream that failed after it started.
"""

from __future__ import annotations

import json
import struct
import zlib

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
"""The header value type for a UTF-8 string."""


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string `headers`."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head))


def payload_part(data: bytes) -> bytes:
    """A ``PayloadPart`` event carrying `data` (a piece of the container's answer)."""
    return encode_message(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, data
    )


def model_stream_error(message: str, error_code: str = "ModelStreamError") -> bytes:
    """The exception event SageMaker sends when the model's stream fails mid-way."""
    body = json.dumps({"Message": message, "ErrorCode": error_code}).encode()
    return encode_message(
        {":exception-type": "ModelStreamError", ":content-type": "application/json", ":message-type": "exception"}, body
    )


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", _STRING, len(raw_value)) + raw_value
