"""``hif4 estimate`` and ``hif4 simulate``: output keys, figures consistent with the library,
plots, and one-line errors for bad input."""

import json
import math
import shutil

import pytest

from hif4spec import (UNITS, accums_of, default_accum, module_name, standard_set, unit_spec,
                      units_of_kind)
from sim.cli import main
from sim.cost.estimate import RTL_DIR, find_manifests, select_manifest

# The committed standard set (rtl_out/, `hif4 generate --all`): every registered unit in each
# of its standard residual modes, in registry order; DOT: those of the dot units.
STANDARD = [(u.name, r) for u in UNITS.values() for r in u.standard]
DOT = [(u, r) for u, r in STANDARD if unit_spec(u).kind == "dot"]
DOT_UNITS = ", ".join(u.name for u in units_of_kind("dot"))


def test_rtl_out_holds_the_standard_set():
    found = find_manifests()
    assert sorted(m["module"] for _, m in found) == sorted(
        module_name(u, **p) for u, p in standard_set())
    assert {"hif4_dot_rnone_s3_l64_bnd", "mxfp4_dot_r24_s3_l64", "nvfp4_quant_rnone_s3_l64"} \
        <= {m["module"] for _, m in found}
    for u, r in STANDARD:
        # not asked for, a dot unit's back end is its default one (bounded where it has it)
        picked = select_manifest(found, u, r)[1]
        assert picked["parameters"].get("accum") == default_accum(u, r)
        if unit_spec(u).kind != "dot":
            assert default_accum(u, r) is None
            continue
        assert default_accum(u, r) == ("bounded" if "bounded" in accums_of(u, r) else "window")
        window = select_manifest(found, u, r, accum="window")[1]
        assert window["module"] == module_name(u, r, 3, 64, "window")
        if "bounded" in accums_of(u, r):
            assert select_manifest(found, u, r, accum="bounded")[1]["module"].endswith("_bnd")


def test_estimate_json(capsys):
    rc = main(["estimate", "--json", "--gemm", "64x512x64", "--array", "2x2"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["unit"], r["residual"]) for r in rows] == STANDARD
    assert [r["kind"] for r in rows] == [unit_spec(r["unit"]).kind for r in rows]
    for r in rows:
        if r["kind"] != "encoder":
            continue
        for key in ("area_model_nand2", "area_synth_nand2", "elements_per_cycle",
                    "area_per_element_nand2", "area_per_element_vs_mxfp4", "latency"):
            assert key in r
        assert r["elements_per_cycle"] == 64 / r["ii"] and r["area_model_nand2"] > 0
    rows = [r for r in rows if r["kind"] == "dot"]
    assert [(r["unit"], r["residual"]) for r in rows] == DOT
    for r in rows:
        assert r["kind"] == "dot"
        for key in ("unit", "residual", "macs_per_cycle", "area_model_nand2",
                    "area_synth_nand2", "longest_path", "verilog", "gemm_cycles",
                    "effective_tops", "tops_per_mnand2", "bits_per_mac",
                    "area_per_mac_vs_mxfp4", "area_per_mac_vs_nvfp4"):
            assert key in r
        assert r["area_synth_nand2"] is None
        assert r["verilog"].endswith(".v")
        assert r["macs_per_cycle"] == 4 * 64 / r["ii"]
        assert r["area_model_nand2"] > 0
    by = {(r["unit"], r["residual"]): r for r in rows}
    assert by["mxfp4", "none"]["area_per_mac_vs_mxfp4"] == pytest.approx(1.0)
    assert by["nvfp4", "none"]["area_per_mac_vs_nvfp4"] == pytest.approx(1.0)
    # traffic: 36 + 36 bytes per 64 MACs per (row, column) pair, divided by reuse
    assert by["hif4", "2:4"]["bits_per_mac"] > by["hif4", "none"]["bits_per_mac"]


