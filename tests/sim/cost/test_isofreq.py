"""The iso-frequency comparison (sim/cost/isofreq.py): clock parsing, the selection of the
least area meeting each clock, ``hif4 estimate --liberty --clock`` and ``hif4 sweep
isofreq`` on one small unit, and one-line errors for a bad clock or library."""

import json
import time
from pathlib import Path

import pytest

from sim.cli import main
from sim.cost import isofreq
from small_liberty import write_small_liberty

# --- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, ps", [("500", 2000), ("500MHz", 2000), ("0.5ghz", 2000),
                                      ("2ns", 2000), ("2000ps", 2000), (" 2.5 ns ", 2500),
                                      ("1e3MHz", 1000)])
def test_parse_clock(text, ps):
    assert isofreq.parse_clock(text) == pytest.approx(ps)


@pytest.mark.parametrize("text", ["", "fast", "0", "-5ns", "5 parsecs", "5e20MHz", "inf",
                                  "2 n s", "nan"])
def test_parse_clock_rejects(text):
    with pytest.raises(ValueError) as info:
        isofreq.parse_clock(text)
    assert "\n" not in str(info.value)


# --- selection on a synthetic table -------------------------------------------------------

def _run(unit, residual, stages, script, target, area, critical, per_cycle=64.0):
    kind = "encoder" if unit.endswith("_quant") else "dot"
    return {"module": f"{unit}_{residual}_s{stages}", "unit": unit, "kind": kind,
            "residual": residual, "accum": "bounded" if kind == "dot" else None,
            "stages": stages, "lanes": 64, "script": script, "target_ps": target,
            "area_um2": area, "seq_area_um2": area / 10, "leakage_nw": area * 10,
            "flip_flops": 100 * stages, "critical_ps": critical,
            "loop_ps": 4000.0 if kind == "dot" else 0.0, "feed_forward_ps": critical,
            "critical_fo4": critical / 20, "loop_fo4": 200.0, "feed_forward_fo4": critical / 20,
            "fo4_ps": 20.0, "path_cells": 10, "per_cycle": per_cycle, "seconds": 1.0,
            "sha256": "x", "liberty_sha256": "L", "library": "lib", "synth_key": "k"}


RUNS = [
    # hif4: one stage small and slow, three stages larger and fast, four stages fastest
    _run("hif4", "none", 1, "delay", 9000, 1000, 8500),
    _run("hif4", "none", 1, "area", 9000, 900, 8900),
    _run("hif4", "none", 3, "delay", 5000, 1300, 4800),
    _run("hif4", "none", 3, "delay", 3000, 1500, 4500),
    _run("hif4", "none", 4, "delay", 3000, 1800, 4400),
    # nvfp4: never faster than 5200 ps
    _run("nvfp4", "none", 2, "delay", 9000, 2000, 6000),
    _run("nvfp4", "none", 3, "delay", 3000, 2600, 5200),
    _run("nvfp4", "none", 3, "area", 9000, 1900, 6100),
    # an encoder
    _run("hif4_quant", "none", 2, "delay", 1500, 300, 1600, per_cycle=64.0),
]


def test_best_at_takes_the_least_area_meeting_the_clock():
    at = isofreq.best_at(RUNS, 9000)
    assert at["hif4", "none"]["area_um2"] == 900          # the area script's run
    assert at["nvfp4", "none"]["area_um2"] == 1900
    at = isofreq.best_at(RUNS, 5000)
    # any run meeting 5000 counts, whatever target ABC was given
    assert at["hif4", "none"]["area_um2"] == 1300
    assert ("nvfp4", "none") not in at
    assert isofreq.best_at(RUNS, 4450)["hif4", "none"]["stages"] == 4
    assert list(isofreq.best_at(RUNS, 4000)) == [("hif4_quant", "none")]


