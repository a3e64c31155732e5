"""The multi-format units at one clock in a real library: µm² and pJ per MAC of each
format, beside the single-format units.

``python -P benchmarks/multi_isofreq.py [--clock PERIOD] [--fast-target 3000ps]
[--interleave 1,2,4,8] [--jobs N] [--steps N] [--json FILE] [--plot FILE.png]
[--no-synth]``

1. The iso-frequency sweep of ``hif4 sweep isofreq`` (:func:`sim.sweep.isofreq_sweep`, its
   table and cache) of the single-format dot units (HiF4 and MXFP4 with residual none and
   2:4, NVFP4) and of every multi-format unit with each residual mode, 3 stages, 64 lanes:
   first with ABC's delay script aimed at ``--fast-target`` with the two largest
   interleaves (each configuration's fastest netlists: ABC's delay model is optimistic,
   so a target tighter than the clock gives the netlists that meet it); the clock is
   ``--clock`` or else the *common clock*, the fastest every configuration meets (the
   largest of their least critical paths); then every interleave in turn aimed at the
   clock, the delay script and, where it met it, the area script. Each configuration's
   figure is its least-area run that meets the clock (:func:`sim.cost.isofreq.best_at`),
   among every run the table holds for it (a ``hif4 sweep isofreq`` aimed elsewhere
   included: ``docs/multiformat.md`` gives the one its figures come with).
2. Energy per MAC at the clock on the netlist of that run
   (:func:`sim.cost.libenergy.measure_liberty`, Gaussian stimulus, every output word
   checked against the golden model): a single-format unit on its format, a multi-format
   unit on each of its formats in turn.
3. The table, then what HiF4 adds to the MXFP4 + NVFP4 unit (and to it with the 2:4
   residual), what the residual adds to the three-format unit, and each format's energy
   per MAC on the shared unit against its own unit; ``--plot`` draws µm² per MAC and
   pJ per MAC (data, clock, leakage) of every unit and format.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from hif4spec import INTERLEAVES, UNITS, residuals_of
from sim import sweep
from sim.cli._util import CLIError, check_output_file, check_png_file
from sim.cost import isofreq
from sim.cost.liberty import LIBRARY_NOTE, load_library
from sim.cost.libenergy import measure_liberty

MACS = 64
#: The parts of the energy per MAC (:func:`sim.cost.libenergy.measure_liberty`).
PARTS = ("data", "clock", "leakage")
#: The library's two-input NAND, the unit of its gate equivalents (Nangate: 0.798 µm²).
NAND2_CELL = "NAND2_X1"
STAGES = 3
SINGLES = [("hif4", "none"), ("hif4", "2:4"), ("mxfp4", "none"), ("mxfp4", "2:4"),
           ("nvfp4", "none")]


def configs():
    """The single-format configurations, then every multi-format unit with each residual."""
    multis = [(u, r) for r in ("none", "2:4") for u, spec in UNITS.items()
              if spec.formats and r in residuals_of(u)]
    return SINGLES + multis


def formats_of(unit):
    spec = UNITS[unit]
    return spec.formats or (spec.fmt,)


def measure(rows, lib, clock_ps, steps):
    """``pj[(unit, residual)][fmt]``: energy per MAC of each row's netlist on each format."""
    pj = {}
    for (unit, residual), rec in rows.items():
        verilog = sweep.generate_config(unit, residual, STAGES, 64, None, accum=rec["accum"],
                                        interleave=rec.get("interleave") or 1)
        manifest = json.loads(verilog.with_suffix(".json").read_text())
        for fmt in formats_of(unit):
            t = time.monotonic()
            (fig,) = measure_liberty(verilog.read_text(), manifest, lib=lib, clock_ps=clock_ps,
                                     script=rec["script"], synth_clock_ps=rec["target_ps"],
                                     steps=steps,
                                     fmt=fmt if UNITS[unit].formats else None).values()
            pj.setdefault((unit, residual), {})[fmt] = fig
            print(f"multi_isofreq: {manifest['module']} on {fmt}: {fig['pj_per_mac']:.3f} "
                  f"pJ/MAC ({fig['checked_words']} words checked, "
                  f"{time.monotonic() - t:.0f} s)", file=sys.stderr, flush=True)
    return pj


