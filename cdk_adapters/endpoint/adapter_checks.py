"""What `add_adapter` refuses, on the owned endpoint and on an imported one alike.

Both run the same sequence: the name (SageMaker's rules, the version suffix, not added yet), the
artifact on its own, the adapter's deploy-check request; then, only when those pass, the
compatibility gate against the endpoint's serving reference and the archive's location. What differs
is said by the caller: the owned endpoint adds its limits, capture and capacity checks, an import
its tenant-location rule, and each its own remedy for an archive outside every location.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cdk_adapters.artifacts.artifact import AdapterArtifact, S3Object
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.deploy_check.settings import AdapterCheck
from cdk_adapters.endpoint import names
from cdk_adapters.gate import Acknowledgment, Reference
from cdk_adapters.gate.check import new_adapter_name_problems
from cdk_adapters.gate.ranks import smallest_tier_holding
from cdk_adapters.problems import Problem

ALREADY_ADDED = "is already added (adapter names are case-insensitive, as SageMaker's are)"


def name_and_artifact_problems(
    name: str,
    artifact: AdapterArtifact,
    acknowledge: Acknowledgment | None,
    *,
    known: Iterable[str],
    is_added: Callable[[str], bool],
    subject: str,
) -> list[Problem]:
    """The name's rules (SageMaker's, the version suffix unless acknowledged, not added yet) and the artifact's own."""
    problems = names.validate_adapter_name(name, subject)
    problems += new_adapter_name_problems(known, name, acknowledge, subject)
    if isinstance(name, str) and is_added(name):
        problems.append(Problem(subject, "name", ALREADY_ADDED))
    problems += artifact.problems(subject)
    return problems


def check_request_problems(check: object, *, has_deploy_check: bool, subject: str, how_to_add: str) -> list[Problem]:
    """An adapter's own deploy-check request: its type, its fields, and a deploy check to run it."""
    if check is None:
        return []
    if not isinstance(check, AdapterCheck):
        return [Problem(subject, "check", f"must be an AdapterCheck, got {type(check).__name__}")]
    found = check.problems(subject, "check")
    if not has_deploy_check:
        found.append(Problem(subject, "check", how_to_add))
    return found


def gate_problems(
    name: str,
    artifact: AdapterArtifact,
    reference: Reference,
    location_problems: Callable[[AdapterArtifact, str], list[Problem]],
    subject: str,
) -> list[Problem]:
    """Run after the checks above pass: the compatibility gate on a local archive, then where the archive lies."""
    return artifact.compatibility_problems(name, reference) + location_problems(artifact, subject)


def containing_location(published: S3Object, locations: Sequence[AdapterLocation]) -> AdapterLocation | None:
    """The first declared location that holds the published object."""
    return next((loc for loc in locations if loc.contains(published.bucket_name, published.key)), None)


def outside_locations(
    published: S3Object, locations: Sequence[AdapterLocation], subject: str, *, whose: str, remedy: str
) -> Problem:
    """A published archive under none of the declared locations (the role reads adapters only there)."""
    declared = ", ".join(location.describe() for location in locations) or "none"
    return Problem(
        subject, published.field, f"{published.url} is outside every adapter location of {whose} (declared: {declared}); {remedy}"
    )


def owned_location_problems(artifact: AdapterArtifact, locations: Sequence[AdapterLocation], subject: str) -> list[Problem]:
    """The owned endpoint's rule: a published archive lies in a declared location, with its location's KMS key."""
    published = artifact.s3_object
    if published is None:
        return []
    location = containing_location(published, locations)
    if location is None:
        remedy = (
            "publish it under a declared location, or declare its bucket prefix with "
            "adapter_locations=[AdapterLocation.from_s3_url('s3://<bucket>/<prefix>/')]"
        )
        return [outside_locations(published, locations, subject, whose="this endpoint", remedy=remedy)]
    key = published.encryption_key
    if key is not None and (location.encryption_key is None or location.encryption_key.key_arn != key.key_arn):
        return [
            Problem(
                subject,
                "artifact.encryption_key",
                f"the object is encrypted with a KMS key its location {location.describe()} does not declare; "
                "pass the same key as the AdapterLocation's encryption_key so the role may decrypt it",
            )
        ]
    return []


def attach_tier(
    name: str, artifact: AdapterArtifact, given: int | None, tier: int | None, tier_ranks: Sequence[int], subject: str
) -> tuple[int | None, list[Problem]]:
    """The rank tier an adapter attaches to, and its problems. The tier is `tier` when given (a pin:
    one of the tiers, holding the rank), else the smallest holding its rank (as given, else a local
    archive's own). Refused: a rank unknown with more than one tier, below the archive's own, or
    above every tier."""
    listed = ", ".join(map(str, tier_ranks))
    for field, value in (("rank", given), ("tier", tier)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return None, [Problem(subject, field, f"must be a positive integer, got {value!r}")]
    own = artifact.lora_rank() if len(tier_ranks) > 1 or given is not None else None
    if given is not None and own is not None and own > given:
        return None, [
            Problem(subject, "rank", f"is {given}, but the archive's adapter has rank {own}; leave rank out or give {own}")
        ]
    rank = given if given is not None else own
    if tier is not None and tier not in tier_ranks:
        return None, [Problem(subject, "tier", f"({tier}) is none of the tiers' max_lora_rank ({listed})")]
    if rank is None:
        if len(tier_ranks) == 1:
            return tier, []
        return None, [
            Problem(subject, "rank", f"is needed to choose its tier ({listed}): pass add_adapter(rank=<the adapter's r>)")
        ]
    assert isinstance(rank, int)
    held = smallest_tier_holding(rank, tier_ranks)
    if held is None or (isinstance(tier, int) and tier < rank):
        where = f"above the pinned tier ({tier})" if held is not None else f"above every tier's max_lora_rank ({listed})"
        return None, [
            Problem(
                subject,
                "rank",
                f"adapter {name!r} has rank {rank}, {where}; add a RankTier that holds it, or retrain it with a lower rank",
            )
        ]
    return tier if isinstance(tier, int) else held, []
