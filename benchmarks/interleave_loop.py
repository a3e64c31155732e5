"""The accumulation loop of interleaved units: its depth and area against L = 1.

``python -P benchmarks/interleave_loop.py [--units LIST] [--residuals LIST] [--accums LIST]
[--interleave LIST] [--backend native|yowasp] [--json PATH]`` generates each dot unit
(default: hif4, mxfp4, nvfp4 with their standard residual modes, both exact back ends, 3
stages, 64 lanes) at each L (default 1, 2, 4, 8), synthesizes its accumulator stage alone
with :mod:`sim.cost.depth`'s flow (``abc -g cmos2``: every gate one unit of delay) and
prints per configuration the longest register-to-register path inside the accumulator
(``loop``: for L = 1 the loop itself, for L > 1 the longest path between the ring's
stages), the path from the stage's input into its registers (``in``), the stage's area in
NAND2 equivalents, and each against L = 1 of the same unit. The ideal ring divides the
loop by L; what it does not divide is the heaviest block of the adder
(``loop_stages`` in the manifest says which blocks share a stage). Results are cached in
``build/synth/`` by Verilog text, so a rerun prints at once.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from hif4spec import EXACT_ACCUMS, INTERLEAVES, module_name, resolve, unit_spec
from sim.bench.runner import REPO, generate_cached
from sim.cli._util import CLIError, check_output_file
from sim.cost.depth import stage_depths

UNITS = ("hif4", "mxfp4", "nvfp4")


def measure(unit, residual, accum, interleave, backend=None):
    """``{"loop", "in", "nand2", "stages"}`` of the accumulator stage of the unit."""
    params = resolve(unit, residual=residual, accum=accum, interleave=interleave)
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    out = stage_depths(Path(verilog).read_text(), f"{module}.acc", ("loop", "in"),
                       backend=backend)
    acc = manifest["timing"]["pipeline"][-1]
    return {"module": module, **out, "stages": acc.get("loop_stages")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", default=",".join(UNITS))
    ap.add_argument("--residuals", default=None,
                    help="comma-separated residual modes (default: each unit's standard ones)")
    ap.add_argument("--accums", default=",".join(EXACT_ACCUMS))
    ap.add_argument("--interleave", default=",".join(map(str, INTERLEAVES)))
    ap.add_argument("--backend", choices=("native", "yowasp"), default=None,
                    help="Yosys build (default: sim.cost.synth's)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    try:
        ways = [int(x) for x in args.interleave.split(",")]
        units = args.units.split(",")
        for u in units:
            unit_spec(u)
        if any(w not in INTERLEAVES for w in ways):
            raise ValueError(f"--interleave takes values of {INTERLEAVES}")
        out_json = check_output_file(args.json, "--json") if args.json else None
    except (ValueError, CLIError) as exc:
        print(f"interleave_loop: {exc}", file=sys.stderr)
        return 2
    if 1 not in ways:
        ways = [1] + ways
    rows = []
    print("| module | L | loop | loop vs L=1 | in | NAND2-eq | area vs L=1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for unit in units:
        residuals = (args.residuals.split(",") if args.residuals
                     else unit_spec(unit).standard)
        for residual in residuals:
            if residual not in unit_spec(unit).residuals:
                continue
            for accum in args.accums.split(","):
                base = None
                for L in ways:
                    t = time.perf_counter()
                    print(f"  synthesizing {unit} {residual} {accum} L={L} ...", end="\r",
                          file=sys.stderr, flush=True)
                    r = measure(unit, residual, accum, L, args.backend)
                    r.update(unit=unit, residual=residual, accum=accum, interleave=L,
                             seconds=time.perf_counter() - t)
                    base = base or r
                    rows.append(r)
                    print(f"| {r['module']} | {L} | {r['loop']} | "
                          f"{r['loop'] / base['loop']:.2f} | {r['in']} | {r['nand2']:,.0f} | "
                          f"{r['nand2'] / base['nand2']:.2f} |", flush=True)
    if out_json:
        out_json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
