"""The checked-in table of unit synthesis results (``sim/cost/synth_table.json``).

Synthesizing a full unit takes minutes, so the figures of every generated configuration
are kept in the repository, keyed by the SHA-256 of the Verilog that was synthesized. Each
entry holds the unit's manifest (its ``structure`` is what the area model reads, so the
model is evaluated on every entry without the Verilog), the flat-flow figures (``nand2``,
``transistors``, ``flip_flops``, ``longest_path``), the per-sub-block areas of the
hierarchical run (``blocks``) and, for the dot units of the standard set, the logic depth
of the accumulator loop apart from the feed-forward path (``depth``,
:mod:`sim.cost.depth`; :func:`record_depths`).

``benchmarks/fit_area_model.py --units`` regenerates it: every configuration of the
generator registry (unit x residual x stages x lanes, :func:`sweep_configs`). A slow test
re-synthesizes the standard set and checks the transistor counts.
"""

import fcntl
import json
import os
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

from ..progress import LOG_INTERVAL_S
from . import synth

__all__ = ["TABLE_PATH", "load_table", "save_table", "lookup", "entry_for", "entry_for_text",
           "needs_synthesis", "merge_into", "synthesize_sweep", "sweep_configs",
           "missing_configs", "model_vs_synth", "grid_summary", "report_model_vs_synth",
           "record_verilog", "record_depths"]

TABLE_PATH = Path(__file__).with_name("synth_table.json")
ROOT = Path(__file__).resolve().parents[2]
#: Seconds between two progress reports while no module finishes (one can take hours).
HEARTBEAT_S = LOG_INTERVAL_S


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
    keep = ("module", "unit", "parameters", "ports", "latency", "ii", "timing", "structure")
    return {k: manifest[k] for k in keep if k in manifest}


def entry_for(verilog_path, manifest=None, *, hierarchical=True, source=None, cache_dir=None,
              timeout=3600, backend=None, checkpoint=False):
    """Synthesize one generated module (flat, and hierarchical for the blocks) into an entry."""
    verilog_path = Path(verilog_path)
    if manifest is None:
        manifest = json.loads(verilog_path.with_suffix(".json").read_text())
    return entry_for_text(verilog_path.read_text(), manifest, hierarchical=hierarchical,
                          source=source or verilog_path.name, cache_dir=cache_dir,
                          timeout=timeout, backend=backend, checkpoint=checkpoint)


def entry_for_text(text, manifest, *, hierarchical=True, source, cache_dir=None, timeout=3600,
                   backend=None, checkpoint=False):
    """:func:`entry_for` of a Verilog text and its manifest, given by value (a sweep task
    on another machine, ``sim.sweep``); returns ``(sha256, entry)``."""
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


def record_verilog(paths, table=None, *, jobs=1, progress=None, hierarchical=True,
                   path=TABLE_PATH, timeout=3600, backend=None, checkpoint=False):
    """Synthesize Verilog files (with manifests beside them) into the table; returns it.
    The entries of those already there take the manifests beside them
    (:func:`refresh_manifests`).

    Each result is merged into the file at ``path`` as soon as it is known (under a lock,
    re-reading the file first), so an interrupted run keeps what it finished and two runs
    on different configurations can share the table. A module whose synthesis fails or
    takes longer than ``timeout`` seconds does not stop the others; once they are done,
    :class:`~sim.cost.synth.SynthError` names every such module.

    ``progress(done, total, what)`` is called when a module finishes (``what`` its name)
    and, while none does, every :data:`HEARTBEAT_S` seconds with the modules running and
    how long each has run, so that a run of hours is never silent.
    """
    table = load_table(path) if table is None else table
    paths = [Path(p) for p in paths]
    refresh_manifests([(p.read_text(), json.loads(p.with_suffix(".json").read_text()))
                       for p in paths], table, path=path)
    todo = []
    for p in paths:
        p = Path(p)
        if needs_synthesis(table, synth.verilog_sha256(p.read_text()), hierarchical):
            todo.append(p)
    started = {}

    def work(p):
        started[p] = time.monotonic()
        p = Path(p).resolve()
        source = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name
        if source.startswith("build/"):
            source = "generated: " + p.stem
        return entry_for(p, hierarchical=hierarchical, source=source, timeout=timeout,
                         backend=backend, checkpoint=checkpoint)

    failed = []
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(work, p): p for p in todo}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=HEARTBEAT_S, return_when=FIRST_COMPLETED)
            if not finished and progress:
                progress(done, len(todo), _running(futures, pending, started))
            for future in finished:
                done += 1
                try:
                    sha, entry = future.result()
                except synth.SynthError as exc:
                    failed.append(f"{futures[future].stem} ({str(exc).splitlines()[0]})")
                    if progress:
                        progress(done, len(todo), f"FAILED {futures[future].stem}")
                    continue
                _merge_entry(table, sha, entry)
                merge_into(path, sha, entry)
                if progress:
                    progress(done, len(todo), entry["manifest"].get("module", "?"))
    if failed:
        raise synth.SynthError(f"{len(failed)} of {len(todo)} modules not synthesized: "
                               + "; ".join(failed))
    return table


