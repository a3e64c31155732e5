"""Iso-frequency comparison: the smallest unit that meets a clock, per format, in a real
standard-cell library (the liberty flow, :mod:`sim.cost.libsynth`).

The NAND2-equivalent tables compare units at one pipeline depth, whatever clock each would
run at. Here each configuration of the standard set (the dot units HiF4 and MXFP4 with
residual none and 2:4 and NVFP4 without, with their default back end, and the three
encoders with their residual modes; 64 lanes) is generated with 1 to 4 pipeline stages
(:func:`sim.sweep.generate_config`, cached) and mapped to the library at a list of
clock targets (:data:`DOT_TARGETS_PS`, :data:`ENCODER_TARGETS_PS`): ABC is given the
target as its delay goal (``-D``: the period less the flip-flop's clock-to-Q and setup),
first with the ``delay`` script, then with the ``area`` script where the ``delay`` run met
the target (and, when asked for, the ``map`` script where it missed it). Every run is one
*synthesis*: its area (µm²), leakage and static timing (critical register-to-register path,
split into the accumulator loop and the rest).

A run meets every clock period at or above its critical path, whatever target ABC was
given (ABC's own delay model is optimistic next to the static timing of the mapped netlist,
so a tight target often yields the run that meets a looser one). So:

* at a clock period ``T``, a configuration's figure is the least-area run of any stage
  count, script and target whose critical path is at most ``T`` (:func:`best_at`);
* its *fastest clock* is the least critical path of its runs (:func:`fastest`);
* the *common clock* is the fastest clock every standard dot unit meets: the largest of
  their fastest critical paths (:func:`common_clock`), the figure the formats are compared
  at (:func:`format_common`).

Pruning (``exhaustive=False``, the default): stage counts are swept in increasing order and
a (configuration, target) already met with fewer stages is not synthesized with more (more
stages add pipeline registers and do not shorten the accumulator loop, which bounds the dot
units); the ``area`` script runs only where the ``delay`` script met the target, the ``map``
script only where it missed it.

Throughput at a clock is as :mod:`sim.cost.libfigures` gives it.

The sweep (:func:`sim.sweep.isofreq_sweep`) runs every synthesis (:func:`isofreq_task`)
as a task of :func:`sim.sweep.run_tasks` (local processes or Ray), in the order
:func:`plan` gives; each result is merged into a JSON table (:data:`TABLE`, keyed by
library, Verilog and run, :func:`merge`) as it arrives, and a run the table holds is not
done again. :func:`summary` turns the table into the rows, the fastest clocks and the
common-clock comparison (``docs/isofreq.json``); :func:`plot` draws the Pareto curves
(``docs/isofreq.png``).

Energy per MAC at the common clock (``--energy``) comes from :mod:`sim.cost.libenergy`
(:func:`sim.sweep.isofreq_energy`).
"""

import json
import math
import re
from pathlib import Path

from hif4spec import DEFAULTS, FORMATS, standard_set, unit_spec, units_of_kind
from hif4spec import STAGES as SPEC_STAGES

from .libfigures import run_record, throughput
from .libsynth import synthesize_liberty

__all__ = ["DOT_CONFIGS", "ENCODER_CONFIGS", "DOT_TARGETS_PS", "ENCODER_TARGETS_PS",
           "STAGES", "LANES", "TABLE", "parse_clock", "format_clock",
           "isofreq_task", "best_at", "fastest", "common_clock",
           "pareto", "summary", "default_targets", "table_key", "load", "runs_of", "merge",
           "format_targets",
           "format_fastest", "format_common", "format_liberty_rows", "plot", "plan"]

ROOT = Path(__file__).resolve().parents[2]
#: The sweep's table: every synthesis run, by library, Verilog and (script, target).
TABLE = ROOT / "build" / "sweep" / "isofreq_table.json"


