"""Area / throughput comparison of the generated units (the engine of ``hif4 estimate``).

A configuration is a (unit, residual) pair; its module is the generated Verilog in
``rtl_out/`` whose manifest has that unit and residual (the standard set). For each one the
comparison gives the model area (:mod:`sim.area_model`), optionally the synthesized area
(:mod:`sim.cost.synth`, looked up in the checked-in table first), the longest path, the
MACs per cycle, the cycles of a GEMM on an R x C array (:mod:`sim.cyclesim`) and the figures
derived from them.
"""

import json
import math
from pathlib import Path

__all__ = ["RTL_DIR", "find_manifests", "select_manifest", "estimate_rows", "plot_rows",
           "format_table"]

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


def select_manifest(manifests, unit, residual):
    """The manifest of ``unit`` with ``residual`` (the one with the most lanes, then the
    fewest stages, when several are present), or None."""
    cands = [(v, m) for v, m in manifests if m["unit"] == unit
             and m.get("parameters", {}).get("residual", "none") == residual]
    if not cands:
        return None
    cands.sort(key=lambda vm: (-vm[1]["parameters"].get("lanes", 64),
                               vm[1]["parameters"].get("stages", 0), vm[1]["module"]))
    return cands[0]


def _rel(path):
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def estimate_rows(units, residuals, *, gemm=(256, 2048, 256), array=(4, 4), freq_ghz=1.0,
                  bandwidth=math.inf, synth=False, rtl_dir=RTL_DIR, progress=None,
                  synth_backend=None):
    """One dict per (unit, residual) configuration found; see ``hif4 estimate --help``.

    Baselines (MXFP4 and NVFP4 without residual) are evaluated even when not listed, for the
    ratio columns. Raises ``LookupError`` when a requested configuration has no module, and
    :class:`~sim.cost.synth.SynthError` when ``synth`` needs a Yosys run (a module not in the
    table) that fails; ``synth_backend`` picks the Yosys build for such runs.
    """
    from sim import area_model
    from sim.cost import synth as synth_mod
    from sim.cost import table as table_mod
    from sim.cyclesim import UnitTiming, simulate_gemm

    manifests = find_manifests(rtl_dir)
    wanted = [(u, r) for u in units for r in residuals if not (u == "nvfp4" and r != "none")]
    if not wanted:
        raise LookupError("no configuration left: NVFP4 has no residual path")
    base = [("mxfp4", "none"), ("nvfp4", "none")]
    todo = wanted + [b for b in base if b not in wanted]
    tab = table_mod.load_table()
    rows, total = [], len(todo)
    m, k, n = gemm
    R, C = array
    for idx, (unit, residual) in enumerate(todo):
        if progress:
            progress(idx, total, f"{unit} {residual}")
        sel = select_manifest(manifests, unit, residual)
        if sel is None:
            if (unit, residual) in wanted:
                raise LookupError(f"no generated module for unit {unit!r} with residual "
                                  f"{residual!r} in {_rel(rtl_dir)}; run `hif4 generate "
                                  "--all` first")
            continue
        verilog, manifest = sel
        est = area_model.estimate_manifest(manifest)
        text = verilog.read_text()
        entry = tab.get(synth_mod.verilog_sha256(text))
        area_synth = None
        longest = entry["longest_path"] if entry else None
        if synth:
            if entry is None:
                res = synth_mod.synthesize(verilog, manifest["module"], backend=synth_backend)
                area_synth, longest = res.nand2, res.longest_path
            else:
                area_synth = entry["nand2"]
        timing = UnitTiming.from_manifest(manifest)
        rep = simulate_gemm(unit, m, k, n, residual=residual, array=array,
                            bandwidth=bandwidth, timing=timing, compute=False)
        macs_unit = 64 / timing.ii
        area = area_synth if area_synth is not None else est.nand2
        tops = 2 * rep.macs * freq_ghz * 1e9 / rep.cycles / 1e12
        rows.append({
            "unit": unit, "residual": residual, "module": manifest["module"],
            "verilog": _rel(verilog),
            "stages": manifest["parameters"].get("stages"),
            "lanes": manifest["parameters"].get("lanes"),
            "ii": timing.ii, "latency": timing.latency,
            "macs_per_cycle": macs_unit * R * C, "macs_per_cycle_unit": macs_unit,
            "area_model_nand2": round(est.nand2, 1),
            "area_synth_nand2": area_synth,
            "area_blocks_model": {k2: round(v, 1) for k2, v in est.blocks.items()},
            "area_per_mac_nand2": area / macs_unit,
            "longest_path": longest,
            "gemm": list(gemm), "array": list(array), "gemm_cycles": rep.cycles,
            "utilization": rep.utilization,
            "effective_tops": tops,
            "tops_per_mnand2": tops / (area * R * C / 1e6),
            "bits_per_mac": 8 * rep.bytes_moved / rep.macs,
            "bytes_moved": rep.bytes_moved,
            "stall_cycles": rep.stall_cycles,
            "_requested": (unit, residual) in wanted,
        })
    if progress:
        progress(total, total, "done")
    by = {(r["unit"], r["residual"]): r for r in rows}
    for r in rows:
        for name in ("mxfp4", "nvfp4"):
            b = by.get((name, "none"))
            r[f"area_per_mac_vs_{name}"] = (r["area_per_mac_nand2"] / b["area_per_mac_nand2"]
                                            if b else None)
            r[f"tops_per_mnand2_vs_{name}"] = (r["tops_per_mnand2"] / b["tops_per_mnand2"]
                                               if b else None)
    out = [r for r in rows if r.pop("_requested")]
    return out


def format_table(rows, freq_ghz):
    """A plain-text comparison table."""
    head = ["unit", "residual", "area model", "area synth", "NAND2/MAC", "path", "MAC/cyc",
            "GEMM cycles", f"TOPS@{freq_ghz:g}GHz", "TOPS/MNAND2", "bits/MAC", "vs MXFP4",
            "vs NVFP4"]
    lines = []
    for r in rows:
        def f(x, spec):
            return "-" if x is None else format(x, spec)
        lines.append([r["unit"], r["residual"], f(r["area_model_nand2"], ".0f"),
                      f(r["area_synth_nand2"], ".0f"), f(r["area_per_mac_nand2"], ".1f"),
                      f(r["longest_path"], "d"), f(r["macs_per_cycle"], ".0f"),
                      f(r["gemm_cycles"], "d"), f(r["effective_tops"], ".3f"),
                      f(r["tops_per_mnand2"], ".3f"), f(r["bits_per_mac"], ".3f"),
                      f(r["area_per_mac_vs_mxfp4"], ".2f"),
                      f(r["area_per_mac_vs_nvfp4"], ".2f")])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in lines]
    out.append("area = NAND2 equivalents of one unit (synthesis when given, else model); "
               "vs = area per MAC ratio")
    return "\n".join(out)


def plot_rows(rows, path):
    """Bar charts of area per MAC and of throughput per area for each configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['unit']}\n{r['residual']}" for r in rows]
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
