"""Verify the multi-format dot units on the compiled harness and count the steps per format.

``python -P benchmarks/verify_multi.py [--steps-per-format N] [--units LIST] [--accums LIST]
[--residuals LIST] [--stages N] [--lanes LIST]`` runs ``hif4 verify``'s engine
(:func:`sim.bench.runner.verify`, the fast harness, random stalls) on every residual mode
(or those of ``--residuals``) of each multi-format unit
(``hif4spec.UnitSpec.formats``) with ``N`` steps per format of the unit (the named cases of
every format first, then each format's random, cancelling and NaN/Inf-rich K-loops, the
formats switching between accumulations), and prints one line per configuration: steps of
each format (counted on the same chunk streams the run checked), format switches, outputs
and mismatches. Exit status 1 if any configuration has a mismatch.
"""

import argparse
import sys
import time

import numpy as np

from hif4spec import DEFAULTS, EXACT_ACCUMS, LANES, STAGES, UNITS, resolve
from sim.bench.runner import FAST_CHUNK, chunk_stream, verify


def format_counts(unit, residual, steps, seed):
    """``({format: steps}, switches)`` of the stream :func:`verify` runs (its chunks)."""
    formats = UNITS[unit].formats
    counts = np.zeros(len(formats), dtype=np.int64)
    switches = done = index = 0
    while done < steps:
        count = min(FAST_CHUNK, steps - done)
        s = chunk_stream(unit, residual, count, seed, index)
        counts += np.bincount(s["fmt"], minlength=len(formats))
        switches += int((np.diff(s["fmt"].astype(int)) != 0).sum())
        done += count
        index += 1
    return dict(zip(formats, counts.tolist())), switches


def main(argv=None):
    multi = [u.name for u in UNITS.values() if u.formats]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-per-format", type=float, default=1e5)
    ap.add_argument("--units", default=",".join(multi))
    ap.add_argument("--accums", default="bounded")
    ap.add_argument("--stages", type=int, default=DEFAULTS["stages"], choices=STAGES)
    ap.add_argument("--lanes", default=str(DEFAULTS["lanes"]))
    ap.add_argument("--residuals", default=None,
                    help="comma-separated residual modes (default: each unit's)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    units = args.units.split(",")
    accums = args.accums.split(",")
    lanes = args.lanes.split(",")
    bad = [u for u in units if u not in multi] + [a for a in accums if a not in EXACT_ACCUMS]
    bad += [n for n in lanes if n not in map(str, LANES)]
    residuals = args.residuals.split(",") if args.residuals else None
    bad += [r for r in residuals or () if not any(r in UNITS[u].residuals for u in multi)]
    if bad:
        print(f"verify_multi: not a multi-format unit, exact back end, residual mode or lane "
              f"count: "
              f"{bad[0]!r} (units: {', '.join(multi)}; back ends: {', '.join(EXACT_ACCUMS)}; "
              f"lanes: {', '.join(map(str, LANES))})", file=sys.stderr)
        return 2
    failed = False
    configs = [(u, r, a, int(n)) for u in units for r in UNITS[u].residuals for a in accums
               for n in lanes if residuals is None or r in residuals]
    for unit, residual, accum, n in configs:
        params = resolve(unit, residual=residual, stages=args.stages, lanes=n, accum=accum)
        steps = int(args.steps_per_format) * len(UNITS[unit].formats)
        t0 = time.perf_counter()
        res = verify(unit, **params, vectors=steps, seed=args.seed, engine="fast",
                     progress=True)
        counts, switches = format_counts(unit, residual, steps, args.seed)
        failed |= bool(res["mismatches"])
        print(f"{res['module']}: {res['steps']} steps ("
              + ", ".join(f"{f} {c}" for f, c in counts.items())
              + f"), {switches} format switches, {res['outputs']} outputs, "
              f"{res['mismatches']} mismatches, {time.perf_counter() - t0:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