def _standard(kind):
    """The (unit, residual) pairs of the standard set of ``kind``, in registry order."""
    return tuple(dict.fromkeys((u, p["residual"]) for u, p in standard_set(kind)))


#: The standard dot units, (unit, residual), each with its default back end.
DOT_CONFIGS = _standard("dot")
#: The encoders, (unit, residual).
ENCODER_CONFIGS = _standard("encoder")
#: Default clock targets (ps) of the dot units: 3000 (333 MHz) is tighter than any of them
#: meets (their accumulator loop alone takes about 4.3 ns in FreePDK45), so its runs give
#: each stage count's fastest netlist; 5000 (200 MHz) lies where the pipelined units just
#: meet or just fail; 9000 (111 MHz) is met by all but the single-stage units, with the
#: least area.
DOT_TARGETS_PS = (3000, 5000, 9000)
#: Default clock targets (ps) of the encoders (the same; an encoder run takes minutes).
ENCODER_TARGETS_PS = (3000, 5000, 9000)
STAGES = SPEC_STAGES
LANES = DEFAULTS["lanes"]
#: The ABC scripts a sweep may run, in the order it runs them
#: (:data:`sim.cost.libsynth.SCRIPTS`).
SCRIPTS = ("delay", "map", "area")
#: The scripts a sweep runs unless told otherwise (the committed standard-set tables' runs).
DEFAULT_SCRIPTS = ("delay", "area")
#: One paragraph on the method, for the JSON results.
METHOD = ("Each configuration (64 lanes, default accumulator back end) is generated with 1 "
          "to 4 pipeline stages and mapped to the library with Yosys + ABC at each clock "
          "target (ABC delay target = period - clock-to-Q - setup), with the delay script, "
          "then the area script where the delay run met its target. A run meets every "
          "clock period at or above its critical register-to-register path (static timing "
          "of the mapped netlist, NLDM tables, wire-load model). At a clock, a "
          "configuration's figure is its least-area run meeting it; its fastest clock is "
          "its least critical path; the common clock is the fastest clock every dot unit "
          "meets. A target met with fewer stages is not synthesized with more (unless "
          "exhaustive).")
TABLE_VERSION = 1

_CLOCK = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*")
_UNITS = {"": ("f", 1e6), "mhz": ("f", 1e6), "ghz": ("f", 1e9), "khz": ("f", 1e3),
          "hz": ("f", 1.0), "ps": ("t", 1.0), "ns": ("t", 1e3), "us": ("t", 1e6)}


def parse_clock(text):
    """A clock given as a frequency (a plain number is MHz: ``500``, ``500MHz``, ``1.2GHz``)
    or a period (``2ns``, ``2000ps``), as its period in ps. Raises ``ValueError`` with a
    one-line message otherwise (zero, negative, no number, an unknown unit)."""
    m = _CLOCK.fullmatch(str(text or ""))
    unit = m and m.group(2).lower()
    if not m or unit not in _UNITS:
        raise ValueError(f"clock {text!r} is not a frequency (500, 500MHz, 1.2GHz) or a "
                         "period (2ns, 2000ps)")
    value = float(m.group(1))
    kind, scale = _UNITS[unit]
    if not value > 0 or math.isinf(value):
        raise ValueError(f"clock {text!r} must be positive")
    ps = value * scale if kind == "t" else 1e12 / (value * scale)
    if not 1.0 <= ps <= 1e9:
        raise ValueError(f"clock {text!r} is {ps:g} ps; give a period of 1 ps to 1 ms")
    return ps


def format_clock(ps):
    """``"5000 ps (200 MHz)"``."""
    return f"{ps:.0f} ps ({1e6 / ps:.0f} MHz)"


# --- one synthesis ------------------------------------------------------------------------