def test_estimate_table_and_plot(tmp_path, capsys):
    png = tmp_path / "cmp.png"
    rc = main(["estimate", "--unit", "hif4,nvfp4", "--residual", "none", "--gemm",
               "32x256x32", "--plot", str(png)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "hif4" in out and "nvfp4" in out and "TOPS" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_estimate_synth_uses_recorded_synthesis(capsys):
    from sim.cost import synth, table

    tab = table.load_table()
    found = find_manifests()
    verilog, _ = select_manifest(found, "hif4", "none")
    assert synth.verilog_sha256(verilog.read_text()) in tab, \
        "rtl_out/ changed since the synthesis table was recorded"
    rc = main(["estimate", "--unit", "hif4", "--residual", "none", "--synth", "--json",
               "--gemm", "16x128x16"])
    assert rc == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["area_synth_nand2"] == tab[synth.verilog_sha256(verilog.read_text())]["nand2"]
    assert abs(row["area_model_nand2"] - row["area_synth_nand2"]) <= 0.1 * \
        row["area_synth_nand2"]


def test_estimate_synth_failure_is_one_line(tmp_path, monkeypatch, capsys):
    """A module not in the synthesis table needs a Yosys run; when that fails (here: an
    unknown backend), the CLI says so in one line instead of a traceback."""
    import shutil

    verilog, _ = select_manifest(find_manifests(), "nvfp4", "none")
    shutil.copy(verilog.with_suffix(".json"), tmp_path)
    (tmp_path / verilog.name).write_text(verilog.read_text() + "// edited: not in the table\n")
    monkeypatch.setenv("HIF4_SYNTH_BACKEND", "vivado")
    rc = main(["estimate", "--unit", "nvfp4", "--residual", "none", "--synth",
               "--rtl-dir", str(tmp_path), "--gemm", "16x128x16"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "synthesis failed" in err[0] and "vivado" in err[0]


@pytest.mark.parametrize("argv,message", [
    (["estimate", "--unit", "fp8"], "unknown unit 'fp8'; choose from hif4, mxfp4, nvfp4"),
    (["estimate", "--gemm", "12x3"], "--gemm must be MxKxN"),
    (["estimate", "--array", "0x4"], "--array must be RxC"),
    (["estimate", "--freq-ghz", "-1"], "--freq-ghz must be"),
    (["estimate", "--plot", "out.jpg"], "ending in .png"),
    (["estimate", "--unit", "nvfp4", "--residual", "2:4"], "nvfp4 accepts none)"),
    (["estimate", "--lanes", "8"], "Lane count must be one of 16, 32, 64, not 8"),
    (["estimate", "--residual", "3:4"], "unknown residual mode '3:4'; choose from none, 2:4, "
                                        "dense"),
    (["estimate", "--stages", "2"], "no generated module for unit hif4, residual none, "
                                    "stages 2 in rtl_out"),
    (["simulate", "--unit", "nvfp4", "--residual", "2:4", "--gemm", "4x64x4"],
     "Residual mode of nvfp4 must be one of none, not '2:4'"),
    (["simulate", "--unit", "hif4", "--residual", "3:4", "--gemm", "4x64x4"],
     "Residual mode of hif4 must be one of none, 2:4, dense, not '3:4'"),
    (["simulate", "--unit", "fp8", "--gemm", "4x64x4"],
     f"Unit must be one of {DOT_UNITS}, not 'fp8'"),
    (["simulate", "--unit", "hif4_quant", "--gemm", "4x64x4"],
     f"Unit must be one of the dot-product units {DOT_UNITS}, not 'hif4_quant'"),
    (["simulate", "--manifest", "rtl_out/hif4_quant_rnone_s3_l64.json", "--gemm", "4x64x4"],
     "Unit must be one of the dot-product units"),
    (["simulate", "--unit", "hif4", "--lanes", "8", "--gemm", "4x64x4"],
     "Lane count must be one of 16, 32, 64, not 8"),
    (["simulate", "--unit", "hif4", "--residual", "dense", "--gemm", "4x64x4"],
     "no generated module for unit hif4, residual dense in rtl_out"),
    (["generate", "--unit", "nvfp4", "--residual", "dense"],
     "Residual mode of nvfp4 must be one of none, not 'dense'"),
    (["generate", "--unit", "hif4", "--stages", "5"],
     "Stage count must be an integer from 1 to 4, not 5"),
    (["verify", "--unit", "nvfp4", "--residual", "2:4"],
     "Residual mode of nvfp4 must be one of none, not '2:4'"),
    (["verify", "--unit", "mxfp4", "--lanes", "48"],
     "Lane count must be one of 16, 32, 64, not 48"),
    (["verify", "--unit", "hif4", "--rtl-dir", "rtl_out", "--stages", "1"],
     "no generated module for unit hif4, residual none, stages 1 in rtl_out"),
    (["simulate", "--unit", "hif4", "--gemm", "4x64x4", "--bandwidth", "-3"],
     "--bandwidth must be"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_simulate_json(capsys):
    from sim.cyclesim import UnitTiming, simulate_gemm

    rc = main(["simulate", "--unit", "mxfp4", "--residual", "2:4", "--gemm", "8x256x8",
               "--array", "2x4", "--bandwidth", "64", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "mxfp4" and out["residual"] == "2:4"
    assert out["bytes_read"]["r"] == 8 * 2 * 26 * 4     # rows x column tiles x 26 B x steps
    assert set(out["stall_cycles"]) == {"memory", "backpressure", "drain"}
    _, man = select_manifest(find_manifests(), "mxfp4", "2:4")
    rep = simulate_gemm("mxfp4", 8, 256, 8, residual="2:4", array=(2, 4), bandwidth=64,
                        timing=UnitTiming.from_manifest(man), compute=False)
    assert out["cycles"] == rep.cycles
    assert not math.isnan(out["utilization"])


def _fake_variant(folder, module, **changes):
    """Copy rtl_out's ``module`` into ``folder`` under the name of a variant with other
    parameters (a selection test: the files are not simulated)."""
    man = json.loads((RTL_DIR / f"{module}.json").read_text())
    man["parameters"].update(changes)
    par = man["parameters"]
    man["module"] = name = module_name(man["unit"], par["residual"], par["stages"], par["lanes"],
                                       par["accum"])
    (folder / f"{name}.json").write_text(json.dumps(man))
    shutil.copy(RTL_DIR / f"{module}.v", folder / f"{name}.v")
    return name


def test_a_folder_without_the_default_back_end_names_the_one_it_has(tmp_path, capsys):
    """A folder that holds only the full-window HiF4 unit (say, generated with --accum
    window): the default (bounded) module is missing, and the one-line error says both how
    to make it and which --accum uses what is there."""
    for suffix in ("v", "json"):
        shutil.copy(RTL_DIR / f"hif4_dot_rnone_s3_l64.{suffix}", tmp_path)
    assert main(["estimate", "--unit", "hif4", "--residual", "none", "--rtl-dir",
                 str(tmp_path)]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "no generated module for unit hif4, residual none in" in err
    assert "make it with `hif4 generate --unit hif4 --residual none --out " in err
    assert err.endswith("`, or give --accum window for what is there"), err
    assert main(["estimate", "--unit", "hif4", "--residual", "none", "--accum", "window",
                 "--rtl-dir", str(tmp_path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["module"] == "hif4_dot_rnone_s3_l64"


def test_selection_is_explicit(tmp_path, capsys):
    """Several modules of one unit and residual: no guess, a one-line error naming them and
    the option that tells them apart; that option then picks one, and the command says
    which."""
    for suffix in ("v", "json"):
        shutil.copy(RTL_DIR / f"hif4_dot_rnone_s3_l64_bnd.{suffix}", tmp_path)
    _fake_variant(tmp_path, "hif4_dot_rnone_s3_l64_bnd", lanes=16)
    common = ["--unit", "hif4", "--rtl-dir", str(tmp_path)]
    for argv in (["simulate", *common, "--gemm", "4x64x4"],
                 ["estimate", *common, "--residual", "none"],
                 ["verify", *common]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert "2 generated modules match unit hif4, residual none" in err[0]
        assert ("hif4_dot_rnone_s3_l16_bnd.v, hif4_dot_rnone_s3_l64_bnd.v; pick one with "
                "--lanes") in err[0]
    assert main(["simulate", *common, "--lanes", "16", "--gemm", "4x64x4", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["module"] == "hif4_dot_rnone_s3_l16_bnd"
    assert captured.err.strip().endswith("using " + str(tmp_path / "hif4_dot_rnone_s3_l16_bnd.v"))
    assert main(["estimate", *common, "--residual", "none", "--stages", "3", "--lanes", "64",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["module"] for r in json.loads(captured.out)] == ["hif4_dot_rnone_s3_l64_bnd"]
    assert "using " + str(tmp_path / "hif4_dot_rnone_s3_l64_bnd.v") in captured.err


def test_manifest_option(tmp_path, capsys):
    """``--manifest PATH`` uses that module; options that disagree with it are an error."""
    man = str(RTL_DIR / "mxfp4_dot_r24_s3_l64.json")
    assert main(["simulate", "--manifest", man, "--gemm", "8x256x8", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["module"] == "mxfp4_dot_r24_s3_l64"
    assert captured.err.strip().endswith("mxfp4_dot_r24_s3_l64.v")
    assert main(["estimate", "--manifest", man, "--json", "--gemm", "8x256x8"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["module"], r["area_per_mac_vs_mxfp4"] > 1) for r in rows] == \
        [("mxfp4_dot_r24_s3_l64", True)]
    assert main(["simulate", "--manifest", man, "--unit", "hif4", "--gemm", "8x256x8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"hif4 simulate: error: --unit hif4 disagrees with manifest {man!r} "
                   "(unit mxfp4); drop --unit or give another manifest"]
