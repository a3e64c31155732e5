"""``hif4 generate``: write a unit's Verilog and JSON manifest (or the standard set)."""

import sys
from pathlib import Path

from ._util import CLIError, atomic_output

DEFAULT_OUT = "rtl_out"


def register(subparsers):
    p = subparsers.add_parser(
        "generate", help="generate dot-product unit Verilog + JSON manifest",
        description="Generate a dot-product unit from the Amaranth generators in hwgen/: "
                    "writes OUT/<module>.v and OUT/<module>.json (ports, payload offsets, "
                    "latency, initiation interval, timing). Output is byte-identical across "
                    "runs and machines.")
    p.add_argument("--unit", help="unit to generate (hif4, mxfp4, nvfp4: see hwgen/units.py)")
    p.add_argument("--all", action="store_true",
                   help="generate the standard set of every registered unit instead of one")
    p.add_argument("--residual", default=None, choices=["none", "2:4", "dense"],
                   help="residual input: none, 2:4 (packed sparse residual), dense "
                        "(default: none)")
    p.add_argument("--stages", type=int, default=None,
                   help="pipeline register stages (default: the unit's default, 3 for hif4)")
    p.add_argument("--lanes", type=int, default=None, choices=[16, 32, 64],
                   help="element products per cycle; a step takes 64/lanes cycles "
                        "(default 64)")
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"output folder (default {DEFAULT_OUT}/; created if missing)")
    p.set_defaults(func=run)


def _configs(args):
    from hwgen.units import UNITS, standard_set
    if args.all:
        if args.unit or args.residual or args.stages or args.lanes:
            raise CLIError("--all writes the standard set; drop --unit/--residual/--stages/"
                           "--lanes, or drop --all")
        return standard_set()
    if not args.unit:
        raise CLIError("give --unit NAME (one of " + ", ".join(sorted(UNITS)) + ") or --all")
    if args.unit not in UNITS:
        raise CLIError(f"unknown unit {args.unit!r}; choose from {', '.join(sorted(UNITS))}")
    info = UNITS[args.unit]
    params = dict(info.defaults)
    for key in ("residual", "stages", "lanes"):
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    if params["residual"] not in info.residuals:
        raise CLIError(f"unit {args.unit} supports residual {', '.join(info.residuals)}, "
                       f"not {params['residual']!r}")
    return [(args.unit, params)]


def run(args):
    from hwgen.emit import unit_files
    from hwgen.units import build_unit

    configs = _configs(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for n, (unit, params) in enumerate(configs, 1):
        print(f"\r[{n}/{len(configs)}] generating {unit} {params} ...", end="", file=sys.stderr,
              flush=True)
        try:
            component = build_unit(unit, **params)
        except ValueError as exc:
            print(f"\r{' ' * 70}\r", end="", file=sys.stderr)
            raise CLIError(str(exc)) from None
        for name, text in unit_files(component).items():
            with atomic_output(out / name) as handle:
                handle.write(text.encode())
        print(f"\r{' ' * 70}\r", end="", file=sys.stderr)
        print(f"{out / component.module_name}.v  latency {component.latency}  "
              f"ii {component.ii}")
    return 0
