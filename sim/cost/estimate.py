"""Area / throughput comparison of the generated units (the engine of ``hif4 estimate``).

A configuration is a (unit, residual) pair; its module is the one generated Verilog file in
``rtl_out/`` (or another folder) whose manifest has that unit and residual and the stages and
lanes asked for (:func:`select_manifest`: never a guess between several). For each one the
comparison gives the model area (:mod:`sim.area_model`), optionally the synthesized area
(:mod:`sim.cost.synth`, looked up in the checked-in table first), the longest path and,
apart, the accumulator loop's depth and the feed-forward depth (:mod:`sim.cost.depth`), the
MACs per cycle, the cycles of a GEMM on an R x C array (:mod:`sim.cyclesim`) and the figures
derived from them. An encoder (kind ``"encoder"`` in :mod:`hif4spec.units`) gets its area,
longest path, elements per cycle and area per element; :func:`combined_rows` adds each
encoder to the dot unit it feeds (same format, residual, stages and lanes), per MAC.
"""

import json
import math
from pathlib import Path

from hif4spec import FORMATS

__all__ = ["RTL_DIR", "find_manifests", "select_manifest", "estimate_rows", "plot_rows",
           "format_table", "combined_rows", "format_combined", "combined_pairs",
           "RATIO_FORMATS", "COMBINED_REFERENCE", "ratio_unit"]

#: The formats the ratio columns (``vs MXFP4``, ``vs NVFP4``) compare each row with: the
#: unit of the row's kind in that format, without residual, at the same stages and lanes.
RATIO_FORMATS = ("mxfp4", "nvfp4")
#: The (format, residual) the combined table's ``vs HiF4`` column compares with.
COMBINED_REFERENCE = ("hif4", "none")

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl_out"


def find_manifests(rtl_dir=RTL_DIR):
    """``[(verilog_path, manifest)]`` for every unit manifest in ``rtl_dir``."""
    found = []
    for path in sorted(Path(rtl_dir).glob("*.json")):
        try:
            manifest = json.loads(path.read_text())
        except ValueError:
            continue
        if not isinstance(manifest, dict) or "unit" not in manifest or "module" not in manifest:
            continue
        verilog = path.with_suffix(".v")
        if verilog.exists():
            found.append((verilog, manifest))
    return found


def select_manifest(manifests, unit, residual=None, stages=None, lanes=None, accum=None, *,
                    where=None):
    """The one ``(verilog_path, manifest)`` of ``manifests`` matching the given parameters.

    A parameter left None matches any value, but ``accum``: a dot unit's back end left None
    is the default one of the manifest's residual mode (``hif4spec.default_accum``), so
    that several back ends can share a folder.
    No match, or more than one, raises
    ``LookupError`` with a one-line message naming the candidates and, for several, the
    option (``--residual``, ``--stages``, ``--lanes``) that tells them apart; ``where`` (a
    folder) is named in the message.
    """
    from hif4spec import REFERENCE_ACCUM, default_accum, unit_spec

    want = {"residual": residual, "stages": stages, "lanes": lanes}
    if unit_spec(unit).kind == "dot":
        want["accum"] = accum

    def matches(m):
        wanted = dict(want)
        if "accum" in wanted and accum is None:
            wanted["accum"] = default_accum(unit, _param(m, "residual")) or REFERENCE_ACCUM
        return all(x is None or _param(m, k) == x for k, x in wanted.items())

    of_unit = [(v, m) for v, m in manifests if m.get("unit") == unit]
    cands = [(v, m) for v, m in of_unit if matches(m)]
    if len(cands) == 1:
        return cands[0]
    # the default back end, not asked for, is left out of the message
    named = {k: x for k, x in want.items() if x is not None and (k != "accum" or accum)}
    given = ", ".join([f"unit {unit}"] + [f"{k} {x}" for k, x in named.items()])
    place = f" in {_rel(where)}" if where is not None else ""
    if not cands:
        have = ", ".join(Path(v).name for v, _ in of_unit) or "none"
        command = "hif4 generate " + " ".join(
            [f"--unit {unit}"] + [f"--{k} {x}" for k, x in named.items()]
            + ([f"--out {_rel(where)}"] if where is not None else []))
        # modules that differ only in their back end: name the option that picks one
        others = sorted({_param(m, "accum") for _, m in of_unit
                         if all(x is None or _param(m, k) == x
                                for k, x in want.items() if k != "accum")}
                        if "accum" in want else set())
        also = f", or give --accum {'/'.join(others)} for what is there" if others else ""
        raise LookupError(f"no generated module for {given}{place} (modules of {unit}: "
                          f"{have}); make it with `{command}`{also}")
    differ = [k for k in ("residual", "stages", "lanes")
              if want[k] is None and len({m["parameters"].get(k) for _, m in cands}) > 1]
    names = ", ".join(Path(v).name for v, _ in cands)
    pick = " or ".join(f"--{k}" for k in differ) or "--manifest"
    raise LookupError(f"{len(cands)} generated modules match {given}{place}: {names}; "
                      f"pick one with {pick}")


