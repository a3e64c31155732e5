"""Verify the interleaved dot units (L > 1 accumulators, issue 45) on the compiled harness.

``python -P benchmarks/verify_interleave.py [--vectors N] [--interleave LIST] [--accum LIST]
[--units LIST] [--stages N] [--lanes N] [--seed N]`` runs ``hif4 verify``'s engine
(:func:`sim.bench.runner.verify`, the fast harness, random stalls on valid and ready) on
every residual mode none and 2:4 that each unit accepts, for each back end and each
interleave L, with ``N`` steps each: the unit's stream (named cases first, then random,
cancelling and NaN/Inf-rich K-loops) with its accumulator chains interleaved over the L
accumulators (:mod:`sim.stimulus.interleave`). It prints a table (module, steps, outputs,
mismatches, seconds) and exits 1 if any configuration has a mismatch, a timeout or an
output sooner than its manifest's latency, or could not be generated or built.
"""

import argparse
import sys
import time

from hif4spec import DEFAULTS, EXACT_ACCUMS, INTERLEAVES, LANES, STAGES, UNITS, resolve
from sim.bench.runner import verify

#: Units and residual modes of the table (those a unit accepts).
DEFAULT_UNITS = ("hif4", "mxfp4", "nvfp4")
RESIDUALS = ("none", "2:4")


def _list(text, choices, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in choices]
    if bad or not items:
        raise SystemExit(f"verify_interleave: {what} {bad[0] if bad else text!r} is not one "
                         f"of {', '.join(choices)}")
    return items


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vectors", type=int, default=100000, help="steps per configuration")
    ap.add_argument("--interleave", default="2,4", help="comma-separated L (default 2,4)")
    ap.add_argument("--accum", default=",".join(EXACT_ACCUMS),
                    help=f"comma-separated back ends (default {','.join(EXACT_ACCUMS)})")
    ap.add_argument("--units", default=",".join(DEFAULT_UNITS),
                    help=f"comma-separated dot units (default {','.join(DEFAULT_UNITS)})")
    ap.add_argument("--stages", type=int, default=DEFAULTS["stages"], choices=STAGES)
    ap.add_argument("--lanes", type=int, default=DEFAULTS["lanes"], choices=LANES)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.vectors < 1:
        raise SystemExit(f"verify_interleave: --vectors must be at least 1, not {args.vectors}")
    dots = [u.name for u in UNITS.values() if u.kind == "dot"]
    units = _list(args.units, dots, "unit")
    ways = [int(x) for x in _list(args.interleave, [str(x) for x in INTERLEAVES[1:]],
                                  "interleave")]
    accums = _list(args.accum, EXACT_ACCUMS, "back end")
    configs = [(u, r, a, L) for u in units for r in RESIDUALS if r in UNITS[u].residuals
               for a in accums for L in ways]
    failed = False
    header = ("module", "steps", "outputs", "mismatches", "seconds")
    print(f"{header[0]:<36} {header[1]:>9} {header[2]:>9} {header[3]:>10} {header[4]:>8}",
          flush=True)
    for unit, residual, accum, L in configs:
        t0 = time.perf_counter()
        try:
            params = resolve(unit, residual=residual, stages=args.stages, lanes=args.lanes,
                             accum=accum, interleave=L)
            res = verify(unit, **params, vectors=args.vectors, seed=args.seed, engine="fast",
                         progress=False)
        except Exception as exc:        # a generator without interleave, a failed build
            failed = True
            print(f"{unit} {residual} {accum} interleave {L}: error: "
                  f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                  flush=True)
            continue
        late = res.get("early_output") is not None or (
            res["latency_min"] is not None and res["latency_min"] < res["manifest"]["latency"])
        note = "  timeout" if res["timeout"] else "  early output" if late else ""
        failed |= bool(res["mismatches"] or res["timeout"] or late)
        seconds = time.perf_counter() - t0
        print(f"{res['module']:<36} {res['transferred']:>9} {res['checked']:>9} "
              f"{res['mismatches']:>10} {seconds:>8.1f}{note}", flush=True)
        bad = res["first_mismatch"]
        if bad:
            word = (lambda w: "none" if w is None else f"0x{w:08x}")
            print(f"  first mismatch: output {bad['output']} (step {bad['step']}, accumulator "
                  f"{(bad.get('inputs') or {}).get('accumulator')}): expected "
                  f"{word(bad['expected'])}, actual {word(bad['actual'])}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