def test_fastest_common_clock_and_pareto():
    fast = isofreq.fastest(RUNS)
    assert fast["hif4", "none"]["critical_ps"] == 4400
    assert fast["nvfp4", "none"]["critical_ps"] == 5200
    assert isofreq.common_clock(RUNS) == (5200, ("nvfp4", "none"))
    front = isofreq.pareto(RUNS, ("hif4", "none"))
    assert [r["area_um2"] for r in front] == [900, 1000, 1300, 1500, 1800]
    assert [r["critical_ps"] for r in front] == [8900, 8500, 4800, 4500, 4400]


def test_summary_rows_and_tables():
    summ = isofreq.summary(RUNS, [5000, 9000])
    rows = {(r["unit"], r["clock_ps"]): r for r in summ["rows"]}
    assert rows["hif4", 5000]["meets"] and rows["hif4", 5000]["stages"] == 3
    assert not rows["nvfp4", 5000]["meets"]
    r = rows["hif4", 9000]
    assert r["tops"] == pytest.approx(2 * 64 / 9000) and r["script"] == "area"
    assert rows["hif4_quant", 5000]["gelem_s"] == pytest.approx(64e3 / 5000)
    common = summ["common"]
    assert common["clock_ps"] == 5200 and common["bound_by"] == {"unit": "nvfp4",
                                                                "residual": "none"}
    at = {r["unit"]: r for r in common["rows"]}
    assert at["hif4"]["area_um2"] == 1300 and at["nvfp4"]["area_um2"] == 2600
    assert [r["critical_ps"] for r in summ["fastest"]] == [4400, 5200, 1600]
    text = isofreq.format_common(summ, 20.0)
    assert "5200 ps (192 MHz)" in text and "NVFP4" in text and "2.00" in text
    assert "not met" in isofreq.format_targets(summ, 20.0)
    assert "HiF4 encoder" in isofreq.format_fastest(summ)
    png = isofreq.plot(RUNS, common["clock_mhz"], "synthetic")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_prunes_stages_and_area_runs():
    runs = [_run("hif4", "none", 1, "delay", 9000, 1000, 8500),
            _run("hif4", "none", 2, "delay", 5000, 1100, 5100)]
    configs = [("hif4", "none")]

    def targets(config):
        return [5000, 9000]

    # 9000 is met with one stage: two stages only for 5000
    assert isofreq.plan(runs, configs, 2, "delay", targets) == [(("hif4", "none"), 5000)]
    # the area script where the delay script met its own target only
    assert isofreq.plan(runs, configs, 1, "area", targets) == [(("hif4", "none"), 9000)]
    assert isofreq.plan(runs, configs, 2, "area", targets) == []
    assert isofreq.plan(runs, configs, 2, "area", targets, gate=False) == [
        (("hif4", "none"), 5000)]
    assert len(isofreq.plan(runs, configs, 2, "area", targets, exhaustive=True)) == 2
    # the map script where the delay script missed its own target only
    runs.append(_run("hif4", "none", 2, "delay", 6000, 1200, 5900))

    def more(config):
        return [5000, 6000, 9000]
    assert isofreq.plan(runs, configs, 2, "map", more) == [(("hif4", "none"), 5000)]
    assert isofreq.plan(runs, configs, 1, "map", more) == []
    assert isofreq.plan(runs, configs, 2, "map", more, gate=False) == [
        (("hif4", "none"), 5000), (("hif4", "none"), 6000)]


# --- the CLI on a small unit --------------------------------------------------------------

@pytest.fixture(scope="module")
def small_unit(tmp_path_factory):
    """NVFP4, 16 lanes, 3 stages, generated into a folder of its own."""
    out = tmp_path_factory.mktemp("rtl")
    assert main(["generate", "--unit", "nvfp4", "--lanes", "16", "--stages", "3",
                 "--out", str(out)]) == 0
    return out


