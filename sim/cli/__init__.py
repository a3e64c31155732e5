"""The ``hif4`` command-line tool: a thin face over the Python API.

Each subcommand lives in its own module ``sim.cli.<name>`` that defines
``register(subparsers)``; the module must import nothing heavy at the top level
(argparse builds every parser for ``--help``). A subcommand's handler raises
:class:`CLIError` for bad input; :func:`main` turns it into one line on stderr and
exit status 2 (argparse's usage errors too). A failed tool run (:class:`ToolError`, for
example a simulator build, naming its log) and an ``OSError`` are one line and exit status 1.
"""

import argparse
import importlib
import os
import sys

from hif4spec import __version__

from ._util import CLIError, ToolError

__all__ = ["main", "CLIError"]

# Order is the order shown in `hif4 --help`.
SUBCOMMANDS = [
    "quantize",
    "generate",
    "verify",
    "soak",
    "estimate",
    "simulate",
    "rl",
    "numerics",
    "bench",
    "sweep",
    "demo",
]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2), like
    every other bad input; ``--help`` shows the usage."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser():
    parser = _Parser(
        prog="hif4",
        description="Bit-true HiFloat4 / MXFP4 / NVFP4 toolkit: quantize tensors, generate and "
                    "verify dot-product RTL, estimate area and cycles, run RL numerics.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the toolkit version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except CLIError as exc:
        print(f"hif4 {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        # a simulator or synthesis build that failed: its log says why
        print(f"hif4 {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # the machine refused (disk full, a folder removed under us): not a bug to trace
        where = f" {str(exc.filename)!r}" if exc.filename else ""
        print(f"hif4 {args.command}: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `hif4 ... | head`: the reader went away; stop quietly like other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"hif4 {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
