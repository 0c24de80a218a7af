"""Shell access to the endpoint's instances through AWS Systems Manager (``EnableSSMAccess``).

Off by default, as in SageMaker. Turning it on lets anyone allowed to start an SSM session reach
the instances that hold the base model and every adapter's weights, so it takes a stated reason,
as a cdk-nag acknowledgment does; the reason is kept on the construct for reviewers.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_adapters.problems import Problem

MIN_REASON_LENGTH = 20


@dataclass(frozen=True)
class SsmAccess:
    """Turn SSM access on for the variant's instances, saying why (at least 20 characters)."""

    reason: str

    def problems(self, subject: str) -> list[Problem]:
        if isinstance(self.reason, str) and len(self.reason.strip()) >= MIN_REASON_LENGTH:
            return []
        return [
            Problem(
                subject,
                "instances.ssm_access.reason",
                f"must say why sessions into the instances are needed (at least {MIN_REASON_LENGTH} characters), "
                f"got {self.reason!r}",
            )
        ]
