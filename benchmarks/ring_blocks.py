"""Measured delay of every block of an interleaved unit's adder, for the ring's partition.

``python -P benchmarks/ring_blocks.py [--units LIST] [--residuals LIST] [--accums LIST]
[--script NAME] [--json PATH]`` builds, for each dot unit (default: hif4, mxfp4, nvfp4 with their
standard residual modes, both exact back ends), its accumulator ring
(:class:`hwgen.ring.Ring`) alone with every block of the adder in a stage of its own
(``term_blocks()`` ahead of the join, then ``loop_blocks()``, then empty stages to the
next power of two), maps it to the FreePDK45 / Nangate library with the liberty flow's
``delay`` script (:mod:`sim.cost.libsynth`; ``--script`` another) and times each stage
(:func:`sim.cost.libsynth.ring_stages`). A stage's time is that of its data: its block's
logic plus what every stage pays, a flip-flop's clock-to-Q, the hold multiplexer of the
ring's enable and setup; the empty stages measure that floor. (The enable itself, the output's
ready fanned out to every register, is one path the same for every stage, left out.) It
prints per block the stage's time, the block's own (time less floor) and the weight
``loop_blocks()`` / ``term_blocks()`` give it, scaled to the same total, so that a
partition by those weights can be checked against the library. Results are cached by
Verilog text, so a rerun prints at once. With ``delay`` every stage maps only as fast as the
slowest needs (``dc2 -l`` keeps the deepest level of the whole ring), so the split's blocks
were weighed with ``map``.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from amaranth.back import verilog

from hif4spec import EXACT_ACCUMS, resolve, unit_spec
from hwgen.backend import make_adder
from hwgen.parts import probe
from hwgen.ring import LoopCuts, Ring
from hwgen.units import build_unit
from sim.cli._util import CLIError, check_output_file
from sim.cost.libsynth import SCRIPTS, ring_stages, synthesize_liberty

UNITS = ("hif4", "mxfp4", "nvfp4")


class SpreadRing(Ring):
    """A :class:`hwgen.ring.Ring` whose adder has every block in a stage of its own."""

    def cuts(self):
        add = probe(self._make_add(None))
        term = [b for b, _ in getattr(add, "term_blocks", lambda: [])()]
        loop = [b for b, _ in add.loop_blocks()]
        stage_of = {b: k for k, b in enumerate(term)}
        stage_of.update({b: len(term) + k for k, b in enumerate(loop)})
        return LoopCuts(stage_of, self.interleave, len(term))


def blocks_of(unit, residual, accum):
    """``(ring, term_blocks, loop_blocks)``: the spread ring of the unit's adder and the
    adder's weighted blocks."""
    params = resolve(unit, residual=residual, accum=accum, interleave=2)
    u = build_unit(unit, **params)
    terms, diff = u.terms, u._max_exp_diff

    def make(cuts):
        return make_adder(accum, terms, diff, cuts)
    add = probe(make(None))
    term = list(getattr(add, "term_blocks", lambda: [])())
    loop = list(add.loop_blocks())
    L = 1 << (len(loop) + 1).bit_length()          # at least one empty stage
    return SpreadRing(terms, make, L), term, loop


def measure(unit, residual, accum, script="delay"):
    """Per-block rows ``{"block", "ahead", "stage_ps", "own_ps", "weight"}`` and the floor."""
    ring, term, loop = blocks_of(unit, residual, accum)
    top = f"ring_{unit}_{residual.replace(':', '')}_{accum}"
    text = verilog.convert(ring, name=top, emit_src=False)
    res = synthesize_liberty(text, top=top, script=script)
    stages = ring_stages(res)
    P = len(term)
    blocks = [(b, w, True) for b, w in term] + [(b, w, False) for b, w in loop]
    # stage j's logic is captured by the registers of boundary j + 1 (the last stage's by
    # the exit register); its data come from the ring's registers, the first stage's from
    # the module's input (the step)
    def at(j):
        ff, other, _ = stages.get(j + 1, stages.get("exit") if j == P + ring.interleave - 1
                                  else (0.0, 0.0, []))
        return other if j == 0 else ff
    empty = [at(j) for j in range(P + len(loop), P + ring.interleave - 1)]
    floor = statistics.median(empty) if empty else 0.0
    rows = [{"block": b, "ahead": ahead, "stage_ps": round(at(j), 1),
             "own_ps": round(max(0.0, at(j) - floor), 1), "weight": w}
            for j, (b, w, ahead) in enumerate(blocks)]
    return rows, floor, res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", default=",".join(UNITS))
    ap.add_argument("--residuals", default=None,
                    help="comma-separated residual modes (default: each unit's standard ones)")
    ap.add_argument("--accums", default=",".join(EXACT_ACCUMS))
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--script", choices=list(SCRIPTS), default="delay",
                    help="the liberty flow's ABC script (default: delay)")
    args = ap.parse_args(argv)
    try:
        units = args.units.split(",")
        for u in units:
            if unit_spec(u).kind != "dot":
                raise ValueError(f"{u} is an encoder: it has no accumulator ring")
        accums = args.accums.split(",")
        bad = [a for a in accums if a not in EXACT_ACCUMS]
        if bad:
            raise ValueError(f"--accums takes values of {EXACT_ACCUMS}, not {bad[0]!r}")
        out_json = check_output_file(args.json, "--json") if args.json else None
    except (ValueError, CLIError) as exc:
        print(f"ring_blocks: {exc}", file=sys.stderr)
        return 2
    records = []
    for unit in units:
        residuals = (args.residuals.split(",") if args.residuals
                     else unit_spec(unit).standard)
        for residual in residuals:
            if residual not in unit_spec(unit).residuals:
                continue
            for accum in accums:
                t = time.perf_counter()
                print(f"  synthesizing the {unit} {residual} {accum} ring ...", end="\r",
                      file=sys.stderr, flush=True)
                rows, floor, res = measure(unit, residual, accum, args.script)
                own = sum(r["own_ps"] for r in rows if not r["ahead"])
                wsum = sum(r["weight"] for r in rows if not r["ahead"])
                print(f"\n{unit} {residual} {accum}: floor {floor:.0f} ps, loop logic "
                      f"{own:.0f} ps over {sum(not r['ahead'] for r in rows)} blocks "
                      f"({time.perf_counter() - t:.0f} s)")
                print("| block | ahead | stage ps | own ps | weight (scaled ps) |")
                print("|---|---|---:|---:|---:|")
                for r in rows:
                    scaled = r["weight"] * own / wsum if wsum else 0.0
                    print(f"| {r['block']} | {'yes' if r['ahead'] else ''} | "
                          f"{r['stage_ps']:.0f} | {r['own_ps']:.0f} | {scaled:.0f} |")
                records.append({"unit": unit, "residual": residual, "accum": accum,
                                "script": args.script, "floor_ps": round(floor, 1),
                                "blocks": rows,
                                "area_um2": res.area, "library": res.library})
    if out_json:
        Path(out_json).write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
