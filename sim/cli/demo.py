"""``hif4 demo``: the main job in one command (what ``make demo`` runs).

1. generate the standard RTL set into ``rtl_out/`` (byte-identical to the checked-in files);
2. verify every generated file (``hif4 verify --rtl-dir``) against the golden model on the
   compiled Verilator harness;
3. print the area and throughput comparison of the units, with their default accumulator
   back ends (bounded where a unit has it), then with the full-window reference.
"""

import time

from ._util import CLIError, check_output_folder, output_option


def register(subparsers):
    parser = subparsers.add_parser(
        "demo", help="generate the standard RTL set, verify it, compare area and throughput",
        description="The main job: generate the standard RTL set (hif4 generate --all), "
                    "verify each unit bit for bit against the golden model on the compiled "
                    "Verilator harness (hif4 verify), then print the area and throughput "
                    "comparison (hif4 estimate --synth).")
    parser.add_argument("--vectors", type=int, default=100000,
                        help="steps to verify per unit (default 100000)")
    output_option(parser, "--out", kind="folder", default="rtl_out",
                        help="folder for the generated Verilog and manifests (default rtl_out/; "
                             "created if missing, its parent must exist)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the verification step")
    parser.set_defaults(func=run)


def _step(title, expect):
    """Say what the next phase runs and how long it is expected to take."""
    print(f"\n== {title}\n   {expect}", flush=True)


def _verify_expect(out, unit, params, vectors):
    """Expected time of one verification: the harness build, unless it is cached."""
    import hashlib
    from pathlib import Path

    from hif4spec import module_name
    from sim.bench.fast import BUILD_TIME, FAST_ROOT
    from sim.bench.runner import REPO

    module = module_name(unit, **params)
    digest = hashlib.sha256((Path(out) / f"{module}.v").read_bytes()).hexdigest()[:12]
    built = (REPO / "build" / FAST_ROOT / f"{module}-{digest}" / "build.key").exists()
    build = (f"cached build (a rebuild, if the Verilog changed, {BUILD_TIME})"
             if built else f"Verilator build of the harness first, {BUILD_TIME}")
    return (f"expected: {build}, then about {max(1, vectors // 100000)} s of stimulus and "
            "simulation")


def run(args):
    from . import main
    from hif4spec import REFERENCE_ACCUM, standard_set
    from sim.bench.runner import REPO

    if args.vectors < 1:
        raise CLIError(f"--vectors must be a positive number of steps, not {args.vectors}")
    check_output_folder(args.out, "--out")
    if not args.no_verify:
        check_output_folder(REPO / "build", "the build folder")
    configs = standard_set()
    started = time.monotonic()
    _step(f"hif4 generate --all --out {args.out}",
          f"expected: 10-90 s ({len(configs)} units from the Amaranth generators)")
    if main(["generate", "--all", "--out", args.out]):
        return 1
    if not args.no_verify:
        for n, (unit, params) in enumerate(configs, 1):
            argv = ["verify", "--rtl-dir", str(args.out), "--unit", unit,
                    "--residual", params["residual"],
                    "--stages", str(params["stages"]), "--lanes", str(params["lanes"]),
                    "--vectors", str(args.vectors)]
            if "accum" in params:               # a dot unit: its accumulator back end
                argv += ["--accum", params["accum"]]
            _step(f"[{n}/{len(configs)}] hif4 " + " ".join(argv),
                  _verify_expect(args.out, unit, params, args.vectors))
            status = main(argv)
            if status:
                print(f"demo: verification of {unit} ({params['residual']}) failed")
                return status
    for accum in ([], ["--accum", REFERENCE_ACCUM]):     # the default back ends, the reference
        _step(" ".join(["hif4 estimate --synth --rtl-dir", args.out, *accum]),
              "expected: a few seconds (synthesis areas from the checked-in table)")
        status = main(["estimate", "--synth", "--rtl-dir", args.out, *accum])
        if status:
            return status
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s")
    return status
