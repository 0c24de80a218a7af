"""Local mode's event-stream framing, read back by botocore's own parser (`botocore.eventstream`)."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from cdk_adapters.local.event_stream import encode_message, model_stream_error, payload_part


def parsed(data: bytes) -> list[dict]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [message.to_response_dict() for message in buffer]


def test_payload_parts_parse_as_sagemaker_events_with_their_bytes():
    pieces = [b'data: {"choices": [{"text": "Hi"}]}\n\n', "ünïcode split".encode()[:5], b""]
    messages = parsed(b"".join(payload_part(piece) for piece in pieces))
    assert [m["body"] for m in messages] == pieces
    assert all(m["status_code"] == 200 for m in messages)
    assert messages[0]["headers"] == {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }


def test_a_message_split_across_reads_is_reassembled():
    whole = payload_part(b"x" * 1000) + payload_part(b"y")
    buffer = EventStreamBuffer()
    bodies = []
    for start in range(0, len(whole), 7):
        buffer.add_data(whole[start : start + 7])
        bodies += [message.payload for message in buffer]
    assert bodies == [b"x" * 1000, b"y"]


def test_a_model_stream_error_is_an_exception_message():
    (message,) = parsed(model_stream_error("engine died", "ModelStreamError"))
    assert message["status_code"] == 400
    assert message["headers"][":exception-type"] == "ModelStreamError"
    assert json.loads(message["body"]) == {"Message": "engine died", "ErrorCode": "ModelStreamError"}


@pytest.mark.parametrize("position", [5, 14, -2])
def test_a_corrupted_byte_fails_botocores_checksum(position):
    data = bytearray(encode_message({":message-type": "event", ":event-type": "PayloadPart"}, b"payload"))
    data[position] ^= 0x01
    with pytest.raises(ChecksumMismatch):
        parsed(bytes(data))
