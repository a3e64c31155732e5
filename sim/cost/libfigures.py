"""The liberty-flow figures of one generated unit: one synthesis into a Liberty library
(:func:`sim.cost.libsynth.synthesize_liberty`) as a flat record (area, leakage, flip-flops,
critical path split into the accumulator loop and the rest, in ps and FO4, MACs or
elements per cycle), and the figures ``hif4 estimate --liberty`` reports of it at a clock:
whether it meets the clock, the clock it is reported at, throughput there, area per MAC
and the area model's estimate for the library.

Throughput at a clock of period ``T`` ps: ``2 x MACs/cycle / T`` TOPS (MACs per cycle
= 64 / the initiation interval of the unit's manifest, as :mod:`sim.cost.estimate`
computes it); an encoder's, elements per cycle x 1000 / ``T`` G elements/s.

The iso-frequency sweep (:mod:`sim.cost.isofreq`) records its runs with
:func:`run_record` too.
"""

from pathlib import Path

__all__ = ["run_record", "liberty_figures", "throughput", "model_um2", "per_cycle"]


def per_cycle(manifest):
    """MACs per cycle of a dot unit, elements per cycle of an encoder (64 / ii)."""
    from hif4spec import STEP_ELEMS
    from sim.cyclesim import UnitTiming

    return STEP_ELEMS / UnitTiming.from_manifest(manifest).ii


def run_record(result, manifest):
    """The table record of one :class:`~sim.cost.libsynth.LibSynthResult` of ``manifest``."""
    from hif4spec import REFERENCE_ACCUM, unit_spec

    par = manifest["parameters"]
    kind = unit_spec(manifest["unit"]).kind
    t = result.timing
    return {
        "module": manifest["module"], "unit": manifest["unit"], "kind": kind,
        "residual": par["residual"],
        "accum": par.get("accum", REFERENCE_ACCUM) if kind == "dot" else None,
        "stages": par["stages"], "lanes": par["lanes"],
        "interleave": par.get("interleave", 1), "script": result.script,
        "target_ps": result.clock_ps, "area_um2": result.area, "seq_area_um2": result.seq_area,
        "leakage_nw": result.leakage_nw, "flip_flops": result.flip_flops,
        "critical_ps": t["critical_ps"], "loop_ps": t["loop_ps"],
        "feed_forward_ps": t["feed_forward_ps"], "critical_fo4": t["critical_fo4"],
        "loop_fo4": t["loop_fo4"], "feed_forward_fo4": t["feed_forward_fo4"],
        "fo4_ps": t["fo4_ps"], "path_cells": t["path_cells"],
        "per_cycle": per_cycle(manifest), "seconds": result.seconds,
        "sha256": result.sha256, "liberty_sha256": result.liberty_sha256,
        "library": result.library, "synth_key": result.key,
    }


def liberty_figures(verilog, manifest, lib, clock_ps=None, *, script="delay", backend=None):
    """The liberty-flow figures of one generated module (``hif4 estimate --liberty``): its
    :func:`run_record` plus ``clock_ps`` (asked for, or None), ``meets`` (None without a
    clock), ``freq_mhz`` (the clock asked for where the unit meets it, else the fastest it
    runs at: 1 / its critical path), ``area_per_unit`` (µm² per MAC/cycle or per
    element/cycle), ``tops`` (dot units) or ``gelem_s`` (encoders) at ``freq_mhz``, and
    ``model_um2``, the area model's estimate for the library (None where uncalibrated).

    The unit is mapped with the clock as ABC's delay target. ABC's own delay model is
    optimistic next to the static timing, so where that run misses the clock the unit is
    mapped again without a target (ABC's least delay), and the faster of the two runs is
    the one reported; its ``target_ps`` says which (None: no target)."""
    from .libsynth import synthesize_liberty

    text = Path(verilog).read_text()
    rec = run_record(synthesize_liberty(text, manifest=manifest, lib=lib, script=script,
                                        clock_ps=clock_ps, backend=backend), manifest)
    if clock_ps is not None and rec["critical_ps"] > clock_ps:
        fast = run_record(synthesize_liberty(text, manifest=manifest, lib=lib, script=script,
                                             clock_ps=None, backend=backend), manifest)
        if fast["critical_ps"] < rec["critical_ps"]:
            rec = fast
    meets = None if clock_ps is None else rec["critical_ps"] <= clock_ps
    period = clock_ps if meets else rec["critical_ps"]
    rec.update(throughput(rec, period))
    rec.update({"clock_ps": clock_ps, "meets": meets, "freq_mhz": 1e6 / period,
                "model_um2": model_um2(manifest, lib)})
    return rec


def model_um2(manifest, lib):
    """The area model's µm² of a unit in ``lib`` (its per-library calibration, fitted on
    the ``area`` script), or None where the library, unit or back end has none."""
    from sim.area_model import UncalibratedLibrary, estimate_um2

    try:
        return estimate_um2(manifest, lib.name, lib.sha256)
    except UncalibratedLibrary:
        return None


def throughput(rec, period_ps):
    out = {"area_per_unit": rec["area_um2"] / rec["per_cycle"]}
    if rec["kind"] == "dot":
        out["tops"] = 2 * rec["per_cycle"] / period_ps
    else:
        out["gelem_s"] = rec["per_cycle"] * 1e3 / period_ps
    return out
