"""``hif4 estimate`` and ``hif4 simulate``: output keys, figures consistent with the library,
plots, and one-line errors for bad input."""

import json
import math

import pytest

from sim.cli import main
from sim.cost.estimate import find_manifests, select_manifest

STANDARD = [("hif4", "none"), ("hif4", "2:4"), ("mxfp4", "none"), ("mxfp4", "2:4"),
            ("nvfp4", "none")]


def _have_standard_set():
    found = find_manifests()
    return all(select_manifest(found, u, r) for u, r in STANDARD)


needs_rtl = pytest.mark.skipif(not _have_standard_set(),
                               reason="rtl_out/ lacks the standard set (hif4 generate --all)")


@needs_rtl
def test_estimate_json(capsys):
    rc = main(["estimate", "--json", "--gemm", "64x512x64", "--array", "2x2"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["unit"], r["residual"]) for r in rows] == STANDARD
    for r in rows:
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


@needs_rtl
def test_estimate_table_and_plot(tmp_path, capsys):
    png = tmp_path / "cmp.png"
    rc = main(["estimate", "--units", "hif4,nvfp4", "--residual", "none", "--gemm",
               "32x256x32", "--plot", str(png)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "hif4" in out and "nvfp4" in out and "TOPS" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_rtl
def test_estimate_synth_uses_recorded_synthesis(capsys):
    from sim.cost import synth, table

    tab = table.load_table()
    found = find_manifests()
    verilog, _ = select_manifest(found, "hif4", "none")
    if synth.verilog_sha256(verilog.read_text()) not in tab:
        pytest.skip("rtl_out/ changed since the synthesis table was recorded")
    rc = main(["estimate", "--units", "hif4", "--residual", "none", "--synth", "--json",
               "--gemm", "16x128x16"])
    assert rc == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["area_synth_nand2"] == tab[synth.verilog_sha256(verilog.read_text())]["nand2"]
    assert abs(row["area_model_nand2"] - row["area_synth_nand2"]) <= 0.1 * \
        row["area_synth_nand2"]


@needs_rtl
def test_estimate_synth_failure_is_one_line(tmp_path, monkeypatch, capsys):
    """A module not in the synthesis table needs a Yosys run; when that fails (here: an
    unknown backend), the CLI says so in one line instead of a traceback."""
    import shutil

    verilog, _ = select_manifest(find_manifests(), "nvfp4", "none")
    shutil.copy(verilog.with_suffix(".json"), tmp_path)
    (tmp_path / verilog.name).write_text(verilog.read_text() + "// edited: not in the table\n")
    monkeypatch.setenv("HIF4_SYNTH_BACKEND", "vivado")
    rc = main(["estimate", "--units", "nvfp4", "--residual", "none", "--synth",
               "--rtl-dir", str(tmp_path), "--gemm", "16x128x16"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "synthesis failed" in err[0] and "vivado" in err[0]


@pytest.mark.parametrize("argv,message", [
    (["estimate", "--units", "fp8"], "unknown unit 'fp8'"),
    (["estimate", "--gemm", "12x3"], "--gemm must be MxKxN"),
    (["estimate", "--array", "0x4"], "--array must be RxC"),
    (["estimate", "--freq-ghz", "-1"], "--freq-ghz must be"),
    (["estimate", "--plot", "out.jpg"], "ending in .png"),
    (["estimate", "--units", "nvfp4", "--residual", "2:4"], "NVFP4 has no residual"),
    (["simulate", "--unit", "nvfp4", "--residual", "2:4", "--gemm", "4x64x4"],
     "no residual input"),
    (["simulate", "--unit", "hif4", "--gemm", "4x64x4", "--bandwidth", "-3"],
     "--bandwidth must be"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


@needs_rtl
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