def accum_for(unit, accum, residual=None):
    """The back end to select for ``unit`` (with ``residual``, when given) when ``accum``
    is asked for: ``accum`` if the unit has it, else None (the default)."""
    from hif4spec import accums_of

    return accum if accum in accums_of(unit, residual) else None


def _param(manifest, key):
    """A manifest's parameter; a dot unit's manifest written before back ends could be
    chosen has the reference one."""
    from hif4spec import REFERENCE_ACCUM

    par = manifest.get("parameters", {})
    return par.get(key, REFERENCE_ACCUM) if key == "accum" else par.get(key)


def _rel(path):
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def estimate_rows(units, residuals, *, stages=None, lanes=None, accum=None,
                  gemm=(256, 2048, 256),
                  array=(4, 4), freq_ghz=1.0, bandwidth=math.inf, synth=False, rtl_dir=RTL_DIR,
                  manifests=None, progress=None, synth_backend=None, liberty=None):
    """One dict per (unit, residual) configuration; see ``hif4 estimate --help``.

    The pairs are ``units`` x ``residuals`` less those a unit does not accept
    (:func:`hif4spec.residuals_of`); each pair's module is picked by :func:`select_manifest`
    from ``manifests`` (default: :func:`find_manifests` of ``rtl_dir``) with ``stages``,
    ``lanes`` and ``accum`` (a dot unit's accumulator back end; a unit without that back end,
    and every unit when None, has the default one). The ratio columns compare against MXFP4
    and NVFP4 without residual at the row's stages and lanes, picked the same way (None when
    that module is not there); an encoder's, against the
    MXFP4 and NVFP4 encoders without residual, per element. Raises ``LookupError`` when
    no pair is left or a pair has no module or several, and
    :class:`~sim.cost.synth.SynthError` when ``synth`` needs a Yosys run (a module not in the
    table) that fails; ``synth_backend`` picks the Yosys build for such runs.

    ``liberty`` (a dict ``{"lib": Library, "clock_ps": period or None}``) also maps each
    module to that standard-cell library (:func:`sim.cost.libfigures.liberty_figures`, the
    ``liberty`` key of its row); a dot unit's throughput columns are then at the clock it
    meets (the one asked for, or the fastest it runs at), its ``freq_ghz``, instead of
    ``freq_ghz``.
    """
    from hif4spec import residuals_of

    if manifests is None:
        manifests = find_manifests(rtl_dir)
    wanted = [(u, r) for u in units for r in residuals if r in residuals_of(u)]
    if not wanted:
        accepts = "; ".join(f"{u} accepts {', '.join(residuals_of(u))}" for u in units)
        raise LookupError(f"no configuration left: residual {', '.join(residuals)} is not a "
                          f"mode of the units given ({accepts})")
    chosen = [select_manifest(manifests, u, r, stages, lanes, accum_for(u, accum, r),
                               where=rtl_dir)
              for u, r in wanted]
    bases = {}
    for _, man in chosen:
        par = man["parameters"]
        for fmt in RATIO_FORMATS:
            name = ratio_unit(man["unit"], fmt)
            key = (name, par["stages"], par["lanes"])
            if key not in bases:
                try:
                    bases[key] = None if name is None else select_manifest(
                        manifests, name, "none", *key[1:], accum_for(name, accum, "none"))
                except LookupError:
                    bases[key] = None
    todo = {m["module"]: (v, m) for v, m in chosen}
    for sel in bases.values():
        if sel is not None:
            todo.setdefault(sel[1]["module"], sel)
    todo = list(todo.values())
    tab = _synth_table()
    rows = {}
    for idx, (verilog, manifest) in enumerate(todo):
        if progress:
            progress(idx, len(todo), manifest["module"])
        rows[manifest["module"]] = _row(verilog, manifest, tab, gemm=gemm, array=array,
                                        freq_ghz=freq_ghz, bandwidth=bandwidth, synth=synth,
                                        synth_backend=synth_backend, liberty=liberty)
    if progress:
        progress(len(todo), len(todo), "done")
    out = []
    for _, manifest in chosen:
        r = rows[manifest["module"]]
        for fmt in RATIO_FORMATS:
            sel = bases[ratio_unit(r["unit"], fmt), r["stages"], r["lanes"]]
            b = rows[sel[1]["module"]] if sel else None
            if r["kind"] == "encoder":
                r[f"area_per_element_vs_{fmt}"] = (
                    r["area_per_element_nand2"] / b["area_per_element_nand2"] if b else None)
                continue
            r[f"area_per_mac_vs_{fmt}"] = (r["area_per_mac_nand2"] / b["area_per_mac_nand2"]
                                           if b else None)
            r[f"tops_per_mnand2_vs_{fmt}"] = (r["tops_per_mnand2"] / b["tops_per_mnand2"]
                                              if b else None)
        out.append(r)
    return out


