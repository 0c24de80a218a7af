"""Files must sit at the archive root: SageMaker extracts the archive and hands vLLM that folder."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG, MAX_ENTRIES
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    contents = context.contents
    assert contents is not None  # needs_contents: the rule runs only where the files are at hand
    kind = "archive" if contents.is_archive else "directory"
    if contents.root:
        advice = (
            f"re-create the archive from inside that folder (cdk-adapters package {contents.root} -o adapter.tar.gz)"
            if contents.is_archive
            else f"point the source at {contents.root}/ instead"
        )
        yield context.problem(
            "source",
            f"the {kind} nests the adapter under '{contents.root}/' but {ADAPTER_CONFIG} must sit at its "
            f"top level (SageMaker passes the extracted top folder to vLLM); {advice}",
        )
    for member, what in contents.unsafe_members:
        yield context.problem(
            "source",
            f"archive member '{member}' is {what}; an adapter archive holds regular files only, as "
            "cdk-adapters package DIR -o FILE writes it",
        )
    if not contents.complete:
        yield context.problem(
            "source",
            f"the {kind} holds more than {MAX_ENTRIES} files and folders; an adapter holds a few: point the "
            f"source at the folder with {ADAPTER_CONFIG} (only the first {MAX_ENTRIES} were read)",
        )


CHECK = AdapterRule(
    id="archive-layout",
    description="adapter files sit at the top of the directory or archive; no link, special or escaping archive members; a bounded number of entries",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