def isofreq_task(text, manifest, script, clock_ps, liberty, backend):
    """Worker side of :func:`sim.sweep.isofreq_sweep`: one synthesis (cached in the worker's
    ``build/liberty/synth``), as its :func:`run_record`. ``liberty`` is the Liberty file's
    path (None: the default library)."""
    from .liberty import load_library

    lib = load_library(liberty)
    result = synthesize_liberty(text, manifest=manifest, lib=lib, script=script,
                                clock_ps=clock_ps, backend=backend)
    return run_record(result, manifest)



# --- selection ----------------------------------------------------------------------------

def _cfg(rec):
    return rec["unit"], rec["residual"]


def _ways(rec):
    """The run's interleave (runs recorded before units could interleave have 1)."""
    return rec.get("interleave") or 1


def _stg(rec):
    """Stages, and the interleave where it is not 1: ``"3"``, ``"3 i4"``."""
    return f"{rec['stages']}" + (f" i{_ways(rec)}" if _ways(rec) != 1 else "")


def _order(rec):
    return rec["area_um2"], rec["stages"], _ways(rec), rec["script"], rec["target_ps"] or 0


def best_at(runs, clock_ps):
    """``{(unit, residual): run}``: each configuration's least-area run (then fewest stages)
    whose critical path is at most ``clock_ps``; a configuration without one is absent."""
    best = {}
    for rec in runs:
        if rec["critical_ps"] <= clock_ps:
            key = _cfg(rec)
            if key not in best or _order(rec) < _order(best[key]):
                best[key] = rec
    return best


def fastest(runs):
    """``{(unit, residual): run}``: each configuration's run with the least critical path
    (then the least area)."""
    out = {}
    for rec in runs:
        key = _cfg(rec)
        if key not in out or (rec["critical_ps"], rec["area_um2"]) < (
                out[key]["critical_ps"], out[key]["area_um2"]):
            out[key] = rec
    return out


def common_clock(runs, configs=DOT_CONFIGS):
    """``(period_ps, (unit, residual))``: the fastest clock every configuration of
    ``configs`` that has runs meets, and the configuration that bounds it; None without
    runs."""
    fast = fastest(runs)
    have = [(fast[c]["critical_ps"], c) for c in configs if c in fast]
    return max(have) if have else None


def pareto(runs, config):
    """The Pareto front of one configuration's runs, slowest first: each run is the least
    area at its clock (no run as fast or faster is smaller), and each next one is faster
    and larger."""
    front, least = [], math.inf
    mine = sorted((r for r in runs if _cfg(r) == tuple(config)),
                  key=lambda r: (r["critical_ps"], r["area_um2"]))
    for rec in mine:            # fastest first: keep a run smaller than every faster one
        if rec["area_um2"] < least:
            front.append(rec)
            least = rec["area_um2"]
    return list(reversed(front))


def _row(config, kind, clock_ps, rec):
    unit, residual = config
    row = {"unit": unit, "residual": residual, "kind": kind, "clock_ps": clock_ps,
           "clock_mhz": 1e6 / clock_ps, "meets": rec is not None}
    if rec is None:
        return row
    row.update({k: rec[k] for k in (
        "module", "stages", "lanes", "accum", "script", "target_ps", "area_um2",
        "seq_area_um2", "leakage_nw", "flip_flops", "critical_ps", "loop_ps",
        "feed_forward_ps", "critical_fo4", "loop_fo4", "feed_forward_fo4", "per_cycle")})
    row["interleave"] = _ways(rec)
    row.update(throughput(rec, clock_ps))
    return row


def _kind(config):
    from hif4spec import unit_spec

    return unit_spec(config[0]).kind


def default_targets(config, targets=None):
    """The clock targets (ps) of ``config``: ``targets`` where given, else
    :data:`DOT_TARGETS_PS` or :data:`ENCODER_TARGETS_PS` by its unit's kind."""
    if targets is not None:
        return list(targets)
    return list(DOT_TARGETS_PS if _kind(config) == "dot" else ENCODER_TARGETS_PS)


