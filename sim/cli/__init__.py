"""The ``hif4`` command-line tool: a thin face over the Python API.

Each subcommand lives in its own module ``sim.cli.<name>`` that defines
``register(subparsers)``; the module must import nothing heavy at the top level
(argparse builds every parser for ``--help``). A subcommand's handler raises
:class:`CLIError` for bad input; :func:`main` turns it into one line on stderr and
exit status 2.
"""

import argparse
import importlib
import os
import sys

from ._util import CLIError

__all__ = ["main", "CLIError"]

# Order is the order shown in `hif4 --help`.
SUBCOMMANDS = [
    "quantize",
    "generate",
    "verify",
    "estimate",
    "simulate",
    "rl",
    "numerics",
    "bench",
    "demo",
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="hif4",
        description="Bit-true HiFloat4 / MXFP4 / NVFP4 toolkit: quantize tensors, generate and "
                    "verify dot-product RTL, estimate area and cycles, run RL numerics.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue        # subcommand not built yet
            raise
        module.register(subparsers)
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
