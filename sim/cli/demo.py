"""``hif4 demo``: the main job in one command (what ``make demo`` runs).

1. generate the standard RTL set into ``rtl_out/`` (byte-identical to the checked-in files);
2. verify every generated unit against the golden model in cocotb + Verilator;
3. print the area and throughput comparison of the units.
"""

import time

from ._util import CLIError


def register(subparsers):
    parser = subparsers.add_parser(
        "demo", help="generate the standard RTL set, verify it, compare area and throughput",
        description="The main job: generate the standard RTL set (hif4 generate --all), "
                    "verify each unit bit for bit against the golden model in cocotb + "
                    "Verilator (hif4 verify), then print the area and throughput "
                    "comparison (hif4 estimate --synth).")
    parser.add_argument("--vectors", type=int, default=3000,
                        help="steps to verify per unit (default 3000)")
    parser.add_argument("--out", default="rtl_out",
                        help="folder for the generated Verilog and manifests (default rtl_out/)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the cocotb + Verilator verification step")
    parser.set_defaults(func=run)


def _step(title):
    print(f"\n== {title}", flush=True)


def run(args):
    from . import main
    from hwgen.units import standard_set

    if args.vectors < 1:
        raise CLIError(f"--vectors must be a positive number of steps, not {args.vectors}")
    started = time.monotonic()
    _step(f"hif4 generate --all --out {args.out}")
    if main(["generate", "--all", "--out", args.out]):
        return 1
    if not args.no_verify:
        for unit, params in standard_set():
            argv = ["verify", "--unit", unit, "--residual", params["residual"],
                    "--stages", str(params["stages"]), "--lanes", str(params["lanes"]),
                    "--vectors", str(args.vectors)]
            _step("hif4 " + " ".join(argv))
            status = main(argv)
            if status:
                print(f"demo: verification of {unit} ({params['residual']}) failed")
                return status
    _step(f"hif4 estimate --synth --rtl-dir {args.out}")
    status = main(["estimate", "--synth", "--rtl-dir", args.out])
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s")
    return status