def _running(futures, pending, started):
    """``"NAME H:MM:SS, ..."``: the modules being synthesized and how long each has run."""
    now = time.monotonic()
    parts = []
    for future in sorted(pending, key=lambda f: futures[f].name):
        begun = started.get(futures[future])
        if begun is not None and not future.done():
            secs = int(now - begun)
            parts.append(f"{futures[future].stem} {secs // 3600}:{secs // 60 % 60:02d}:"
                         f"{secs % 60:02d}")
    return ", ".join(parts) or "starting"


def record_depths(paths, *, progress=None, path=TABLE_PATH, timeout=3600, backend=None):
    """Measure the stage depths (:func:`sim.cost.depth.unit_depths`) of the dot units among
    the Verilog files ``paths`` (manifests beside them) and add them to their table entries
    as ``depth``; a unit whose Verilog has no entry yet is synthesized first
    (:func:`record_verilog`). ``progress`` gets each stage module's name."""
    from . import depth

    dots = []
    for p in map(Path, paths):
        manifest = json.loads(p.with_suffix(".json").read_text())
        if manifest.get("kind") == "dot":
            dots.append((p, manifest))
    record_verilog([p for p, _ in dots], path=path, timeout=timeout, backend=backend,
                   hierarchical=False)
    for p, manifest in dots:
        text = p.read_text()
        sha = synth.verilog_sha256(text)
        if "depth" in load_table(path)[sha]:
            continue
        found = depth.unit_depths(text, manifest, progress=progress, timeout=timeout,
                                  backend=backend)
        with locked(path):
            on_disk = load_table(path)
            on_disk[sha]["depth"] = found
            save_table(on_disk, path)


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
    rows are the standard set's, recorded by :func:`record_verilog`), with accumulator back
    end ``accum`` where a unit has it (None: every configuration, each with its default
    back end, ``hif4spec.default_accum``)."""
    from hif4spec import accums_of
    from hwgen.units import all_configs

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


def generate_config(unit, residual, stages, lanes, out_dir, accum=None):
    """Generate one configuration, with back end ``accum`` (default: the configuration's
    default one) (cached, ``sim.bench.runner.generate_cached``)."""
    from hif4spec import resolve
    from hwgen.units import module_name
    from sim.bench.runner import generate_cached

    params = resolve(unit, residual, stages, lanes, accum)
    verilog, _ = generate_cached(unit, params, Path(out_dir) / module_name(unit, **params))
    return verilog


def _model_nand2(verilog_path):
    from sim import area_model

    manifest = json.loads(Path(verilog_path).with_suffix(".json").read_text())
    return area_model.estimate_manifest(manifest).nand2


def synthesize_sweep(*, jobs=1, progress=None, configs=None, hierarchical=False,
                     timeout=3600, backend=None, checkpoint=False, accum=None):
    """Generate and synthesize every configuration of back end ``accum`` (default: each
    configuration with its default one; and ``rtl_out/``'s standard set) into the table,
    smallest first by the area model, so that an interrupted run has recorded as many
    configurations as it could (the table is saved after each one). With ``checkpoint``,
    units that a stopped run left checkpointed go first."""
    paths = sorted((ROOT / "rtl_out").glob("*.v"))
    build = ROOT / "build" / "units"
    for unit, residual, stages, lanes in configs or sweep_configs(accum):
        paths.append(generate_config(unit, residual, stages, lanes, build, accum))

    def resumable(p):
        return checkpoint and synth.has_checkpoint(p.read_text(), p.stem)

    paths = sorted(set(paths), key=lambda p: (not resumable(p), _model_nand2(p), p.name))
    return record_verilog(paths, jobs=jobs, progress=progress, hierarchical=hierarchical,
                          timeout=timeout, backend=backend, checkpoint=checkpoint)


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
