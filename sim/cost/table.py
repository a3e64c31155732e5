"""The checked-in table of unit synthesis results (``sim/cost/synth_table.json``).

Synthesizing a full unit takes minutes, so the figures of every generated configuration
are kept in the repository, keyed by the SHA-256 of the Verilog that was synthesized. Each
entry holds the unit's manifest (its ``structure`` is what the area model reads, so the
model is evaluated on every entry without the Verilog), the flat-flow figures (``nand2``,
``transistors``, ``flip_flops``, ``longest_path``), the per-sub-block areas of the
hierarchical run (``blocks``) and, for the dot units of the standard set, the logic depth
of the accumulator loop apart from the feed-forward path (``depth``,
:mod:`sim.cost.depth`).

This module holds the per-item side: the entry of one Verilog text and its manifest
(:func:`entry_for_text`), merged into the file under a lock (:func:`merge_into`), and the
comparison of the area model with the entries. Generating configurations and synthesizing
many of them in parallel is :mod:`sim.sweep`'s (:func:`sim.sweep.synth_sweep`, ``hif4 sweep
synth``, ``benchmarks/fit_area_model.py --units``): every configuration of the registry
(unit x residual x stages x lanes, :func:`sweep_configs`). A slow test re-synthesizes the
standard set and checks the transistor counts.
"""

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from . import synth

__all__ = ["TABLE_PATH", "load_table", "save_table", "lookup", "entry_for_text",
           "needs_synthesis", "merge_into", "refresh_manifests", "locked", "sweep_configs",
           "missing_configs", "model_vs_synth", "grid_summary", "report_model_vs_synth"]

TABLE_PATH = Path(__file__).with_name("synth_table.json")
ROOT = Path(__file__).resolve().parents[2]