def plot(cfgs, rows, pj, clock):
    """PNG bytes: µm² per MAC of each configuration (left) and pJ per MAC of each format
    on it, stacked data, clock and leakage (right)."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    have = [c for c in cfgs if c in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 6.5))
    labels = [isofreq._label(*c) for c in have]
    colors = ["tab:gray" if not UNITS[c[0]].formats else "tab:blue" for c in have]
    ax1.barh(range(len(have)), [rows[c]["area_um2"] / MACS for c in have], color=colors)
    ax1.set_yticks(range(len(have)), labels)
    ax1.invert_yaxis()
    ax1.set_xlabel("µm² per MAC (grey: a format's own unit)")
    bars = [(f"{isofreq._label(*c)}: {f}", pj[c][f]) for c in have for f in formats_of(c[0])]
    left = [0.0] * len(bars)
    for part, color in zip(PARTS, ("tab:orange", "tab:green", "tab:red")):
        vals = [b[1][f"{part}_pj_per_mac"] for b in bars]
        ax2.barh(range(len(bars)), vals, left=left, color=color, label=part)
        left = [a + b for a, b in zip(left, vals)]
    ax2.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("pJ per MAC (Gaussian stimulus)")
    ax2.legend(loc="upper right")
    fig.suptitle(f"{LIBRARY_NOTE.split(',')[0]}: every unit at {clock:.0f} ps "
                 f"({1e6 / clock:.0f} MHz), {STAGES} stages, 64 lanes, least-area L")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out.getvalue()


def _inc(a, b, nand2_um2=None):
    """The increment from ``a`` to ``b`` µm²; with ``nand2_um2`` (the library's NAND2 cell)
    also in its gate equivalents per MAC."""
    ge = "" if not nand2_um2 else f", {(b - a) / MACS / nand2_um2:+.1f} NAND2 cells per MAC"
    return f"{b - a:+,.0f} µm² ({(b - a) / a:+.1%}, {(b - a) / MACS:+.1f} µm² per MAC{ge})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clock", default=None,
                    help="the clock (a period or frequency, as hif4 sweep isofreq --clocks; "
                         "default: the common clock of the configurations)")
    ap.add_argument("--fast-target", default="3000ps",
                    help="ABC's delay target of the fastest netlists (default 3000ps)")
    ap.add_argument("--interleave", default="1,2,4,8",
                    help="comma-separated interleaves to try, in turn (default 1,2,4,8)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2000,
                    help="steps of each energy stream (default 2,000)")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--plot", default=None, help="draw the figures into this PNG file")
    ap.add_argument("--no-synth", action="store_true",
                    help="synthesize nothing: the runs the sweep's table holds")
    args = ap.parse_args(argv)
    try:
        clock = None if args.clock is None else isofreq.parse_clock(args.clock)
        fast = isofreq.parse_clock(args.fast_target)
        ways = sorted({int(x) for x in args.interleave.split(",")})
        if not set(ways) <= set(INTERLEAVES) or args.steps < 1 or args.jobs < 1:
            raise ValueError(f"interleaves of {INTERLEAVES}, steps and jobs >= 1")
    except ValueError as exc:
        print(f"multi_isofreq: {exc}", file=sys.stderr)
        return 2
    try:
        if args.json:
            check_output_file(args.json, "--json")
        if args.plot:
            check_png_file(args.plot, "--plot")
    except CLIError as exc:
        print(f"multi_isofreq: {exc}", file=sys.stderr)
        return 2
    lib = load_library(None)
    cfgs = configs()
    common = dict(stages=[STAGES], lanes=64, lib=lib, jobs=args.jobs,
                  synthesize=not args.no_synth)
    runs, report = sweep.isofreq_sweep(cfgs, targets=[fast], interleaves=ways[-2:],
                                       scripts=["delay"], **common)
    if clock is None:
        found = isofreq.common_clock(runs, cfgs)
        if found is None or len(isofreq.fastest(runs)) < len(cfgs):
            print("multi_isofreq: a configuration has no run; give --clock", file=sys.stderr)
            return 1
        clock, bound = found
        print(f"multi_isofreq: common clock {clock:.0f} ps, bound by "
              f"{isofreq._label(*bound)}", file=sys.stderr)
    runs, more = sweep.isofreq_sweep(cfgs, targets=[clock], interleaves=ways, **common)
    rows = isofreq.best_at(runs, clock)
    missing = [c for c in cfgs if c not in rows]
    pj = measure(rows, lib, clock, args.steps)
    print(f"\n{LIBRARY_NOTE}; {clock:g} ps ({1e6 / clock:.0f} MHz), {STAGES} stages, 64 lanes, "
          f"bounded back end; energy: Gaussian stimulus, {args.steps} steps per format\n")
    head = f"{'unit':34} {'L':>2} {'µm²':>9} {'µm²/MAC':>8} {'crit ps':>8}  pJ/MAC by format"
    print(head)
    print("-" * len(head))
    for c in cfgs:
        if c not in rows:
            print(f"{isofreq._label(*c):34}  - does not meet {clock:g} ps with L <= {max(ways)}")
            continue
        r = rows[c]
        energy = ", ".join(f"{f} {pj[c][f]['pj_per_mac']:.3f}" for f in formats_of(c[0]))
        print(f"{isofreq._label(*c):34} {r.get('interleave') or 1:>2} {r['area_um2']:9,.0f} "
              f"{r['area_um2'] / MACS:8.1f} {r['critical_ps']:8.0f}  {energy}")
    area = {c: rows[c]["area_um2"] for c in rows}
    nand2 = getattr(lib.cells.get(NAND2_CELL), "area", None)
    print()
    for res in ("none", "2:4"):
        mn, hmn = ("tc4_mxfp4_nvfp4", res), ("tc4_hif4_mxfp4_nvfp4", res)
        if mn in area and hmn in area:
            print(f"HiF4 on the MXFP4 + NVFP4 unit, residual {res}: "
                  f"{_inc(area[mn], area[hmn], nand2)}")
    if ("tc4_hif4_mxfp4_nvfp4", "none") in area and ("tc4_hif4_mxfp4_nvfp4", "2:4") in area:
        three = [area["tc4_hif4_mxfp4_nvfp4", r] for r in ("none", "2:4")]
        print(f"the 2:4 residual on the three-format unit: {_inc(*three, nand2)}")
    own = {f: (f, "none") for f in ("hif4", "mxfp4", "nvfp4")}
    for c in rows:
        if UNITS[c[0]].formats:
            parts = []
            for f in formats_of(c[0]):
                mine = (f, c[1]) if (f, c[1]) in pj else own[f]
                if mine in pj:
                    parts.append(f"{f} {pj[c][f]['pj_per_mac'] / pj[mine][f]['pj_per_mac']:.2f}x")
            print(f"pJ/MAC on {isofreq._label(*c)} against each format's own unit: "
                  + ", ".join(parts))
    if args.json:
        doc = {"library": LIBRARY_NOTE, "clock_ps": clock, "fast_target_ps": fast,
               "stages": STAGES, "lanes": 64,
               "interleaves": ways, "energy_steps": args.steps, "stimulus": "gaussian",
               "missing": [list(c) for c in missing],
               "rows": [{"unit": c[0], "residual": c[1], "formats": list(formats_of(c[0])),
                         **{k: rows[c][k] for k in ("module", "area_um2", "critical_ps",
                                                    "script", "target_ps") if k in rows[c]},
                         "interleave": rows[c].get("interleave") or 1,
                         "um2_per_mac": rows[c]["area_um2"] / MACS,
                         "pj_per_mac": {f: pj[c][f]["pj_per_mac"] for f in pj[c]},
                         "pj_parts": {f: {k: pj[c][f][f"{k}_pj_per_mac"] for k in PARTS}
                                      for f in pj[c]}}
                        for c in cfgs if c in rows]}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if args.plot:
        Path(args.plot).write_bytes(plot(cfgs, rows, pj, clock))
    print(f"\nmulti_isofreq: {report.summary('syntheses')}; {more.summary('syntheses')}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
