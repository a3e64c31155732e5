"""The accumulation loop of interleaved units: its depth, delay and area against L = 1.

``python -P benchmarks/interleave_loop.py [--units LIST] [--residuals LIST] [--accums LIST]
[--interleave LIST] [--liberty] [--backend native|yowasp] [--json PATH]`` generates each
dot unit (default: hif4, mxfp4, nvfp4 with their standard residual modes, both exact back
ends, 3 stages, 64 lanes) at each L (default 1, 2, 4, 8), synthesizes its accumulator stage
alone with :mod:`sim.cost.depth`'s flow (``abc -g cmos2``: every gate one unit of delay) and
prints per configuration the longest register-to-register path inside the accumulator
(``loop``: for L = 1 the loop itself, for L > 1 the longest path between the ring's
stages), the path from the stage's input into its registers (``in``), the stage's area in
NAND2 equivalents, and each against L = 1 of the same unit.

With ``--liberty`` it also maps the accumulator stage alone to the FreePDK45 / Nangate
library (:mod:`sim.cost.libsynth`, the ``delay`` script, no clock target) and times its
loop in ps: for L = 1 the accumulator's register back to itself, for L > 1 the ring's
stages from the accumulator's join on (:func:`sim.cost.libsynth.ring_stages`: the latest
data path into each stage's registers; the stages ahead of the join work on the step alone
and are left out), with the ratio to L = 1. The stage alone, not the whole unit: ABC maps
every path for the delay of the unit's slowest, so a front end slower than the loop would
hide how far the ring divides it. The ideal ring divides the loop by L; what it does not
divide is the heaviest group of blocks (``loop_stages`` in the manifest) and the
flip-flop overhead every stage pays. Results are cached in ``build/synth/`` and
``build/liberty/`` by Verilog text, so a rerun prints at once.
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
from sim.cost.libsynth import ring_stages, synthesize_liberty

UNITS = ("hif4", "mxfp4", "nvfp4")


def measure(unit, residual, accum, interleave, backend=None, liberty=False):
    """``{"loop", "in", "nand2", "stages"}`` of the accumulator stage of the unit, and
    with ``liberty`` its ``loop_ps``."""
    params = resolve(unit, residual=residual, accum=accum, interleave=interleave)
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    text = Path(verilog).read_text()
    out = stage_depths(text, f"{module}.acc", ("loop", "in"), backend=backend)
    acc = manifest["timing"]["pipeline"][-1]
    out = {"module": module, **out, "stages": acc.get("loop_stages")}
    if liberty:
        out["loop_ps"] = liberty_loop(text, module, acc, backend)
    return out


def liberty_loop(text, module, acc, backend=None):
    """The loop of the accumulator stage ``acc`` (the manifest's) mapped to the library,
    in ps (the module docstring)."""
    res = synthesize_liberty(text, top=f"{module}.acc", script="delay", backend=backend)
    if acc["kind"] != "ring":
        return round(res.timing["loop_ps"], 1)
    P = acc["prep"]
    stages = ring_stages(res)
    return round(max(d for k, (d, _, _) in stages.items() if k == "exit" or k > P), 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", default=",".join(UNITS))
    ap.add_argument("--residuals", default=None,
                    help="comma-separated residual modes (default: each unit's standard ones)")
    ap.add_argument("--accums", default=",".join(EXACT_ACCUMS))
    ap.add_argument("--interleave", default=",".join(map(str, INTERLEAVES)))
    ap.add_argument("--backend", choices=("native", "yowasp"), default=None,
                    help="Yosys build (default: sim.cost.synth's)")
    ap.add_argument("--liberty", action="store_true",
                    help="also time the loop in the FreePDK45 / Nangate library (ps)")
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
    lib = args.liberty
    print("| module | L | loop | loop vs L=1 | in | NAND2-eq | area vs L=1 |"
          + (" loop ps | ps vs L=1 |" if lib else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if lib else ""))
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
                    r = measure(unit, residual, accum, L, args.backend, lib)
                    r.update(unit=unit, residual=residual, accum=accum, interleave=L,
                             seconds=time.perf_counter() - t)
                    base = base or r
                    rows.append(r)
                    print(f"| {r['module']} | {L} | {r['loop']} | "
                          f"{r['loop'] / base['loop']:.2f} | {r['in']} | {r['nand2']:,.0f} | "
                          f"{r['nand2'] / base['nand2']:.2f} |"
                          + (f" {r['loop_ps']:,.0f} | {r['loop_ps'] / base['loop_ps']:.2f} |"
                             if lib else ""), flush=True)
    if out_json:
        out_json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
