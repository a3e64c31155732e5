"""Refit the area model's coefficients and check the model against synthesis.

Usage::

    python benchmarks/fit_area_model.py             # fit primitives, write sim/area_coeffs.json,
                                                    # compare with the synthesis table
    python benchmarks/fit_area_model.py --units     # also synthesize every unit configuration
                                                    # (84, each with its default back end:
                                                    # minutes each, over an hour for
                                                    # single-stage HiF4 units with a residual)
    python benchmarks/fit_area_model.py --units --accum window
                                                    # the same with the reference back end
    python benchmarks/fit_area_model.py --check --plot docs/area_model.png
    python benchmarks/fit_area_model.py --check     # only compare, write nothing
    python benchmarks/fit_area_model.py --families maxtree,e2m1rnd
                                                    # fit only these families, keep the rest
    python benchmarks/fit_area_model.py --bounded   # only remeasure the bounded back end's
                                                    # block calibration (and refit its
                                                    # single-stage factors), keep the rest

1. Every primitive of :data:`hwgen.primitives.DEFAULT_GRID` is synthesized with the fixed flow
   (:data:`sim.cost.synth.FLOW`, cached under ``build/synth``) and one linear formula per family
   (:data:`sim.area_model.FEATURES`) is fitted by least squares on the NAND2 equivalents.
2. With ``--units`` every generated configuration (:func:`sim.cost.table.sweep_configs`: the
   full grid unit x residual x 1..4 stages x 16/32/64 lanes) is generated into
   ``build/units/`` and synthesized with ``rtl_out/``'s modules, smallest first, ``--jobs``
   local processes or ``--cluster`` Ray tasks (:func:`sim.sweep.synthesize_sweep`); the
   results go into the checked-in
   table ``sim/cost/synth_table.json`` (keyed by the Verilog's SHA-256, saved after each
   unit, so an interrupted run resumes where it stopped). ``--blocks`` adds the
   hierarchical run's per-sub-block areas.
3. Per dot unit, two factors (front end, rest) are fitted on the table's stage-3 entries
   with the full window (:func:`calibrate_units`; the encoders get none), and per back end
   one for the logic a single-stage unit feeds ahead of its accumulator loop, on the
   single-stage entries with 16 and 32 lanes (:func:`calibrate_comb_align`); every other
   entry is held out, among them every single-stage unit with 64 lanes.
   The accumulator's blocks are calibrated by synthesizing reference adders, not units:
   the full window's align and round (:func:`calibrate_accumulator`) and the bounded back
   end's blocks on one reference adder of each kind: one term, pre-added, paired, split
   (:func:`calibrate_bounded`).
4. The model is compared with every entry of the table and the worst relative error is
   printed, overall and on the held-out entries (the bar is 10%).
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hif4spec import DEFAULTS, EXACT_ACCUMS, REFERENCE_ACCUM, unit_spec  # noqa: E402
from hwgen import primitives  # noqa: E402
from sim import area_model  # noqa: E402
from sim.cost import synth, table  # noqa: E402
from sim.progress import Reporter  # noqa: E402


def fit_primitives(grid=None):
    """Synthesize every primitive of ``grid`` (default: the whole calibration grid) and fit
    one formula per family; returns ``{family: {"coeffs", "samples", ...}}``."""
    grid = grid or primitives.DEFAULT_GRID
    items = [(fam, p) for fam, ps in grid.items() for p in ps]
    data = {}
    progress = Reporter("primitives", unit="module")
    for idx, (fam, params) in enumerate(items):
        progress(idx, len(items), f"{fam}{params}")
        top, text = primitives.primitive_verilog(fam, params)
        res = synth.synthesize_text(text, top)
        data.setdefault(fam, []).append((list(params), res.nand2, res.longest_path))
    progress(len(items), len(items), "primitives")
    progress.close()
    families = {}
    for fam, rows in data.items():
        X = np.array([area_model.features(fam, p) for p, _, _ in rows])
        y = np.array([a for _, a, _ in rows])
        # relative least squares: every primitive counts by its relative error
        coef, *_ = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)
        pred = X @ coef
        err = np.abs(pred - y) / y
        families[fam] = {
            "features": [name for name, _ in area_model.FEATURES[fam]],
            "coeffs": [round(float(c), 6) for c in coef],
            "max_rel_error": round(float(err.max()), 4),
            "samples": [{"params": p, "nand2": a, "longest_path": lp} for p, a, lp in rows],
        }
    return families


def _block_factors(block, top, subs, families, source):
    """Synthesize the Amaranth ``block`` (top module ``top``) hierarchically and return,
    per ``(name, module)`` of ``subs``, the ratio of the submodule's synthesized area (with
    the submodules it instantiates) to the primitive cost of the ``accum.<name>`` entries of
    ``block.parts()``."""
    from amaranth.back import verilog

    from hwgen.parts import entries

    text = verilog.convert(block, name=top, emit_src=False)
    res = synth.synthesize_text(text, top, hierarchical=True)
    blocks = {}
    structure = {"unit": top, "structure": entries("accum", block.parts())}
    for comp in area_model.unit_inventory(structure):
        blocks[comp.block] = blocks.get(comp.block, 0.0) + comp.cost({"families": families})
    def total(name):
        mod = res.modules[name]
        return mod["nand2"] + sum(k * total(child) for child, k in mod["instances"].items())

    out = {}
    for name, module in subs:
        value = total(f"{top}.{module}")
        key = f"accum.{name}"
        out[key] = {"factor": round(value / blocks[key], 4), "synth_nand2": value,
                    "primitives_nand2": round(blocks[key], 1), "source": source}
    return out


def calibrate_accumulator(families):
    """Synthesize the shared FP32 accumulator once (hierarchically) and record, per sub-block
    (``accum.align``, ``accum.round``), the ratio of its synthesized area to the sum of its
    primitive costs. The accumulator is the one block every unit shares; its alignment and
    rounding logic are wider and more irregular (clamped shifts, exponent logic, special
    cases) than any primitive, so this one measurement anchors them.
    """
    from hwgen.accum import Accumulator, TermSpec

    acc = Accumulator([TermSpec("t0", 24, 8, 110)])
    return _block_factors(acc, "calib_acc", [("align", "add.align"), ("round", "add.round")],
                          families, f"hwgen.accum.Accumulator, one 24-bit term, window "
                                    f"{acc.spec.window} bits, hierarchical synthesis")


#: The reference steps of the bounded back end's calibration, ``(terms, max_exp_diff)``:
#: one synthetic term (the window back end's reference); two synthetic terms pre-added
#: (up to 63 binades apart: an 85-bit window, about as wide as a pre-added unit's); two
#: independent ones for the pair and four for the split. None is a unit's own geometry.
BOUNDED_REFS = {"one": ([("t0", 24, 8, 110)], None),
                "preadd": ([("q0", 20, 7, 100), ("q1", 20, 7, 100)], 63),
                "pair": ([("p0", 12, 8, 140), ("p1", 12, 8, 140)], None),
                "split": ([(f"s{i}", 12, 8, 140) for i in range(4)], None)}
#: The sub-blocks each reference calibrates: its own and the four every bounded adder has,
#: whose synthesized size depends on the window they work in (the rounder is 0.78x its
#: primitives in the one-term reference's 27-bit window, 1.11x in the pre-added one's 85).
BOUNDED_SHARED_SUBS = ("decode", "align", "addsub", "round")
BOUNDED_SUBS = {"one": (), "preadd": ("preadd",), "pair": ("pair",),
                "split": ("split", "bypass", "versus")}


def calibrate_bounded(families):
    """Synthesize the reference bounded adders (``BOUNDED_REFS``) hierarchically and record,
    per reference and sub-block (its own, ``BOUNDED_SUBS``, and ``accum.decode``,
    ``accum.align``, ``accum.addsub``, ``accum.round``), the ratio of its synthesized area
    to the sum of its primitive costs: the bounded counterpart of
    :func:`calibrate_accumulator`, whose factors (fitted on a 320-bit window) do not
    describe a 27-to-88-bit one. A unit's accumulator takes the factors of the reference of
    its kind (:func:`sim.area_model.bounded_reference`)."""
    from hwgen.accum import TermSpec
    from hwgen.accum_bounded import BoundedAdd

    out = {}
    for ref, (terms, max_exp_diff) in BOUNDED_REFS.items():
        add = BoundedAdd([TermSpec(*t) for t in terms], max_exp_diff=max_exp_diff)
        subs = BOUNDED_SUBS[ref] + BOUNDED_SHARED_SUBS
        pre = "" if max_exp_diff is None else f", pre-added up to {max_exp_diff} apart"
        out[ref] = _block_factors(
            add, f"calib_bnd_{ref}", [(sub, sub) for sub in subs], families,
            f"hwgen.accum_bounded.BoundedAdd, terms {terms}{pre}, window "
            f"{add.bspec.window} bits, hierarchical synthesis")
    return out


#: The configurations the unit factors are fitted on; every other stage count is held out.
CALIBRATION_STAGES = 3
#: Lane counts of the single-stage entries the single-stage factors (``comb_align``,
#: ``comb_step``) are fitted on; the 64-lane ones are held out.
COMB_FIT_LANES = (16, 32)


def calibrate_units(coeffs, tab=None):
    """Fit, per unit, the factors of its front end and of the rest on its stage-3 entries
    of the synthesis table (relative least squares: every configuration counts by its
    relative error). ``coeffs`` are the primitive and accumulator coefficients without
    unit factors."""
    tab = table.load_table() if tab is None else tab
    base = {k: v for k, v in coeffs.items() if k != "units"}
    rows = {}
    for entry in tab.values():
        man = entry["manifest"]
        if (man["parameters"]["stages"] != CALIBRATION_STAGES
                or unit_spec(man["unit"]).kind != "dot"
                or man["parameters"].get("accum", REFERENCE_ACCUM) != REFERENCE_ACCUM):
            continue    # encoders get no factors (their primitives only); other back ends
                        # are held out, their accumulators calibrated on reference adders
        est = area_model.estimate_manifest(man, coeffs=base)
        front = sum(v for k, v in est.blocks.items() if area_model.is_front_block(k))
        rows.setdefault(man["unit"], []).append(
            (man["module"], front, est.nand2 - front, entry["nand2"]))
    units = {}
    for unit, data in sorted(rows.items()):
        X = np.array([[f, r] for _, f, r, _ in data])
        y = np.array([a for *_, a in data])
        if len(data) < 2:
            raise SystemExit(f"need two or more stage-{CALIBRATION_STAGES} {unit} entries in "
                             "the synthesis table; run with --units")
        coef, *_ = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)
        err = np.abs(X @ coef - y) / y
        units[unit] = {"front": round(float(coef[0]), 4), "rest": round(float(coef[1]), 4),
                       "fitted_on": sorted(name for name, *_ in data),
                       "max_rel_error": round(float(err.max()), 4)}
    for unit, info in calibrate_comb_align({**base, "units": units}, tab).items():
        units[unit].update(info)
    return units


def calibrate_comb_align(coeffs, tab=None, accums=tuple(area_model.COMB_TAGS)):
    """Fit, per unit and back end of ``accums``, the factor (``area_model.COMB_TAGS``:
    ``comb_align`` for the full window, ``comb_step`` for the bounded back end) of the
    accumulator logic that a single-stage unit feeds combinationally
    (``area_model.is_comb_fed``; the window's term alignment shifters, the bounded back
    end's pre-add, pair, split and term decode), on its single-stage entries with
    ``COMB_FIT_LANES`` lanes only (relative least squares; the other lane counts are held
    out). A unit with no such logic in a back end (NVFP4's window term has a fixed place)
    gets no factor for it.

    Why: synthesized flat, a unit with no register between the front end and the
    accumulator is one long combinational cone, and it comes out larger than the same logic
    cut by a register: for MXFP4's window by about the cost of its term shifters again
    (4.5k NAND2-eq with two terms, 10.6k to 11k with four), for the bounded units by up
    to 10% of the unit. ``benchmarks/late_shift.py`` shows a shifter fed late by an adder tree
    costs 0.06x to 0.3x more on its own, so only part of the effect sits in the tagged
    logic; the factor is a calibration on where it scales, not a model of its cause.

    Why two lane counts: for HiF4 the excess is small and uneven, from -0.7x to +1.9x the
    cost of its shifters from one configuration to the next, so the three 32-lane entries
    alone leave the factor ill-determined. Fitted on them alone, once
    ``hif4_dot_rdense_s1_l32`` was in the table, it put ``hif4_dot_r24_s1_l16`` at +10.1%."""
    tab = table.load_table() if tab is None else tab
    tags = {area_model.COMB_TAGS[a] for a in accums}

    def with_factor(f):
        return {**coeffs, "units": {u: {**info, **{t: f for t in tags}}
                                    for u, info in coeffs["units"].items()}}

    # the model is linear in the factor: its cost at 2 less its cost at 1 is the tagged
    # logic's
    one, doubled = with_factor(1.0), with_factor(2.0)
    rows = {}
    for entry in tab.values():
        man = entry["manifest"]
        tag = area_model.COMB_TAGS.get(man["parameters"].get("accum", REFERENCE_ACCUM))
        if (tag not in tags or not area_model.is_comb_fed(man)
                or man["parameters"]["lanes"] not in COMB_FIT_LANES):
            continue
        plain = area_model.estimate_manifest(man, coeffs=one).nand2
        tagged = area_model.estimate_manifest(man, coeffs=doubled).nand2
        if tagged - plain > 0:
            rows.setdefault((man["unit"], tag), []).append(
                (man["module"], plain, tagged - plain, entry["nand2"]))
    out = {}
    for (unit, tag), data in sorted(rows.items()):
        s = np.array([d for _, _, d, _ in data])
        y = np.array([a for *_, a in data])
        base = np.array([p for _, p, _, _ in data])
        extra = float(np.sum((s / y) * (y - base) / y) / np.sum((s / y) ** 2))
        out.setdefault(unit, {}).update({
            tag: round(1.0 + extra, 4),
            f"{tag}_fitted_on": sorted(name for name, *_ in data)})
    return out


def print_bounded_calibration(coeffs):
    """Print the bounded back end's block factors per reference adder and every unit's
    single-stage factors."""
    for ref, blocks in coeffs["calibration_bounded"].items():
        factors = ", ".join(f"{name.removeprefix('accum.')} {info['factor']}"
                            for name, info in blocks.items())
        print(f"  bounded, {ref} reference: synthesized / primitives = {factors}")
    for unit, info in coeffs["units"].items():
        for accum, tag in area_model.COMB_TAGS.items():
            if tag in info:
                print(f"  {unit}, {accum}: logic fed combinationally x {info[tag]} (fitted "
                      f"on {', '.join(info[f'{tag}_fitted_on'])})")


def plot_model_vs_synth(path):
    """Scatter of model against synthesis for every table entry (the bounded back end's
    apart), with the 10% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table.model_vs_synth()
    fig, ax = plt.subplots(figsize=(6, 5))
    for unit, color in (("hif4", "tab:blue"), ("mxfp4", "tab:red"), ("nvfp4", "tab:green")):
        for fit, bnd, marker, label in ((True, False, "o", "fitted on"),
                                        (False, False, "x", "held out"),
                                        (True, True, "s", "bounded, fitted on"),
                                        (False, True, "^", "bounded, held out")):
            pts = [(r[2] / 1e3, r[3] / 1e3) for r in rows if r[1] == unit and r[5] == fit
                   and r[0].endswith("_bnd") == bnd]
            if pts:
                ax.scatter(*zip(*pts), c=color, marker=marker, s=28,
                           label=f"{unit} ({label}, {len(pts)})")
    top = max(max(r[2], r[3]) for r in rows) / 1e3 * 1.05
    ax.plot([0, top], [0, top], "k-", lw=0.8)
    for f in (0.9, 1.1):
        ax.plot([0, top], [0, top * f], "k:", lw=0.8)
    worst = max(rows, key=lambda r: abs(r[4]))
    ax.set_title(f"Area model vs Yosys, {len(rows)} configurations\n"
                 f"worst {worst[4]:+.1%} ({worst[0]}); dotted: \u00b110%")
    ax.set_xlabel("synthesis, thousand NAND2-eq")
    ax.set_ylabel("model, thousand NAND2-eq")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", action="store_true",
                    help="synthesize the whole unit sweep (slow) into the synthesis table")
    ap.add_argument("--accum", choices=EXACT_ACCUMS, default=None,
                    help="with --units, the accumulator back end of the swept units (default: "
                         f"each configuration's, {DEFAULTS['accum']} where it has it, else "
                         f"{REFERENCE_ACCUM}; each back end covers every configuration)")
    ap.add_argument("--check", action="store_true",
                    help="only compare the model with the synthesis table; write nothing")
    ap.add_argument("--jobs", type=int, default=1,
                    help="local worker processes for --units (one Yosys run each)")
    ap.add_argument("--blocks", action="store_true",
                    help="with --units, also run the hierarchical flow for per-sub-block areas")
    ap.add_argument("--timeout", type=int, default=3600, metavar="S",
                    help="give up on a unit after S seconds of Yosys (default 3600; 0: never)")
    ap.add_argument("--families", metavar="F1,F2",
                    help="fit only these primitive families (a family added to the model) and "
                         "merge them into sim/area_coeffs.json; every other coefficient, the "
                         "accumulator calibration and the unit factors stay as they are")
    ap.add_argument("--bounded", action="store_true",
                    help="only remeasure the bounded back end's block calibration (four "
                         "reference adders, a minute), refit its single-stage factors on "
                         "the table and merge both into sim/area_coeffs.json")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="draw the model against synthesis for every configuration")
    ap.add_argument("--backend", choices=synth.BACKENDS, default=None,
                    help="Yosys build that runs the flow: yowasp (default) or native "
                         "(the pyosys package, same Yosys commit, about 1.5x faster)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="with --units, keep each unit's design after `synth` (and, with "
                         "--backend native, each ABC job's network after SAT sweeping) under "
                         "build/synth so that a stopped multi-hour run resumes from there")
    ap.add_argument("--cluster", metavar="ADDRESS",
                    help="with --units, synthesize on a Ray cluster (ray://HOST:PORT, HOST:PORT "
                         "or auto) through hif4 sweep's driver; see docs/cluster.md")
    args = ap.parse_args(argv)
    if args.backend:
        os.environ[synth.BACKEND_ENV] = args.backend     # primitives and units alike

    if args.units:
        from sim import sweep

        # a failed local run is not retried (a unit that timed out would time out again);
        # a cluster task is, once more, for a lost worker
        report = sweep.synthesize_sweep(accum=args.accum, cluster=args.cluster,
                                        jobs=args.jobs, retries=1 if args.cluster else 0,
                                        hierarchical=args.blocks, timeout=args.timeout,
                                        checkpoint=args.checkpoint)
        for name, message in report.failed.items():
            print(f"warning: {name} not synthesized: {message}", file=sys.stderr)
    if args.bounded and not args.check:
        coeffs = json.loads(area_model.COEFFS_PATH.read_text())
        coeffs["calibration_bounded"] = calibrate_bounded(coeffs["families"])
        tag = area_model.COMB_TAGS["bounded"]          # refit on the new calibration
        for info in coeffs["units"].values():
            info.pop(tag, None)
            info.pop(f"{tag}_fitted_on", None)
        for unit, info in calibrate_comb_align(coeffs, accums=("bounded",)).items():
            coeffs["units"][unit].update(info)
        area_model.COEFFS_PATH.write_text(json.dumps(coeffs, indent=1, sort_keys=True) + "\n")
        area_model._load.cache_clear()
        print_bounded_calibration(coeffs)
    elif args.families and not args.check:
        names = args.families.split(",")
        unknown = [n for n in names if n not in primitives.DEFAULT_GRID]
        if unknown:
            raise SystemExit(f"not a primitive family: {', '.join(unknown)}")
        fitted = fit_primitives({n: primitives.DEFAULT_GRID[n] for n in names})
        coeffs = json.loads(area_model.COEFFS_PATH.read_text())
        coeffs["families"].update(fitted)
        area_model.COEFFS_PATH.write_text(json.dumps(coeffs, indent=1, sort_keys=True) + "\n")
        area_model._load.cache_clear()
        for fam, info in sorted(fitted.items()):
            print(f"  {fam:6s} {info['max_rel_error']:6.1%}  coeffs {info['coeffs']}")
    elif not args.check:
        families = fit_primitives()
        coeffs = {"flow": synth.FLOW, "unit": "NAND2 equivalents (CMOS transistors / 4)",
                  "families": families, "calibration": calibrate_accumulator(families),
                  "calibration_bounded": calibrate_bounded(families)}
        coeffs["units"] = calibrate_units(coeffs)
        area_model.COEFFS_PATH.write_text(json.dumps(coeffs, indent=1, sort_keys=True) + "\n")
        area_model._load.cache_clear()
        print("primitive fits (max relative error on the grid):")
        for fam, info in sorted(families.items()):
            print(f"  {fam:6s} {info['max_rel_error']:6.1%}  coeffs {info['coeffs']}")
        for name, info in coeffs["calibration"].items():
            print(f"  {name}: synthesized / primitives = {info['factor']}")
        for unit, info in coeffs["units"].items():
            print(f"  {unit}: front end x {info['front']}, rest x {info['rest']} (fitted on "
                  f"{len(info['fitted_on'])} stage-{CALIBRATION_STAGES} configurations, "
                  f"worst {info['max_rel_error']:.1%})")
        print_bounded_calibration(coeffs)
    worst = table.report_model_vs_synth(verbose=True)
    if args.plot:
        plot_model_vs_synth(args.plot)
        print(f"wrote {args.plot}")
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
