"""Which SageMaker instance types have local NVMe instance storage.

SageMaker rejects ``KmsKeyId`` on an endpoint config (and ``VolumeSizeInGB`` on its variant) when
the instance type has local instance storage: those volumes are encrypted by a hardware module on
the instance and no EBS volume is attached. Most GPU types used for LLMs (g5, g6, g6e, p4d, p5)
are such types, so the endpoint decides per instance type instead of always adding a key.
Standard-library only.
"""

from __future__ import annotations

import re

LOCAL_STORAGE_FAMILIES = frozenset(
    {
        "g4dn",
        "g5",
        "g6",
        "g6e",
        "g7e",
        "gr6",
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "p6e-gb200",
        "trn1",
        "trn1n",
    }
)
"""Accelerated families with instance-store NVMe volumes (from the EC2 instance store tables)."""

_INSTANCE_TYPE = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")
_GENERAL_PURPOSE_WITH_DISK = re.compile(r"^[a-z]+\d+[a-z]*d[n]?$")
"""c5d, m5d, r5d, c6gd, m6gd, r6id, ...: the 'd' marks a local disk."""


def instance_family(instance_type: str) -> str | None:
    match = _INSTANCE_TYPE.match(instance_type)
    return match["family"] if match else None


def has_local_instance_storage(instance_type: str) -> bool:
    """True when SageMaker refuses a KMS key and a volume size for `instance_type`."""
    family = instance_family(instance_type)
    if family is None:
        return False
    return family in LOCAL_STORAGE_FAMILIES or bool(_GENERAL_PURPOSE_WITH_DISK.match(family))