def summary(runs, targets=None, configs=None):
    """The results of a set of runs (one library): ``rows`` (each configuration at each
    target, default the targets of its runs: its least-area run meeting it, or ``meets``
    False), ``fastest`` (each
    configuration's fastest run: period, MHz, stages, script, area), ``common`` (the common
    clock of the dot units of ``configs``, the configuration bounding it, and every
    configuration's row there) and ``synthesis_s`` (the runs' Yosys seconds, summed)."""
    runs = list(runs)
    if configs is None:
        seen = {_cfg(r) for r in runs}
        configs = [c for c in DOT_CONFIGS + ENCODER_CONFIGS if c in seen] + sorted(
            seen - set(DOT_CONFIGS + ENCODER_CONFIGS))
    configs = [tuple(c) for c in configs]
    rows = []
    for config in configs:
        kind = _kind(config)
        mine = sorted({r["target_ps"] for r in runs if _cfg(r) == config and r["target_ps"]})
        for t in mine if targets is None else targets:
            rows.append(_row(config, kind, t, best_at(runs, t).get(config)))
    fast = fastest(runs)
    fastest_rows = []
    for config in configs:
        if config in fast:
            rec = fast[config]
            fastest_rows.append(_row(config, _kind(config), rec["critical_ps"], rec))
    dots = [c for c in configs if _kind(c) == "dot"]

    def common_of(group):
        cc = common_clock(runs, group)
        if cc is None:
            return None
        period, bound = cc
        at = best_at(runs, period)
        return {"clock_ps": period, "clock_mhz": 1e6 / period,
                "bound_by": {"unit": bound[0], "residual": bound[1]},
                "units": [{"unit": u, "residual": r} for u, r in group],
                "rows": [_row(c, _kind(c), period, at.get(c)) for c in configs]}

    plain = [c for c in dots if c[1] == "none"]
    return {"rows": rows, "fastest": fastest_rows, "common": common_of(dots),
            "common_without_residual": common_of(plain) if plain != dots else None,
            "synthesis_s": round(sum(r["seconds"] for r in runs), 1)}


# --- the sweep ----------------------------------------------------------------------------

def table_key(lib_sha, sha, script, target):
    """The sweep table's key of one run: library, Verilog (by SHA-256), script, target."""
    return f"{lib_sha[:16]}/{sha[:16]}/{script}/{target:g}"


def load(path=TABLE):
    """The sweep table at ``path`` (``{"version", "runs": {key: run}}``; empty if none)."""
    path = Path(path)
    if not path.is_file():
        return {"version": TABLE_VERSION, "runs": {}}
    table = json.loads(path.read_text())
    table.setdefault("runs", {})
    return table


def runs_of(table, lib_sha):
    """The runs of ``table`` made with the library of SHA-256 ``lib_sha``."""
    return [r for r in table["runs"].values() if r["liberty_sha256"] == lib_sha]


def merge(path, key, record):
    """Merge one run into the table file at ``path`` (under a lock, re-reading it first)."""
    from .table import locked, save_table

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        table = load(path)
        table["runs"][key] = record
        table["version"] = TABLE_VERSION
        save_table(table, path)


def plan(runs, configs, stage, script, targets_of, *, exhaustive=False, gate=True,
         interleave=1):
    """The ``(config, target)`` pairs to synthesize at ``stage`` and ``interleave`` with
    ``script``, given the runs made so far (see the module docstring's pruning, where a run
    with no more stages and no more accumulators than these, and fewer of one, counts as
    fewer stages; ``targets_of(config)`` lists a configuration's targets; ``gate`` False
    runs the area script without a delay run before it)."""
    todo = []
    for config in configs:
        mine = [r for r in runs if _cfg(r) == tuple(config)]
        for t in targets_of(config):
            if not exhaustive:
                if any(r["stages"] <= stage and _ways(r) <= interleave
                       and (r["stages"], _ways(r)) != (stage, interleave)
                       and r["critical_ps"] <= t for r in mine):
                    continue
                delay = [r for r in mine if r["stages"] == stage and _ways(r) == interleave
                         and r["script"] == "delay" and r["target_ps"] == t]
                if gate and script == "area" and not any(r["critical_ps"] <= t for r in delay):
                    continue
                if gate and script == "map" and not any(r["critical_ps"] > t for r in delay):
                    continue
            todo.append((tuple(config), t))
    return todo


