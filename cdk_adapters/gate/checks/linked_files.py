"""An adapter directory holds regular files only: a link is refused, never followed.

A link in the directory would be packaged (and served by the container) with the contents of
whatever it points at, possibly a file outside the adapter: a ``tokenizer.json`` linked to
another project's, or to a secret. Archives cannot hold links either (`archive-layout`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.contents is not None  # needs_contents: the rule runs only where the files are at hand
    for relative, target in context.contents.links.items():
        yield context.problem(
            "source",
            f"'{relative}' is a symbolic link to '{target}'; an adapter directory must hold regular files "
            "only, and links are never followed: replace the link with a copy of the file (cp -L), or "
            "download with huggingface_hub's local_dir= rather than into its cache, whose files are links",
        )


CHECK = AdapterRule(
    id="linked-files",
    description="the adapter directory holds no symbolic links (they are refused, never followed)",
    run=_run,
    needs_contents=True,
    needs_facts=False,
)
