"""Every subcommand explains itself: `hif4 --help` and `hif4 CMD --help` work."""

import subprocess
import sys

import pytest

from sim.cli import build_parser

# The subcommands the toolkit ships (README "Command line", `make demo`), in `hif4 --help`
# order; written here, not read from the parser under test.
EXPECTED = ["quantize", "generate", "verify", "soak", "estimate", "simulate", "rl", "numerics",
            "bench", "sweep", "demo"]


def _present():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return list(action.choices)


def test_parser_has_exactly_the_documented_subcommands():
    assert _present() == EXPECTED


def test_top_level_help_lists_subcommands():
    result = subprocess.run([sys.executable, "-m", "sim.cli", "--help"],
                            capture_output=True, text=True, check=True)
    for name in EXPECTED:
        assert name in result.stdout


@pytest.mark.parametrize("name", EXPECTED)
def test_subcommand_help(name):
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args([name, "--help"])
    assert exit_info.value.code == 0


def test_every_option_has_help():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    for name, sub in action.choices.items():
        for option in sub._actions:
            if option.dest == "help":
                continue
            assert option.help, f"hif4 {name}: option {option.option_strings or option.dest} " \
                                "has no help text"


def test_no_subcommand_prints_help_and_fails():
    result = subprocess.run([sys.executable, "-m", "sim.cli"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "usage: hif4" in result.stdout


def test_version():
    """``hif4 --version`` prints the version of the installed package."""
    from importlib.metadata import version

    result = subprocess.run([sys.executable, "-m", "sim.cli", "--version"],
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.strip() == f"hif4 {version('hif4-toolkit')}"