# --- text and plot ------------------------------------------------------------------------

def _label(unit, residual):
    spec = unit_spec(unit)
    name = "/".join(FORMATS[f].title or f.upper() for f in (spec.formats or (spec.fmt,)))
    name += "" if residual == "none" else f"+ResQ-{residual}"
    return name + (" encoder" if spec.kind == "encoder" else "")


def _unit_of(fmt, kind):
    """The registered unit of ``kind`` ("dot" or "encoder") for operand format ``fmt``."""
    return next(u.name for u in units_of_kind(kind) if u.fmt == fmt)


def _table(head, lines):
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    return out


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def _cells(r):
    """The columns of a row that meets: stages, script, µm², µm²/unit, timing, leakage,
    throughput."""
    per = r["area_um2"] / r["per_cycle"]
    thr = f"{r['tops']:.3f} TOPS" if "tops" in r else f"{r['gelem_s']:.1f} Gel/s"
    return [_stg(r), r["script"], f"{r['area_um2']:.0f}", f"{per:.1f}",
            f"{r['critical_ps']:.0f} ({r['critical_fo4']:.0f})",
            f"{r['loop_ps']:.0f} ({r['loop_fo4']:.0f})" if r["loop_ps"] else "-",
            f"{r['feed_forward_ps']:.0f} ({r['feed_forward_fo4']:.0f})",
            f"{r['leakage_nw'] / 1e3:.1f}", thr]


_HEAD = ["stg (iL)", "script", "µm²", "µm²/MAC", "critical ps (FO4)", "loop ps (FO4)",
         "ff ps (FO4)", "leak µW", "throughput"]
_NOTE = ("µm²/MAC: per MAC/cycle (dot units) or per element/cycle (encoders); critical = "
         "the longest register-to-register path, loop = the accumulator loop's, ff = the "
         "longest outside it (FO4 = {fo4:.1f} ps); throughput at the row's clock: "
         "2 x MACs/cycle x f (TOPS) or elements/cycle x f (G elements/s)")


def format_targets(summ, fo4_ps):
    """Each configuration at each target (rows of :func:`summary`)."""
    lines = []
    for r in summ["rows"]:
        head = [_label(r["unit"], r["residual"]), f"{r['clock_ps']:.0f}",
                f"{r['clock_mhz']:.0f}"]
        lines.append(head + (_cells(r) if r["meets"] else
                             ["-", "not met"] + ["-"] * (len(_HEAD) - 2)))
    out = _table(["configuration", "clock ps", "MHz"] + _HEAD, lines)
    return "\n".join(out + [_NOTE.format(fo4=fo4_ps)])


def format_fastest(summ):
    """The fastest clock each configuration meets."""
    lines = [[_label(r["unit"], r["residual"]), f"{r['critical_ps']:.0f}",
              f"{r['clock_mhz']:.0f}", _stg(r), r["script"], f"{r['area_um2']:.0f}",
              f"{r['area_um2'] / r['per_cycle']:.1f}",
              f"{r['loop_ps']:.0f}" if r["loop_ps"] else "-", f"{r['feed_forward_ps']:.0f}"]
             for r in summ["fastest"]]
    out = _table(["configuration", "fastest ps", "MHz", "stg", "script", "µm²", "µm²/MAC",
                  "loop ps", "ff ps"], lines)
    return "\n".join(out)