def test_estimate_liberty_clock(small_unit, capsys):
    capsys.readouterr()
    rc = main(["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit), "--liberty",
               "--clock", "100MHz", "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1
    r = rows[0]
    lf = r["liberty"]
    assert lf["clock_ps"] == pytest.approx(10000) and lf["script"] == "delay"
    # ABC was given the clock, or (where that run missed it) no target at all
    assert lf["target_ps"] in (10000, None)
    assert lf["area_um2"] > 0 and lf["leakage_nw"] > 0 and lf["flip_flops"] > 0
    assert 0 < lf["loop_ps"] <= lf["critical_ps"] and lf["feed_forward_ps"] > 0
    assert lf["critical_fo4"] == pytest.approx(lf["critical_ps"] / lf["fo4_ps"])
    assert lf["per_cycle"] == r["macs_per_cycle_unit"] == 16
    assert lf["meets"] is (lf["critical_ps"] <= 10000)
    # throughput at the clock met (100 MHz) or else at the unit's fastest
    period = 10000 if lf["meets"] else lf["critical_ps"]
    assert lf["tops"] == pytest.approx(2 * 16 / period)
    assert r["freq_ghz"] == pytest.approx(1e3 / period) and r["freq_source"] == "liberty"
    # the area model's calibration for the default library (fitted on the area script)
    assert lf["model_um2"] == pytest.approx(lf["area_um2"], rel=0.15)
    # the text table: the liberty columns and the clock-based throughput header
    assert main(["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit), "--liberty",
                 "--clock", "10ns"]) == 0
    out = capsys.readouterr().out
    assert "TOPS@clock" in out and "critical ps (FO4)" in out and "FreePDK45" in out


def test_estimate_liberty_clock_missed(small_unit, capsys):
    """A clock the unit cannot meet: the run with it as ABC's target misses, the unit is
    mapped again without a target, and the faster run is reported at its own clock."""
    from sim.cost.libfigures import run_record
    from sim.cost.libsynth import synthesize_liberty
    from sim.cost.liberty import load_library

    capsys.readouterr()
    assert main(["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit), "--liberty",
                 "--clock", "1GHz", "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    lf = r["liberty"]
    assert lf["meets"] is False and lf["clock_ps"] == pytest.approx(1000)
    assert lf["freq_mhz"] == pytest.approx(1e6 / lf["critical_ps"])
    verilog = Path(r["verilog"])
    manifest = json.loads(verilog.with_suffix(".json").read_text())
    runs = [run_record(synthesize_liberty(verilog.read_text(), manifest=manifest,
                                          lib=load_library(), script="delay", clock_ps=target,
                                          backend=None), manifest)
            for target in (1000.0, None)]
    assert lf["critical_ps"] == min(x["critical_ps"] for x in runs)
    assert lf["target_ps"] == min(runs, key=lambda x: x["critical_ps"])["target_ps"]


def test_estimate_liberty_energy(small_unit, capsys):
    """``--liberty --energy``: pJ per MAC of the very netlist the liberty columns describe
    (same script and ABC target), at the clock the unit is reported at, as
    :func:`sim.cost.libenergy.measure_liberty` gives it."""
    from sim.cost.liberty import load_library
    from sim.cost.libenergy import measure_liberty

    capsys.readouterr()
    argv = ["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit), "--liberty",
            "--clock", "100MHz", "--energy", "--stimuli", "gaussian", "--energy-steps", "40"]
    assert main(argv + ["--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    lf = r["liberty"]
    e = lf["energy"]["gaussian"]
    period = 10000 if lf["meets"] else lf["critical_ps"]
    assert e["clock_ps"] == pytest.approx(period) and e["voltage"] == pytest.approx(1.1)
    assert e["checked_words"] > 0
    assert e["pj_per_mac"] == pytest.approx(e["data_pj_per_mac"] + e["clock_pj_per_mac"]
                                            + e["leakage_pj_per_mac"])
    verilog = Path(r["verilog"])
    want = measure_liberty(verilog.read_text(),
                           json.loads(verilog.with_suffix(".json").read_text()),
                           clock_ps=period, lib=load_library(), steps=40,
                           synth_clock_ps=lf["target_ps"])["gaussian"]
    assert e["pj_per_mac"] == want["pj_per_mac"]
    assert want["area_um2"] == lf["area_um2"]          # the same mapping
    # the NAND2-eq energy is still there, and the text table shows the pJ column
    assert r["energy"]["gaussian"]["energy_per_mac"] > 0
    assert main(argv) == 0
    assert "pJ/MAC gaussian" in capsys.readouterr().out


def test_estimate_without_liberty_says_the_clock_is_assumed(small_unit, capsys):
    assert main(["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit)]) == 0
    assert "TOPS@1GHz(assumed)" in capsys.readouterr().out


def _one_line_error(capsys, argv, needle):
    capsys.readouterr()
    start = time.monotonic()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err, err
    assert time.monotonic() - start < 20          # before any synthesis
    return err


@pytest.mark.parametrize("clock", ["fast", "0", "-1GHz", "5 parsecs", ""])
def test_estimate_bad_clock(small_unit, capsys, clock):
    _one_line_error(capsys, ["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit),
                             "--liberty", f"--clock={clock}"], "--clock")


def test_estimate_clock_needs_liberty(capsys):
    _one_line_error(capsys, ["estimate", "--clock", "200MHz"], "--clock applies with --liberty")
    _one_line_error(capsys, ["estimate", "--liberty", "--clock", "200MHz", "--freq-ghz", "1"],
                    "not both")


@pytest.fixture
def bad_libraries(tmp_path):
    (tmp_path / "dir.lib").mkdir()
    (tmp_path / "text.lib").write_text("hello, this is not a library\n")
    return {
        "missing": tmp_path / "nope.lib",
        "folder": tmp_path / "dir.lib",
        "not liberty": tmp_path / "text.lib",
        "no timing": write_small_liberty(tmp_path / "nt.lib", timing=False),
        "no flip-flop": write_small_liberty(tmp_path / "nf.lib", flop=False),
        "no inverter": write_small_liberty(tmp_path / "ni.lib", inverter=False),
    }


@pytest.mark.parametrize("which", ["missing", "folder", "not liberty", "no timing",
                                   "no flip-flop", "no inverter"])
def test_bad_liberty_is_one_line(small_unit, bad_libraries, capsys, monkeypatch, which):
    import sim.cost.libsynth as libsynth

    def never(*a, **k):
        raise AssertionError("synthesis started")

    monkeypatch.setattr(libsynth, "synthesize_liberty", never)
    path = str(bad_libraries[which])
    _one_line_error(capsys, ["estimate", "--unit", "nvfp4", "--rtl-dir", str(small_unit),
                             "--liberty", path, "--clock", "200MHz"], "--liberty")
    _one_line_error(capsys, ["sweep", "isofreq", "--unit", "nvfp4", "--lanes", "16",
                             "--liberty", path], "error")


@pytest.mark.parametrize("argv, needle", [
    (["--clocks", "5ns,fast"], "--clocks"),
    (["--clocks", ","], "--clocks is empty"),
    (["--lanes", "16,32"], "one --lanes"),
    (["--scripts", "fast"], "unknown script"),
    (["--plot", "x.pdf"], "PNG"),
    (["--unit", "nvfp4", "--residual", "2:4"], "no configuration"),
])
def test_sweep_isofreq_bad_input(capsys, argv, needle):
    _one_line_error(capsys, ["sweep", "isofreq"] + argv, needle)


def test_isofreq_options_belong_to_isofreq(capsys):
    _one_line_error(capsys, ["sweep", "synth", "--all", "--clocks", "5ns"],
                    "--clocks applies to sweep isofreq")


def test_tiny_sweep(tmp_path, capsys):
    """NVFP4, 16 lanes, stages 2 and 3 at 5 ns and 10 ns, the delay script: 3 syntheses
    (10 ns is met with two stages, so three are not tried there), then nothing to do."""
    table, out_json, png = tmp_path / "t.json", tmp_path / "s.json", tmp_path / "p.png"
    argv = ["sweep", "isofreq", "--unit", "nvfp4", "--lanes", "16", "--stages", "2,3",
            "--clocks", "5ns,100MHz", "--scripts", "delay", "--table", str(table),
            "--json", str(out_json), "--plot", str(png), "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    doc = json.loads(out_json.read_text())
    runs = doc["runs"]
    assert {(r["stages"], r["target_ps"]) for r in runs} <= {(2, 5000), (2, 10000),
                                                            (3, 5000), (3, 10000)}
    assert all(r["script"] == "delay" and r["lanes"] == 16 for r in runs)
    met10 = [r for r in runs if r["stages"] == 2 and r["target_ps"] == 10000][0]
    if met10["critical_ps"] <= 10000:
        assert not any(r["stages"] == 3 and r["target_ps"] == 10000 for r in runs)
    rows = {r["clock_ps"]: r for r in doc["rows"]}
    assert set(rows) == {5000, 10000}
    for t, r in rows.items():
        ok = [x for x in runs if x["critical_ps"] <= t]
        assert r["meets"] == bool(ok)
        if ok:
            assert r["area_um2"] == min(x["area_um2"] for x in ok)
    fastest = min(r["critical_ps"] for r in runs)
    assert doc["common"]["clock_ps"] == fastest
    assert doc["fastest"][0]["critical_ps"] == fastest
    assert "fastest common clock" in out and png.read_bytes()[:4] == b"\x89PNG"
    # resumed: every run is in the table; --energy adds pJ per MAC at the common clock
    assert main(argv + ["--energy", "--vectors", "48"]) == 0
    out = capsys.readouterr().out
    assert "0 syntheses done" in out and "pJ/MAC" in out
    (row,) = json.loads(out_json.read_text())["common"]["rows"]
    assert 0 < row["pj_per_mac"] < 10


def test_interleave_is_an_axis_beside_the_stages():
    """Runs of interleaved units (issue 45) compete with the others at each clock, the plan
    prunes a target met with no more stages and no more accumulators, and the tables say
    the interleave of a row where it is not 1."""
    ring = {**_run("hif4", "none", 3, "delay", 2000, 1500, 1900), "interleave": 4}
    runs = [_run("hif4", "none", 3, "delay", 2000, 1200, 4600), ring]
    configs = [("hif4", "none")]
    at = isofreq.best_at(runs, 2000)
    assert at[("hif4", "none")]["interleave"] == 4
    assert isofreq.best_at(runs, 5000)[("hif4", "none")]["area_um2"] == 1200
    summ = isofreq.summary(runs, [2000, 5000], configs)
    assert [r["interleave"] for r in summ["rows"]] == [4, 1]
    assert "3 i4" in isofreq.format_targets(summ, 20.0)

    def targets(config):
        return [2000, 5000]

    # 2000 is met with L = 4 at 3 stages, 5000 with L = 1: neither again with L = 8 or 4
    # stages, but L = 2 tries what L = 1 did not meet
    assert isofreq.plan(runs, configs, 3, "delay", targets, interleave=8) == []
    assert isofreq.plan(runs, configs, 3, "delay", targets, interleave=2) == [
        (("hif4", "none"), 2000)]
    assert isofreq.plan([ring], configs, 4, "delay", targets, interleave=4) == []
    assert isofreq.plan([ring], configs, 3, "delay", targets, interleave=2) == [
        (("hif4", "none"), 2000), (("hif4", "none"), 5000)]


def test_sweep_isofreq_takes_a_multi_format_unit(tmp_path, capsys):
    """A multi-format unit is swept by name (beside the standard set), labelled by its
    formats; with an empty table nothing meets the clock."""
    argv = ["sweep", "isofreq", "--unit", "tc4_mxfp4_nvfp4", "--residual", "none",
            "--stages", "3", "--clocks", "3800ps", "--from-table", "--quiet",
            "--table", str(tmp_path / "t.json")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MXFP4/NVFP4" in out and "not met" in out
