"""Whether a value is an unresolved CDK token, without a jsii round trip for plain strings.

`Token.is_unresolved` crosses into jsii's Node process on every call; on the per-adapter path of a
thousand-adapter fleet that adds up. CDK encodes every string token as ``${Token[...]}`` inside
the string, so a string without that marker is literal and needs no round trip.
"""

from __future__ import annotations

from aws_cdk import Token

STRING_TOKEN_MARKER = "${Token["


def is_unresolved(value: object) -> bool:
    if isinstance(value, str) and STRING_TOKEN_MARKER not in value:
        return False
    return Token.is_unresolved(value)