def format_common(summ, fo4_ps, which="common"):
    """The comparison at the common clock (``which``: ``"common"``, every dot unit, or
    ``"common_without_residual"``), with the area per MAC against HiF4 and MXFP4 (without
    residual) and energy per MAC where measured."""
    common = summ.get(which)
    if common is None:
        return "no dot unit has a run: no common clock"
    rows = common["rows"]
    per = {(r["unit"], r["residual"]): r["area_um2"] / r["per_cycle"]
           for r in rows if r["meets"]}
    energy = any("pj_per_mac" in r for r in rows)
    lines = []
    for r in rows:
        label = _label(r["unit"], r["residual"])
        if not r["meets"]:
            lines.append([label] + ["-", "not met"] + ["-"] * (len(_HEAD) + 1 + energy))
            continue
        base = (_unit_of("hif4", r["kind"]), "none")
        mx = (_unit_of("mxfp4", r["kind"]), "none")
        mine = per[(r["unit"], r["residual"])]
        lines.append([label] + _cells(r)
                     + [_f(mine / per[base] if base in per else None, ".2f"),
                        _f(mine / per[mx] if mx in per else None, ".2f")]
                     + ([_f(r.get("pj_per_mac"), ".3f")] if energy else []))
    b = common["bound_by"]
    units = ", ".join(_label(u["unit"], u["residual"]) for u in common["units"])
    out = [f"fastest common clock of {units}: {format_clock(common['clock_ps'])}, "
           f"bound by {_label(b['unit'], b['residual'])}"]
    out += _table(["configuration"] + _HEAD + ["vs HiF4", "vs MXFP4"]
                  + (["pJ/MAC"] if energy else []), lines)
    out.append(_NOTE.format(fo4=fo4_ps) + "; vs = area per MAC (per element) against "
               "HiF4 (the HiF4 encoder) and MXFP4 without residual"
               + ("; pJ/MAC: Gaussian stream, data + flip-flop clock energy "
                  "+ leakage over one period of this clock (docs/liberty.md)" if energy else ""))
    return "\n".join(out)


def format_liberty_rows(rows, lib_note=""):
    """The liberty columns of ``hif4 estimate --liberty`` (rows with a ``liberty`` dict of
    :func:`sim.cost.libfigures.liberty_figures`)."""
    lines = []
    fo4 = None
    stimuli = [s for row in rows for s in (row.get("liberty") or {}).get("energy", {})]
    stimuli = list(dict.fromkeys(stimuli))
    volts = None
    for row in rows:
        lf = row.get("liberty")
        if not lf:
            continue
        pj = [lf.get("energy", {}).get(s, {}).get("pj_per_mac") for s in stimuli]
        volts = next((e["voltage"] for e in lf.get("energy", {}).values()), volts)
        fo4 = lf["fo4_ps"]
        thr = (f"{lf['tops']:.3f} TOPS" if "tops" in lf else f"{lf['gelem_s']:.1f} Gel/s")
        lines.append([row["unit"], row["residual"], _stg(lf), f"{lf['area_um2']:.0f}",
                      _f(lf.get("model_um2"), ".0f"), f"{lf['area_per_unit']:.1f}",
                      f"{lf['critical_ps']:.0f} ({lf['critical_fo4']:.0f})",
                      f"{lf['loop_ps']:.0f} ({lf['loop_fo4']:.0f})" if lf["loop_ps"] else "-",
                      f"{lf['feed_forward_ps']:.0f} ({lf['feed_forward_fo4']:.0f})",
                      f"{lf['leakage_nw'] / 1e3:.1f}",
                      "-" if lf["clock_ps"] is None else f"{lf['clock_ps']:.0f}",
                      {None: "-", True: "yes", False: "no"}[lf["meets"]],
                      f"{lf['freq_mhz']:.3g}", thr] + [_f(x, ".3f") for x in pj])
    out = _table(["unit", "residual", "stg", "µm²", "model µm²", "µm²/MAC",
                  "critical ps (FO4)",
                  "loop ps (FO4)", "ff ps (FO4)", "leak µW", "clock ps", "meets", "at MHz",
                  "throughput"] + [f"pJ/MAC {s}" for s in stimuli], lines)
    out.append("liberty flow" + (f" ({lib_note})" if lib_note else "") + ", ABC script "
               "delay with the clock as its target (and without one where that run "
               "missed the clock: the faster run is shown); model µm² = the area model's "
               "per-library calibration (fitted on the area script; - where uncalibrated); "
               "µm²/MAC per MAC/cycle (dot units) or "
               "per element/cycle (encoders); at MHz = the clock asked for where the unit "
               "meets it, else the fastest it runs at (1 / critical path), and the "
               "throughput there" + (f"; FO4 = {fo4:.1f} ps" if fo4 else "")
               + (f"; pJ/MAC: data + flip-flop clock + leakage at that clock, {volts:g} V "
                  "(docs/liberty.md)" if stimuli else ""))
    return "\n".join(out)