def ratio_unit(unit, fmt):
    """The unit a ratio column in format ``fmt`` compares ``unit`` with: the first registered
    unit of ``unit``'s kind in ``fmt``, or None where there is none."""
    from hif4spec import unit_spec, units_of_kind

    kind = unit_spec(unit).kind
    return next((u.name for u in units_of_kind(kind) if u.fmt == fmt), None)


def combined_pairs():
    """``[(dot unit, encoder, residual), ...]`` of the combined table: each registered dot
    unit with each encoder of its format, in each residual mode of both standard sets."""
    from hif4spec import units_of_kind

    return [(d.name, e.name, r) for d in units_of_kind("dot")
            for e in units_of_kind("encoder") if e.fmt == d.fmt
            for r in d.standard if r in e.standard]


def combined_rows(rows, array=(4, 4)):
    """Encoder + dot unit per MAC, one dict per pair of :func:`combined_pairs` whose encoder
    and dot-unit rows (same stages and lanes) are both in ``rows``.

    Both consume or emit one 64-element step every ``ii`` cycles, so one encoder keeps one
    dot unit busy: ``nand2_per_mac`` is (encoder + dot unit) / the dot unit's MACs per
    cycle. In a GEMM on an R x C array an activation step is quantized once and used by the
    C units of its row: ``nand2_per_mac_shared`` charges 1/C of an encoder per unit.
    ``encoder_vs_dot`` is the encoder's area over the dot unit's; ``vs_hif4`` compares the
    1:1 figure with :data:`COMBINED_REFERENCE` (HiF4 without residual). Areas are
    synthesized where the rows have them, else the model's (``source``).
    """
    from hif4spec import unit_spec

    cols = array[1]
    index = {(r["unit"], r["residual"], r["stages"], r["lanes"]): r for r in rows}
    out = []
    for dot, encoder, residual in combined_pairs():
        fmt = unit_spec(dot).fmt
        for r in rows:
            if (r["unit"], r["residual"]) != (dot, residual):
                continue
            enc = index.get((encoder, residual, r["stages"], r["lanes"]))
            if enc is None:
                continue
            synth = r["area_synth_nand2"] is not None and enc["area_synth_nand2"] is not None
            key = "area_synth_nand2" if synth else "area_model_nand2"
            a_enc, a_dot = enc[key], r[key]
            macs = r["macs_per_cycle_unit"]
            out.append({
                "format": fmt, "residual": residual, "stages": r["stages"],
                "lanes": r["lanes"], "source": "synthesis" if synth else "model",
                "encoder": enc["module"], "dot": r["module"],
                "encoder_nand2": a_enc, "dot_nand2": a_dot, "encoder_vs_dot": a_enc / a_dot,
                "nand2_per_mac": (a_enc + a_dot) / macs,
                "nand2_per_mac_shared": (a_enc / cols + a_dot) / macs, "shared_by": cols,
            })
    base = {(c["stages"], c["lanes"]): c["nand2_per_mac"] for c in out
            if (c["format"], c["residual"]) == COMBINED_REFERENCE}
    for c in out:
        b = base.get((c["stages"], c["lanes"]))
        c["vs_hif4"] = c["nand2_per_mac"] / b if b else None
    return out


