"""Every ``hif4`` command line shown in README.md and docs/*.md parses: the subcommand
exists, every option it names exists and every value it gives an option with fixed
choices is one of them. Lines come from ``sh`` code blocks, and from the README's command
table (its backquoted ``hif4 ...`` cells)."""

import re
import shlex
from pathlib import Path

import pytest

from sim.cli import build_parser

ROOT = Path(__file__).parents[3]


def _commands():
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        in_sh, pending = False, ""
        for number, line in enumerate(path.read_text().splitlines(), 1):
            stripped = pending + line.strip()
            if in_sh and stripped.endswith("\\"):     # a continued shell line
                pending = stripped[:-1]
                continue
            pending = ""
            if stripped.startswith("```"):
                in_sh = not in_sh and stripped in ("```sh", "```bash", "```shell")
                continue
            where = f"{path.relative_to(ROOT)}:{number}"
            if in_sh and stripped.startswith("hif4 "):
                found.append((where, stripped.split(" #")[0].strip()))
            elif path.name == "README.md" and stripped.startswith("|"):
                found += [(where, cmd) for cmd in re.findall(r"`(hif4 [^`]+)`", stripped)]
    return found


COMMANDS = _commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 30
    assert any(where.startswith("README.md") for where, _ in COMMANDS)


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_parses(where, command):
    argv = shlex.split(command)[1:]
    for i, token in enumerate(argv):        # the command ends where the shell's syntax starts
        if token in (">", ">>", "|", "&&", ";", "2>&1"):
            argv = argv[:i]
            break
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_info:      # argparse reports bad input by exiting
        pytest.fail(f"{where}: `{command}` does not parse (exit {exit_info.code})")
    assert args.command == argv[0]
