"""Area and depth of one accumulation step: the bounded one-term back end
(:mod:`hwgen.accum_bounded`) against the full-window one (:class:`hwgen.accum.ExactAdd`),
both synthesized in this run with the area table's flow (:data:`sim.cost.synth.FLOW`).

Usage::

    python benchmarks/bounded_accum.py [--backend native]

Each row is the combinational ``acc + term -> acc`` of a unit's accumulator loop (the
register around it is the same 33 flip-flops either way), for HiF4 without a
residual and NVFP4 (one term) and HiF4 with the 2:4 residual (two terms pre-added).
Printed: NAND2-eq, the longest path in cells (the loop's
depth), and the bounded figures' ratio to the full window's. Results are cached under
``build/synth`` like every synthesis.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from amaranth.back import verilog  # noqa: E402
from amaranth.hdl import UnusedElaboratable  # noqa: E402

from hwgen.accum import AccumSpec, ExactAdd  # noqa: E402
from hwgen.accum_bounded import BoundedAdd  # noqa: E402
from hwgen.units import build_unit  # noqa: E402
from sim.cost import synth  # noqa: E402

#: The (dot unit, residual) rows: one term (HiF4 and NVFP4 without residual) and two terms
#: pre-added (HiF4 with the 2:4 residual).
ROWS = (("hif4", "none"), ("hif4", "2:4"), ("nvfp4", "none"))


def _terms():
    """``{row: (terms, max_exp_diff)}`` of :data:`ROWS`: each unit's term list and the bound
    on two terms' exponent fields it gives its back end (None for one term)."""
    out = {}
    for unit, residual in ROWS:
        built = build_unit(unit, residual=residual)
        terms = list(built.terms)
        out[f"{unit} ({residual})"] = (terms, built._max_exp_diff if len(terms) == 2 else None)
    return out


def _synth(component, top, backend):
    text = verilog.convert(component, name=top, emit_src=False)
    return synth.synthesize_text(text, top, backend=backend)


def main(argv=None):
    warnings.simplefilter("ignore", UnusedElaboratable)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=synth.BACKENDS, default=None,
                    help="Yosys build (default: $HIF4_SYNTH_BACKEND, else yowasp)")
    args = ap.parse_args(argv)
    rows = []
    for name, (terms, diff) in _terms().items():
        tag = name.replace(" ", "").replace("(", "_").replace(")", "").replace(":", "")
        for kind, make in (("full window", lambda: ExactAdd(AccumSpec(terms))),
                           ("bounded", lambda: BoundedAdd(terms, diff))):
            t0 = time.time()
            print(f"synthesizing {name}, {kind} ...", file=sys.stderr, flush=True)
            res = _synth(make(), f"acc_{tag}_{kind.split()[0]}", args.backend)
            rows.append((name, kind, res.nand2, res.longest_path, time.time() - t0))
    print(f"{'unit':<13} {'back end':<12} {'NAND2-eq':>9} {'path':>6} {'ratio':>7} "
          f"{'path ratio':>10}")
    for name, kind, nand2, path, _ in rows:
        base = next(r for r in rows if r[0] == name and r[1] == "full window")
        print(f"{name:<13} {kind:<12} {nand2:>9,.0f} {path:>6} {nand2 / base[2]:>7.2f} "
              f"{path / base[3]:>10.2f}")


if __name__ == "__main__":
    main()