def format_combined(rows):
    """The combined table (:func:`combined_rows`) as plain text."""
    names = {f: spec.title for f, spec in FORMATS.items()}
    head = ["configuration", "encoder", "dot unit", "enc/dot", "NAND2/MAC 1:1",
            "NAND2/MAC shared", "vs HiF4", "source"]
    lines = []
    for c in rows:
        label = names[c["format"]] + ("+ResQ-2:4" if c["residual"] == "2:4" else
                                      "+dense" if c["residual"] == "dense" else "")
        lines.append([label, f"{c['encoder_nand2']:.0f}", f"{c['dot_nand2']:.0f}",
                      f"{c['encoder_vs_dot']:.2f}", f"{c['nand2_per_mac']:.1f}",
                      f"{c['nand2_per_mac_shared']:.1f}",
                      "-" if c["vs_hif4"] is None else f"{c['vs_hif4']:.2f}", c["source"]])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    shared = rows[0]["shared_by"] if rows else 0
    out.append("encoder + dot unit in NAND2 equivalents per MAC/cycle: 1:1 = one encoder per "
               f"dot unit; shared = one encoder per row of {shared} units (--array columns)")
    return "\n".join(out)


def _synth_table():
    from sim.cost import table as table_mod
    return table_mod.load_table()


def _row(verilog, manifest, tab, *, gemm, array, freq_ghz, bandwidth, synth, synth_backend,
         liberty=None):
    """The figures of one module (without the ratio columns)."""
    from hif4spec import STEP_ELEMS, unit_spec
    from sim import area_model
    from sim.cost import synth as synth_mod
    from sim.cyclesim import UnitTiming, simulate_gemm

    m, k, n = gemm
    R, C = array
    unit, par = manifest["unit"], manifest["parameters"]
    est = area_model.estimate_manifest(manifest)
    entry = tab.get(synth_mod.verilog_sha256(Path(verilog).read_text()))
    area_synth = None
    longest = entry["longest_path"] if entry else None
    if synth:
        if entry is None:
            res = synth_mod.synthesize_text(Path(verilog).read_text(), manifest["module"],
                                            backend=synth_backend)
            area_synth, longest = res.nand2, res.longest_path
        else:
            area_synth = entry["nand2"]
    timing = UnitTiming.from_manifest(manifest)
    depth = (entry or {}).get("depth")
    if depth is None and synth and unit_spec(unit).kind == "dot":
        from sim.cost.depth import unit_depths
        depth = unit_depths(Path(verilog).read_text(), manifest, backend=synth_backend)
    lib_row = None
    if liberty is not None:
        from sim.cost.libfigures import liberty_figures

        lib_row = liberty_figures(verilog, manifest, liberty["lib"], liberty.get("clock_ps"),
                                  backend=synth_backend)
        freq_ghz = lib_row["freq_mhz"] / 1e3
    if unit_spec(unit).kind == "encoder":
        per_cycle = STEP_ELEMS / timing.ii
        area = area_synth if area_synth is not None else est.nand2
        return {
            "unit": unit, "kind": "encoder", "residual": par["residual"],
            "module": manifest["module"], "verilog": _rel(verilog),
            "stages": par["stages"], "lanes": par["lanes"],
            "ii": timing.ii, "latency": timing.latency,
            "elements_per_cycle": per_cycle,
            "area_model_nand2": round(est.nand2, 1), "area_synth_nand2": area_synth,
            "area_blocks_model": {k2: round(v, 1) for k2, v in est.blocks.items()},
            "area_per_element_nand2": area / per_cycle, "longest_path": longest,
            **({"liberty": lib_row} if lib_row else {}),
        }
    rep = simulate_gemm(unit, m, k, n, residual=par["residual"], array=array,
                        bandwidth=bandwidth, timing=timing, compute=False)
    macs_unit = STEP_ELEMS / timing.ii
    area = area_synth if area_synth is not None else est.nand2
    tops = 2 * rep.macs * freq_ghz * 1e9 / rep.cycles / 1e12
    return {
        "unit": unit, "kind": "dot", "residual": par["residual"],
        "accum": _param(manifest, "accum"), "module": manifest["module"], "verilog": _rel(verilog),
        "stages": par["stages"], "lanes": par["lanes"],
        "ii": timing.ii, "latency": timing.latency,
        "macs_per_cycle": macs_unit * R * C, "macs_per_cycle_unit": macs_unit,
        "area_model_nand2": round(est.nand2, 1),
        "area_synth_nand2": area_synth,
        "area_blocks_model": {k2: round(v, 1) for k2, v in est.blocks.items()},
        "area_per_mac_nand2": area / macs_unit,
        "longest_path": longest,
        "loop_depth": depth["loop"] if depth else None,
        "feed_forward_depth": depth["feed_forward"] if depth else None,
        "gemm": list(gemm), "array": list(array), "gemm_cycles": rep.cycles,
        "utilization": rep.utilization,
        "effective_tops": tops,
        "tops_per_mnand2": tops / (area * R * C / 1e6),
        "bits_per_mac": 8 * rep.bytes_moved / rep.macs,
        "bytes_moved": rep.bytes_moved,
        "stall_cycles": rep.stall_cycles,
        "freq_ghz": freq_ghz,
        "freq_source": "assumed" if lib_row is None else "liberty",
        **({"liberty": lib_row} if lib_row else {}),
    }


