"""The tier record: which base component (rank tier) each manifest row is attached to, committed beside the manifest.

An adapter component names its base component once. When the tiers change under it (a tier
inserted below its own, or its own removed), the placement rule would attach it to another base,
and whether SageMaker moves a component between base components in place is unconfirmed. So
``cdk-adapters tiers`` records each row's base component (``base``, ``base-r64``) in
``<manifest>.tiers.json``, and synth refuses a row the rule would put on another base component unless the row says so: ``tier:`` names the tier it is
to be on (its recorded one, to stay; another, to move it on purpose). Rows the record does not name
yet (new ones) are placed by the rule. No record file: nothing was recorded, nothing is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from cdk_adapters.endpoint.names import tier_suffix
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS, smallest_tier_holding
from cdk_adapters.problems import ConfigurationError, Problem

TIER_RECORD_SUFFIX = ".tiers.json"
TIER_RECORD_VERSION = 1
RECORDED_BASE = re.compile(rf"base(-r({'|'.join(map(str, ALLOWED_MAX_LORA_RANKS))}))?")
"""What the record holds per adapter: its base component's name after the endpoint's prefix."""


def tier_record_path_for(manifest_path: Path) -> Path:
    """``manifests/example.yaml`` -> ``manifests/example.tiers.json``."""
    manifest_path = Path(manifest_path)
    return manifest_path.with_name(manifest_path.name.rsplit(".", 1)[0] + TIER_RECORD_SUFFIX)


def load_tier_record(path: Path) -> dict[str, str]:
    """Adapter -> the base component it was recorded on (``base``, ``base-r64``: the name after the
    endpoint's prefix); an absent file records none."""
    path = Path(path)
    if not path.exists():
        return {}
    subject = f"tier record '{path}'"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigurationError([Problem(subject, "(file)", f"cannot be read as JSON: {error}")]) from None
    tiers = document.get("tiers") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("version") != TIER_RECORD_VERSION or not isinstance(tiers, dict):
        raise ConfigurationError(
            [
                Problem(
                    subject,
                    "(file)",
                    f'must be {{"version": {TIER_RECORD_VERSION}, "tiers": {{adapter: "base" or "base-r<rank>"}}}}',
                )
            ]
        )
    bad = [name for name, base in tiers.items() if not isinstance(base, str) or not RECORDED_BASE.fullmatch(base)]
    if bad:
        raise ConfigurationError([Problem(subject, f"tiers.{name}", 'must be "base" or "base-r<rank>"') for name in bad])
    return dict(tiers)


def tier_record_text(placement: Mapping[str, int], first_rank: int) -> str:
    """The file's text for `placement` (adapter -> tier rank): each adapter's base component, sorted,
    indented JSON that diffs well in review."""
    bases = {name: tier_suffix(rank, first_rank=first_rank) for name, rank in sorted(placement.items())}
    return json.dumps({"version": TIER_RECORD_VERSION, "tiers": bases}, indent=2) + "\n"


def place_on_tiers(
    rows: Sequence[tuple[str, int | None, int | None]], tier_ranks: Sequence[int], recorded: Mapping[str, str]
) -> tuple[dict[str, int], list[Problem]]:
    """Each row's tier rank, from ``(name, rank, pin)``: its pin, else the smallest tier holding its
    rank (no rank known: the first tier); and every problem: a pin that is no tier or is below the
    rank, and a row placed on another base component than its recorded one without a pin saying so
    (the first tier's rank changing moves its adapters too: its base is ``base`` whatever its rank)."""
    listed = ", ".join(map(str, tier_ranks))
    placement: dict[str, int] = {}
    problems: list[Problem] = []
    for name, rank, pin in rows:
        subject = f"adapter '{name}'"
        if pin is not None and pin not in tier_ranks:
            problems.append(Problem(subject, "tier", f"({pin}) is none of the tiers' max_lora_rank ({listed})"))
            continue
        if pin is not None and rank is not None and pin < rank:
            problems.append(Problem(subject, "tier", f"({pin}) cannot hold the adapter's rank {rank} (tiers: {listed})"))
            continue
        tier = pin if pin is not None else smallest_tier_holding(rank or 1, tier_ranks)
        if tier is None:
            continue  # above every tier: the gate's rank rule reports it
        was, now = recorded.get(name), tier_suffix(tier, first_rank=tier_ranks[0])
        if pin is None and was is not None and was != now:
            problems.append(_move_problem(subject, was, now, tier, rank, tier_ranks))
            continue
        placement[name] = tier
    return placement, problems


def _move_problem(subject: str, was: str, now: str, tier: int, rank: int | None, tier_ranks: Sequence[int]) -> Problem:
    """A row the rule would put on another base component than the record's, and how to say which."""
    stay = next((r for r in tier_ranks if tier_suffix(r, first_rank=tier_ranks[0]) == was and r >= (rank or 1)), None)
    keep = f"`tier: {stay}` keeps it on {was}, " if stay is not None else f"{was} cannot hold it any more; "
    return Problem(
        subject,
        "tier",
        f"would move from base component {was}, where the tier record has it, to {now} (the rank-{tier} tier): "
        f"name its tier: {keep}`tier: {tier}` moves it (which changes the component's base in place); then run "
        "`cdk-adapters tiers`",
    )