def plot(runs, common=None, note=""):
    """PNG bytes: area per MAC (µm²) against clock (MHz) for each dot configuration (left)
    and area per element for each encoder (right): the Pareto front of its runs (the least
    area meeting each clock, a step where a faster run is needed), an ``x`` at the fastest
    clock it meets (beyond it: not met), the common clock dotted (``common``: MHz, or a
    list of ``(MHz, label)``)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"hif4": "tab:blue", "mxfp4": "tab:orange", "nvfp4": "tab:green"}
    groups = [("dot", DOT_CONFIGS, "µm² per MAC/cycle", "dot-product units"),
              ("encoder", ENCODER_CONFIGS, "µm² per element/cycle", "encoders")]
    have = {_cfg(r) for r in runs}
    groups = [g for g in groups if any(c in have for c in g[1])]
    width = max(8.0, 6.5 * len(groups))
    fig, axes = plt.subplots(1, len(groups), figsize=(width, 5.2), squeeze=False)
    slowest = max((r["critical_ps"] for r in runs), default=1e4)
    for ax, (_, configs, ylabel, title) in zip(axes[0], groups):
        for config in configs:
            front = pareto(runs, config)
            if not front:
                continue
            unit, residual = config
            base = unit_spec(unit).fmt
            xs = [1e6 / r["critical_ps"] for r in front]
            ys = [r["area_um2"] / r["per_cycle"] for r in front]
            left = 1e6 / slowest * 0.9
            xs, ys = [left] + xs, [ys[0]] + ys
            ax.plot(xs, ys, drawstyle="steps-pre", color=colors.get(base),
                    linestyle="-" if residual == "none" else "--",
                    label=_label(unit, residual).removesuffix(" encoder"))
            ax.plot(xs[-1], ys[-1], "x", color=colors.get(base), markersize=9, mew=2)
            ax.annotate(f"{xs[-1]:.0f}", (xs[-1], ys[-1]), textcoords="offset points",
                        xytext=(4, 4), fontsize=7, color=colors.get(base))
        marks = common if isinstance(common, (list, tuple)) else (
            [(common, "common")] if common else [])
        for mhz, what in marks if configs is DOT_CONFIGS else ():
            ax.axvline(mhz, color="grey", linestyle=":", linewidth=1)
            ax.annotate(f"{what} {mhz:.0f} MHz", (mhz, ax.get_ylim()[0]),
                        textcoords="offset points", xytext=(3, 5), fontsize=7,
                        color="grey", rotation=90)
        ax.set_xlabel("clock (MHz)")
        ax.set_ylabel(ylabel)
        swept = sorted({r["stages"] for r in runs if _cfg(r) in configs})
        ax.set_title(f"{title}, stages {','.join(map(str, swept))}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    import textwrap

    fig.suptitle("Least area meeting each clock (x: the fastest clock met)"
                 + (f"\n{textwrap.fill(note, int(width * 16))}" if note else ""), fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
