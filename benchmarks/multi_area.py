"""Area of the multi-format dot units beside the single-format units (NAND2 equivalents).

``python -P benchmarks/multi_area.py [--stages N] [--accum A] [--synth [--backend B]]``
generates (cached, ``build/rtl``) every multi-format unit (``hif4spec.UnitSpec.formats``)
with each residual mode and the single-format units at the same stages, 64 lanes and back
end, and prints the area model's estimate from each manifest's structure
(:func:`sim.area_model.estimate_manifest`) twice: with the coefficients as fitted
(``model``: the single-format units have per-unit factors fitted to their synthesis, a
multi-format unit the mean of its formats') and with the per-unit factors left out
(``structure``: every unit from its structure alone, comparable across units); the
synthesized figure where the synthesis table holds the module (``synth``); then what HiF4
adds to the MXFP4 + NVFP4 unit and what the 2:4 residual adds on top, in % and NAND2 per
MAC (64 MACs per cycle).
``--synth`` also synthesizes each multi-format module the synthesis cache lacks (tens of
minutes to hours each on two cores; ``--backend native``, the pyosys build, is the faster)
and records it in the synthesis table (``sim/cost/synth_table.json``), so the area model's
check (``hif4 estimate --check``) covers it; ``--units`` picks the multi-format units and
their order.
"""

import argparse
import sys

from hif4spec import EXACT_ACCUMS, STAGES, UNITS, module_name, resolve
from sim.area_model import estimate_manifest, load_coeffs
from sim.bench.runner import REPO, generate_cached
from sim.cost import table
from sim.cost.synth import BACKENDS

MACS = 64


def figures(unit, residual, stages, accum, synth, backend=None):
    """``{module, model, structure, synth}`` of one configuration."""
    params = resolve(unit, residual=residual, stages=stages, lanes=64, accum=accum)
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    text = verilog.read_text()
    entry = table.lookup(text)
    nand2 = entry["nand2"] if entry is not None else None
    if nand2 is None and synth:
        print(f"multi_area: synthesizing {module} ...", file=sys.stderr, flush=True)
        sha, entry = table.entry_for_text(text, manifest,
                                          hierarchical=False, source="benchmarks/multi_area.py",
                                          timeout=6 * 3600, backend=backend, checkpoint=True)
        table.merge_into(table.TABLE_PATH, sha, entry)
        nand2 = entry["nand2"]
    return {"module": module, "model": estimate_manifest(manifest).nand2,
            "structure": estimate_manifest(manifest, {**load_coeffs(), "units": {}}).nand2,
            "synth": nand2}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", type=int, default=3, choices=STAGES)
    ap.add_argument("--accum", default="bounded", choices=EXACT_ACCUMS)
    ap.add_argument("--synth", action="store_true")
    ap.add_argument("--backend", choices=BACKENDS, default=None,
                    help="Yosys build of --synth (default: sim.cost.synth.default_backend; "
                         "native is the faster pyosys build)")
    ap.add_argument("--units", default=None,
                    help="comma-separated multi-format units, in the order --synth takes them "
                         "(default: every one; each with residual none first, then 2:4)")
    args = ap.parse_args(argv)
    rows = {}
    singles = [u.name for u in UNITS.values() if u.kind == "dot" and u.grid]
    multis = [u.name for u in UNITS.values() if u.formats]
    if args.units:
        chosen = [u.strip() for u in args.units.split(",")]
        bad = [u for u in chosen if u not in multis]
        if bad:
            print(f"multi_area: --units: {', '.join(bad)} is not a multi-format unit "
                  f"({', '.join(multis)})", file=sys.stderr)
            return 2
        multis = chosen
    configs = [(u, r) for u in singles for r in UNITS[u].residuals if r != "dense"]
    for residual in ("none", "2:4"):
        configs += [(u, residual) for u in multis if residual in UNITS[u].residuals]
    for unit, residual in configs:
        print(f"multi_area: {unit} {residual} ...", file=sys.stderr, flush=True)
        rows[unit, residual] = figures(unit, residual, args.stages, args.accum,
                                       args.synth and unit in multis, args.backend)
    print(f"{'module':44} {'model':>8} {'structure':>9} {'synth':>8} {'per MAC':>8}")
    for r in rows.values():
        synth = f"{r['synth']:8.0f}" if r["synth"] is not None else f"{'-':>8}"
        print(f"{r['module']:44} {r['model']:8.0f} {r['structure']:9.0f} {synth} "
              f"{r['model'] / MACS:8.1f}")
    base = [("tc4_mxfp4_nvfp4", "none"), ("tc4_hif4_mxfp4_nvfp4", "none"),
            ("tc4_hif4_mxfp4_nvfp4", "2:4")]
    if all(b in rows for b in base):
        mn, hmn, hmn_r = (rows[b]["model"] for b in base)
        print(f"\nHiF4 on the MXFP4 + NVFP4 unit (model): {hmn - mn:+.0f} NAND2 "
              f"({(hmn - mn) / mn:+.1%}, {(hmn - mn) / MACS:+.1f} per MAC); the 2:4 residual "
              f"on top: {hmn_r - hmn:+.0f} ({(hmn_r - hmn) / hmn:+.1%}, "
              f"{(hmn_r - hmn) / MACS:+.1f} per MAC)")
    if all(b in rows and rows[b]["synth"] for b in base):
        mn, hmn, hmn_r = (rows[b]["synth"] for b in base)
        print(f"HiF4 on the MXFP4 + NVFP4 unit (synthesized): {hmn - mn:+.0f} NAND2 "
              f"({(hmn - mn) / mn:+.1%}, {(hmn - mn) / MACS:+.1f} per MAC); the 2:4 residual "
              f"on top: {hmn_r - hmn:+.0f} ({(hmn_r - hmn) / hmn:+.1%}, "
              f"{(hmn_r - hmn) / MACS:+.1f} per MAC)")
    own = [("hif4", "none"), ("mxfp4", "none"), ("nvfp4", "none")]
    if all(o in rows for o in own) and ("tc4_hif4_mxfp4_nvfp4", "none") in rows:
        total = sum(rows[o]["structure"] for o in own)
        shared = rows["tc4_hif4_mxfp4_nvfp4", "none"]["structure"]
        print(f"three own units (structure) {total:.0f} NAND2; the shared unit {shared:.0f} "
              f"({shared / total - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