def format_table(rows, freq_ghz):
    """A plain-text comparison table: the dot units, then the encoders (if any)."""
    enc = [r for r in rows if r["kind"] == "encoder"]
    rows = [r for r in rows if r["kind"] == "dot"]
    out = [_format_dot(rows, freq_ghz)] if rows else []
    if enc:
        out.append(_format_encoders(enc))
    return "\n\n".join(out)


def _format_encoders(rows):
    head = ["encoder", "residual", "area model", "area synth", "NAND2/elem", "path",
            "elem/cyc", "latency", "vs MXFP4", "vs NVFP4"]
    lines = []
    for r in rows:
        def f(x, spec):
            return "-" if x is None else format(x, spec)
        lines.append([r["unit"], r["residual"], f(r["area_model_nand2"], ".0f"),
                      f(r["area_synth_nand2"], ".0f"), f(r["area_per_element_nand2"], ".1f"),
                      f(r["longest_path"], "d"), f(r["elements_per_cycle"], ".0f"),
                      f(r["latency"], "d"), f(r["area_per_element_vs_mxfp4"], ".2f"),
                      f(r["area_per_element_vs_nvfp4"], ".2f")])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    out.append("encoder area = NAND2 equivalents of one encoder (synthesis when given, else "
               "model); elem/cyc = BF16 elements quantized per cycle; vs = area per element "
               "ratio against the MXFP4 / NVFP4 encoder without residual")
    return "\n".join(out)


