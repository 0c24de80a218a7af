"""The shape of one gate check, in the manner of a cdk-nag rule: one concern per module."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.adapter_facts import AdapterFacts
from cdk_adapters.gate.base_model import BaseModelFacts
from cdk_adapters.gate.reference import Reference
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class AdapterRuleContext:
    """Everything a check may look at for one adapter.

    `contents` is None when the adapter is known only through its lock entry (an ``s3://`` source
    at synth): checks that need the files then ran when the archive was published or locked.
    """

    name: str
    reference: Reference
    facts: AdapterFacts | None
    contents: AdapterContents | None

    @property
    def base(self) -> BaseModelFacts:
        """Only read by rules with ``needs_base`` (or after checking `has_base`)."""
        assert self.reference.base is not None, "a rule read the base model without needs_base"
        return self.reference.base

    @property
    def has_base(self) -> bool:
        return self.reference.base is not None

    @property
    def max_lora_rank(self) -> int | None:
        """None means "derive it": only vLLM's largest allowed rank bounds the adapter."""
        return self.reference.max_lora_rank

    @property
    def allow_vision_modules(self) -> bool:
        return self.reference.allow_vision_modules

    @property
    def serves_tower_lora(self) -> bool:
        return self.reference.serves_tower_lora

    @property
    def subject(self) -> str:
        return f"adapter '{self.name}'"

    def problem(self, field: str, message: str) -> Problem:
        return Problem(subject=self.subject, field=field, message=message)


def with_rule(rule: str, problems: Iterable[Problem]) -> list[Problem]:
    """`problems`, each carrying the id of the rule that found it."""
    return [replace(problem, rule=rule) for problem in problems]


@dataclass(frozen=True)
class AdapterRule:
    """One rule, identified by `id` (its module's name, dashed). `needs_contents` rules run only
    where the files are at hand.

    Adapter rules are never acknowledgeable: the serving container runs every one of them again
    when SageMaker registers the adapter, so acknowledging one at synth would only move the
    failure to the deploy.
    """

    id: str
    description: str
    run: Callable[[AdapterRuleContext], Iterable[Problem]]
    needs_contents: bool = False
    needs_facts: bool = True
    needs_base: bool = False
    """Compares with the base model's facts: skipped where they are unknown (`Reference.base` None)."""
    acknowledgeable: bool = False

    def __call__(self, context: AdapterRuleContext) -> list[Problem]:
        if self.needs_contents and context.contents is None:
            return []
        if self.needs_base and not context.has_base:
            return []
        if self.needs_facts and context.facts is None:
            return []
        return with_rule(self.id, self.run(context))


def listed(names: Iterable[str]) -> str:
    """``['a', 'b']`` -> ``a, b``: module lists in messages, sorted for stable output."""
    return ", ".join(sorted(names)) or "(none)"


def examples(found: dict[str, str], shown: int = 4) -> str:
    """``where: detail; ...; and N more``: the first few places a problem occurs, in messages."""
    parts = [f"{where}: {detail}" for where, detail in list(found.items())[:shown]]
    more = len(found) - shown
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
