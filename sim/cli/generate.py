"""``hif4 generate``: write a unit's Verilog and JSON manifest (or the standard set)."""

import sys

from hif4spec import UNITS, standard_set

from ._util import (CLIError, add_unit_options, check_output_folder, make_folder, output_option,
                    unit_params, write_files)

DEFAULT_OUT = "rtl_out"


def register(subparsers):
    p = subparsers.add_parser(
        "generate", help="generate dot-product unit Verilog + JSON manifest",
        description="Generate a dot-product unit from the Amaranth generators in hwgen/: "
                    "writes OUT/<module>.v and OUT/<module>.json (ports, payload offsets, "
                    "latency, initiation interval, timing). Output is byte-identical across "
                    "runs and machines.")
    add_unit_options(p, unit_note="required unless --all")
    p.add_argument("--all", action="store_true",
                   help="generate the standard set of every registered unit instead of one")
    output_option(p, "--out", kind="folder", default=DEFAULT_OUT,
                   help=f"output folder (default {DEFAULT_OUT}/; created if missing, its "
                        "parent must exist)")
    p.set_defaults(func=run)


def _configs(args):
    if args.all:
        if args.unit or args.residual or args.stages or args.lanes or args.interleave:
            raise CLIError("--all writes the standard set; drop --unit/--residual/--stages/"
                           "--lanes/--interleave, or drop --all")
        return standard_set()
    if not args.unit:
        raise CLIError(f"give --unit NAME (one of {', '.join(UNITS)}) or --all")
    return [unit_params(args)]


def run(args):
    from hwgen.emit import unit_files
    from hwgen.units import build_unit

    from sim.progress import progress

    configs = _configs(args)
    out = check_output_folder(args.out, "--out")
    with progress(len(configs), "hif4 generate", enabled=len(configs) > 1, unit="unit") as bar:
        for unit, params in configs:
            bar.set_postfix_str(f"{unit} {params}", refresh=False)
            try:
                component = build_unit(unit, **params)
            except ValueError as exc:
                raise CLIError(str(exc)) from None
            files = unit_files(component)
            make_folder(out)
            write_files([(out / name, text.encode()) for name, text in files.items()])
            bar.write(f"{out / component.module_name}.v  latency {component.latency}  "
                      f"ii {component.ii}", file=sys.stdout)
            bar.update()
    return 0
