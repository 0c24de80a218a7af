"""The conditions the execution role's S3 and KMS grants carry, shared by every place that makes one.

* ``s3:ResourceAccount``: a bucket name is global, so a grant on ``arn:aws:s3:::<name>/...`` alone
  would also read a bucket of that name in another account (after a deletion, or a typo). The
  condition holds the grant to buckets owned by the expected account.
* ``kms:ViaService``: the role decrypts SSE-KMS objects through S3 only; the same key cannot be
  used for a direct ``kms:Decrypt`` call.
"""

from __future__ import annotations

import re

from aws_cdk import Aws, Token

ACCOUNT_ID = re.compile(r"^\d{12}$")


def s3_owned_by(account: str) -> dict[str, dict[str, str]]:
    """Hold an S3 grant to buckets owned by `account` (a 12-digit id or a token)."""
    return {"StringEquals": {"s3:ResourceAccount": account}}


def kms_via_s3() -> dict[str, dict[str, str]]:
    """Let a key decrypt only when S3 calls KMS for the role, in the stack's region (SageMaker reads
    model data from buckets in its own region)."""
    return {"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}}


def account_problem(value: object) -> str | None:
    """Why `value` is not an account id (None when it is one, or a token resolved at deploy)."""
    if isinstance(value, str) and (Token.is_unresolved(value) or ACCOUNT_ID.match(value)):
        return None
    return f"must be a 12-digit AWS account id (the bucket's owner), got {value!r}"