def _format_dot(rows, freq_ghz):
    measured = any(r.get("freq_source") == "liberty" for r in rows)
    # the frequency is an assumption unless the liberty flow timed each unit
    tops = "TOPS@clock" if measured else f"TOPS@{freq_ghz:g}GHz(assumed)"
    head = ["unit", "residual", "accum", "area model", "area synth", "NAND2/MAC", "path",
            "loop", "ff", "MAC/cyc",
            "GEMM cycles", tops, "TOPS/MNAND2", "bits/MAC", "vs MXFP4",
            "vs NVFP4"]
    lines = []
    for r in rows:
        def f(x, spec):
            return "-" if x is None else format(x, spec)
        lines.append([r["unit"], r["residual"], r["accum"], f(r["area_model_nand2"], ".0f"),
                      f(r["area_synth_nand2"], ".0f"), f(r["area_per_mac_nand2"], ".1f"),
                      f(r["longest_path"], "d"), f(r["loop_depth"], "d"),
                      f(r["feed_forward_depth"], "d"), f(r["macs_per_cycle"], ".0f"),
                      f(r["gemm_cycles"], "d"), f(r["effective_tops"], ".3f"),
                      f(r["tops_per_mnand2"], ".3f"), f(r["bits_per_mac"], ".3f"),
                      f(r["area_per_mac_vs_mxfp4"], ".2f"),
                      f(r["area_per_mac_vs_nvfp4"], ".2f")])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    out.append("area = NAND2 equivalents of one unit (synthesis when given, else model); "
               "path = longest register-to-register path in cells; loop = the accumulator's "
               "register-to-register loop, ff = the longest path outside it (synthesized "
               "stage by stage; - where not measured); vs = area per MAC ratio; "
               + ("TOPS@clock: at the clock each unit meets in the liberty flow (table below)"
                  if measured else f"TOPS at an assumed {freq_ghz:g} GHz clock (--freq-ghz; "
                  "the liberty flow, --liberty --clock, times the units)"))
    return "\n".join(out)


def plot_rows(rows, path):
    """Bar charts of area per MAC and of throughput per area for each configuration, each
    labelled with its unit, residual mode and accumulator back end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["kind"] == "dot"]
    labels = [f"{r['unit']}\n{r['residual']}\n{r['accum']}" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(rows))
    model = [r["area_model_nand2"] / r["macs_per_cycle_unit"] for r in rows]
    axes[0].bar([i - 0.2 for i in x], model, width=0.4, label="model")
    if any(r["area_synth_nand2"] is not None for r in rows):
        syn = [(r["area_synth_nand2"] or 0) / r["macs_per_cycle_unit"] for r in rows]
        axes[0].bar([i + 0.2 for i in x], syn, width=0.4, label="synthesis")
    axes[0].set_xticks(list(x), labels)
    axes[0].set_ylabel("NAND2 equivalents per MAC/cycle")
    axes[0].set_title("Unit area per MAC")
    axes[0].legend()
    axes[1].bar(list(x), [r["tops_per_mnand2"] for r in rows], color="tab:green")
    axes[1].set_xticks(list(x), labels)
    axes[1].set_ylabel("effective TOPS per million NAND2-eq")
    g = rows[0]
    axes[1].set_title(f"GEMM {'x'.join(map(str, g['gemm']))} on "
                      f"{g['array'][0]}x{g['array'][1]} units")
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
