"""``cdk diff`` through the real CDK CLI between two cloud assemblies, nested stacks included.

``cdk diff --template OLD STACK`` compares one top-level stack. A nested stack's template is not a
stack of the assembly, so for each nested template that differs we write a one-stack cloud
assembly around the new template and let the CLI diff it against the old one (``--app`` accepts
an assembly directory). Templates whose bytes are equal are reported as unchanged without a CLI
run (the CLI would print nothing for them; each run costs about two seconds).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.constructs.conftest import run_cdk

NESTED_SUFFIX = ".nested.template.json"


def diff_lines(output: str) -> list[str]:
    """The resource and output lines of ``cdk diff`` ([+] added, [-] removed, [~] modified), each
    followed by the properties it changes: ``[~] AWS::X Path LogicalId {TemplateURL}``."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    found: list[str] = []
    properties: list[str] = []
    for line in plain.splitlines():
        if re.match(r"^\[[+~-]\] ", line):
            found.append(line.strip())
            properties = []
        elif found and (match := re.match(r"^ [└├]─ \[[+~-]\] (\S+)", line)):
            properties.append(match[1])
            found[-1] = found[-1].split(" {")[0] + " {" + ", ".join(properties) + "}"
    return found


@dataclass
class AssemblyDiff:
    """Per template file: the CLI's change lines; and the templates that did not change at all."""

    changed: dict[str, list[str]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [line for lines in self.changed.values() for line in lines]


def stack_diff(new_assembly: Path, old_template: Path, stack: str) -> list[str]:
    """The real CLI's diff of `stack` in `new_assembly` against `old_template`."""
    result = run_cdk("diff", "--app", str(new_assembly), "--template", str(old_template), stack)
    assert result.returncode == 0, result.stdout + result.stderr
    return diff_lines(result.stdout + result.stderr)


def nested_diff(new_template: Path, old_template: Path, scratch: Path) -> list[str]:
    """The real CLI's diff of one nested template against its previous version."""
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(new_template, scratch / "Nested.template.json")
    manifest = {
        "version": json.loads((new_template.parent / "manifest.json").read_text())["version"],
        "artifacts": {
            "Nested": {
                "type": "aws:cloudformation:stack",
                "environment": "aws://unknown-account/unknown-region",
                "properties": {"templateFile": "Nested.template.json"},
            }
        },
    }
    (scratch / "manifest.json").write_text(json.dumps(manifest))
    return stack_diff(scratch, old_template, "Nested")


def diff_assemblies(old: Path, new: Path, stack: str, scratch: Path) -> AssemblyDiff:
    """Diff `stack` and every nested template of `new` against `old`, through the real CLI."""
    report = AssemblyDiff()
    parent = f"{stack}.template.json"
    report.changed[parent] = stack_diff(new, old / parent, stack)
    if not report.changed[parent]:
        del report.changed[parent]
        report.unchanged.append(parent)
    old_nested = {path.name: path for path in old.glob(f"*{NESTED_SUFFIX}")}
    new_nested = {path.name: path for path in new.glob(f"*{NESTED_SUFFIX}")}
    report.added = sorted(set(new_nested) - set(old_nested))
    report.removed = sorted(set(old_nested) - set(new_nested))
    for index, name in enumerate(sorted(set(old_nested) & set(new_nested))):
        if old_nested[name].read_bytes() == new_nested[name].read_bytes():
            report.unchanged.append(name)
        else:
            report.changed[name] = nested_diff(new_nested[name], old_nested[name], scratch / f"nested-{index}")
    return report
