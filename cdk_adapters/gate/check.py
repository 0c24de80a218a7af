"""The compatibility gate's entry points: one adapter (directory, archive or lock facts) and a fleet.

Every function returns all problems at once, each carrying its rule's id; callers decide whether
to raise (`cdk_adapters.problems.raise_if_any`) or to answer 4xx (the serving container). Each
adapter is checked against a `Reference`: the base model's facts and the serving limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from cdk_adapters.contract.adapter_names import VERSION_SUFFIX
from cdk_adapters.gate.acknowledgments import Acknowledgment, reason_error, rule_error
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.adapter_facts import AdapterFacts
from cdk_adapters.gate.checks import ADAPTER_CHECKS, AdapterRuleContext
from cdk_adapters.gate.checks.co_hosted import CO_HOSTED_CHECKS, VERSION_SUFFIX_CHECK, CoHostedAdapter
from cdk_adapters.gate.ranks import smallest_allowed_max_lora_rank
from cdk_adapters.gate.reference import Reference
from cdk_adapters.problems import Problem


def check_adapter_contents(name: str, contents: AdapterContents, reference: Reference) -> list[Problem]:
    """Run every adapter check on files already read (directory or archive)."""
    return _run(AdapterRuleContext(name=name, reference=reference, facts=AdapterFacts.from_contents(contents), contents=contents))


def check_adapter_dir(name: str, path: Path, reference: Reference) -> list[Problem]:
    """Check a PEFT output directory (or the folder SageMaker extracted an archive into).

    Reads only the file list, adapter_config.json and the safetensors header: fast enough to run
    on every ``POST /adapters``.
    """
    return check_adapter_contents(name, AdapterContents.from_dir(path), reference)


def check_adapter_archive(name: str, path: Path, reference: Reference) -> list[Problem]:
    """Check a ``.tar.gz`` adapter archive in place, including its layout and size."""
    return check_adapter_contents(name, AdapterContents.from_archive(path), reference)


def check_adapter_facts(name: str, facts: AdapterFacts, reference: Reference) -> list[Problem]:
    """Check an adapter known only through its lock entry (file-level checks ran when it was locked)."""
    return _run(AdapterRuleContext(name=name, reference=reference, facts=facts, contents=None))


def check_co_hosted(adapters: Sequence[CoHostedAdapter]) -> list[Problem]:
    """Checks across adapters sharing one endpoint: unique names, -v<N> suffix, same target modules."""
    return [problem for check in CO_HOSTED_CHECKS for problem in check(adapters)]


def new_adapter_name_problems(known: Iterable[str], name: object, acknowledge: object, subject: str) -> list[Problem]:
    """The manifest's version-suffix rule for one adapter added beside `known` ones (same message
    and rule id), unless `acknowledge` names it; a malformed acknowledgment is a problem itself."""
    if acknowledge is not None:
        if not isinstance(acknowledge, Acknowledgment):
            return [Problem(subject, "acknowledge", f"must be an Acknowledgment(rule, reason), got {acknowledge!r}")]
        errors = [e for e in (rule_error(acknowledge.rule), reason_error(acknowledge.reason)) if e is not None]
        if errors:
            return [Problem(subject, "acknowledge", error) for error in errors]
    if not isinstance(name, str) or not name or (acknowledge is not None and acknowledge.rule == VERSION_SUFFIX_CHECK.id):
        return []
    if VERSION_SUFFIX.match(name):
        return []  # the rule reads only the new name; the known ones shape the suggestion, so a
        # well-named adapter costs nothing per known adapter (adding N stays linear in N)
    adapters = [CoHostedAdapter(other, ()) for other in known] + [CoHostedAdapter(name, ())]
    return [problem for problem in VERSION_SUFFIX_CHECK(adapters) if problem.subject == f"adapter '{name}'"]


def covering_max_lora_rank(facts: Iterable[AdapterFacts]) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that serves every adapter given."""
    return smallest_allowed_max_lora_rank(f.max_rank for f in facts if f.max_rank is not None)


def _run(context: AdapterRuleContext) -> list[Problem]:
    return [problem for check in ADAPTER_CHECKS for problem in check(context)]