def load_table(path=TABLE_PATH):
    path = Path(path)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def save_table(table, path=TABLE_PATH):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump(table, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def lookup(verilog_text, table=None):
    """The table entry of a Verilog text (by SHA-256), or None."""
    table = load_table() if table is None else table
    return table.get(synth.verilog_sha256(verilog_text))


def _manifest_core(manifest):
    keep = ("module", "unit", "formats", "parameters", "ports", "latency", "ii", "timing",
            "structure")
    return {k: manifest[k] for k in keep if k in manifest}


def entry_for_text(text, manifest, *, hierarchical=True, source, cache_dir=None, timeout=3600,
                   backend=None, checkpoint=False):
    """Synthesize one generated module, given by value (its Verilog text and manifest, as a
    sweep task on another machine gets them), flat and, with ``hierarchical``, per
    sub-block; returns ``(sha256 of the text, table entry)``. ``source`` says where the
    text came from; the other keywords are :func:`sim.cost.synth.synthesize_text`'s."""
    kwargs = {"timeout": timeout, "backend": backend}
    if cache_dir is not None:
        kwargs["cache_dir"] = cache_dir
    top = manifest.get("module")
    flat = synth.synthesize_text(text, top, checkpoint=checkpoint, **kwargs)
    entry = {
        "manifest": _manifest_core(manifest),
        "nand2": flat.nand2, "transistors": flat.transistors,
        "flip_flops": flat.flip_flops, "longest_path": flat.longest_path,
        "source": source,
    }
    if hierarchical:
        hier = synth.synthesize_text(text, top, hierarchical=True, **kwargs)
        entry["blocks"] = {name: info["nand2"] for name, info in hier.modules.items()}
        entry["instances"] = {name: info["instances"] for name, info in hier.modules.items()
                              if info["instances"]}
        entry["hier_nand2"] = hier.nand2
    return flat.sha256, entry


def _merge_entry(table, sha, entry):
    module = entry["manifest"].get("module")
    for old in [k for k, v in table.items()
                if k != sha and v["manifest"].get("module") == module]:
        del table[old]      # the generator changed: that Verilog is no longer made
    table[sha] = entry


def needs_synthesis(table, sha, hierarchical):
    """Whether the Verilog of hash ``sha`` is missing from ``table`` (or, for
    ``hierarchical``, holds no per-block areas yet)."""
    return sha not in table or (hierarchical and "blocks" not in table[sha])


def merge_into(path, sha, entry):
    """Merge one entry into the table file at ``path`` under a lock, re-reading the file
    first, so that runs on different configurations can share it."""
    with locked(path):
        on_disk = load_table(path)
        _merge_entry(on_disk, sha, entry)
        save_table(on_disk, path)


def refresh_manifests(items, table=None, *, path=TABLE_PATH):
    """Give each Verilog text of ``items`` (``[(verilog_text, manifest), ...]``) that the
    table holds already (by hash) its manifest, where the stored one differs: a generator
    that reports its structure differently while its Verilog stays the same needs no
    synthesis. Returns the names of the modules refreshed; ``table`` (if given) is updated
    too."""
    refreshed = []
    with locked(path):
        on_disk = load_table(path)
        for text, manifest in items:
            sha = synth.verilog_sha256(text)
            core = _manifest_core(manifest)
            if sha in on_disk and on_disk[sha]["manifest"] != core:
                on_disk[sha]["manifest"] = core
                refreshed.append(core["module"])
                if table is not None and sha in table:
                    table[sha]["manifest"] = core
        if refreshed:
            save_table(on_disk, path)
    return refreshed


@contextmanager
def locked(path):
    """An exclusive lock on the table file at ``path`` (a ``.lock`` file beside it)."""
    with open(Path(path).with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sweep_configs(accum=None):
    """Every dot-unit configuration, ``[(unit, residual, stages, lanes), ...]``: the full
    grid unit x residual x stages x lanes of the registry's dot-product units (the encoders'
    rows are the standard set's), with accumulator back end ``accum`` where a unit has it
    (None: every configuration, each with its default back end, ``hif4spec.default_accum``)."""
    from hif4spec import accums_of, all_configs

    return [c for c in all_configs("dot") if accum is None or accum in accums_of(c[0], c[1])]


def missing_configs(table=None, accum=None):
    """The configurations of :func:`sweep_configs` (``accum``) with no entry in the table."""
    table = load_table() if table is None else table
    have = {_config_of(entry["manifest"], accum) for entry in table.values()}
    return [c for c in sweep_configs(accum) if c not in have]


def _config_of(manifest, accum):
    """``(unit, residual, stages, lanes)`` of an entry of back end ``accum``'s grid (None:
    each configuration's default back end), else None (an encoder's entry has no back end
    and is in no grid)."""
    from hif4spec import REFERENCE_ACCUM, default_accum

    p = manifest["parameters"]
    want = accum or default_accum(manifest["unit"], p["residual"])
    if want is None or p.get("accum", REFERENCE_ACCUM) != want:
        return None
    return (manifest["unit"], p["residual"], p["stages"], p["lanes"])


def model_vs_synth(table=None, coeffs=None):
    """One row per table entry, by module name: ``(module, unit, synth_nand2, model_nand2,
    relative error, fitted)``; ``fitted`` is True for the entries the unit factors of the
    area model (``fitted_on`` and the single-stage factors' ``<tag>_fitted_on``,
    ``area_model.COMB_TAGS``) were fitted on."""
    from sim import area_model

    table = load_table() if table is None else table
    keys = ("fitted_on", *(f"{tag}_fitted_on" for tag in area_model.COMB_TAGS.values()))
    fitted = {name for info in (coeffs or area_model.load_coeffs()).get("units", {}).values()
              for key in keys for name in info.get(key, ())}
    rows = []
    for entry in sorted(table.values(), key=lambda e: e["manifest"]["module"]):
        man = entry["manifest"]
        model = area_model.estimate_manifest(man, coeffs=coeffs).nand2
        rows.append((man["module"], man["unit"], entry["nand2"], model,
                     (model - entry["nand2"]) / entry["nand2"], man["module"] in fitted))
    return rows


def grid_summary(table=None, rows=None):
    """The grid of each exact back end by unit and residual mode: ``[(unit, accum,
    residual, synthesized, configurations, worst row of model_vs_synth or None), ...]``."""
    from hif4spec import EXACT_ACCUMS

    table = load_table() if table is None else table
    by_module = {r[0]: r for r in (model_vs_synth(table) if rows is None else rows)}
    have = {}
    for entry in table.values():
        for accum in EXACT_ACCUMS:
            config = _config_of(entry["manifest"], accum)
            if config is not None:
                have[(accum, config)] = by_module[entry["manifest"]["module"]]
    out = []
    for accum in EXACT_ACCUMS:
        groups = {}
        for config in sweep_configs(accum):
            groups.setdefault(config[:2], []).append(have.get((accum, config)))
        for (unit, residual), found in groups.items():
            found_rows = [r for r in found if r is not None]
            worst = max(found_rows, key=lambda r: abs(r[4]), default=None)
            out.append((unit, accum, residual, len(found_rows), len(found), worst))
    return out


def report_model_vs_synth(table=None, *, verbose=False, coeffs=None):
    """Compare the area model with every table entry; returns the worst relative error.

    With ``verbose`` it prints one line per configuration, the worst case overall and the
    worst case among the configurations the unit factors were not fitted on (held out).
    """
    table = load_table() if table is None else table
    rows = model_vs_synth(table, coeffs)
    worst = max((abs(r[4]) for r in rows), default=0.0)
    if verbose:
        print(f"{'module':32s} {'synth':>10s} {'model':>10s} {'error':>7s}")
        for name, _, syn, model, err, fit in rows:
            print(f"{name:32s} {syn:10.0f} {model:10.0f} {err:+7.1%}{' (fit)' if fit else ''}")
        for label, subset in (("", rows), (" held out", [r for r in rows if not r[5]])):
            if subset:
                name, _, _, _, err, _ = max(subset, key=lambda r: abs(r[4]))
                print(f"worst-case model error vs synthesis{label}: {err:+.1%} ({name}) over "
                      f"{len(subset)} configurations")
        from hif4spec import EXACT_ACCUMS

        print()
        print("| unit | back end | residual | synthesized | worst error | at |")
        print("|---|---|---|---:|---:|---|")
        summary = grid_summary(table, rows)
        for unit, accum, residual, have, total, worst_row in summary:
            err, at = ((f"{worst_row[4]:+.1%}", worst_row[0]) if worst_row else ("-", "-"))
            print(f"| {unit} | {accum} | {residual} | {have} of {total} | {err} | {at} |")
        for accum in EXACT_ACCUMS:     # the grid's missing count, from the summary
            total = sum(g[4] for g in summary if g[1] == accum)
            missing = total - sum(g[3] for g in summary if g[1] == accum)
            if missing:
                print(f"{missing} of {total} configurations of the "
                      f"{accum} back end not synthesized yet; run python "
                      f"benchmarks/fit_area_model.py --units --accum {accum}")
    return worst
