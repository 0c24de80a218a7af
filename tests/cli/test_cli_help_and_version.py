"""The top-level CLI: `--version` and a help that lists every command."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

from cdk_adapters.cli import COMMANDS, build_parser


def test_version_is_the_distributions():
    done = subprocess.run([sys.executable, "-m", "cdk_adapters.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout == f"cdk-adapters {importlib.metadata.version('cdk-adapters')}\n"


def test_top_level_help_lists_every_command_with_its_summary():
    parser = build_parser()
    (subcommands,) = [action for action in parser._actions if action.dest == "command"]
    assert len(subcommands.choices) == len(COMMANDS)
    shown = parser.format_help()
    for choice in subcommands._choices_actions:
        assert choice.dest in shown and choice.help, choice.dest
    assert "fix-torchvision" in shown and "local" in shown and "plan" in shown and "--version" in shown
