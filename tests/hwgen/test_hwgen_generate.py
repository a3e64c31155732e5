"""Generation: rtl_out/ is fresh (byte-identical regeneration), manifest contents, and the
``hif4 generate`` command line (lint of every configuration: ``tests/hwgen/test_lint.py``)."""

import json
from pathlib import Path

import pytest

from hwgen.units import module_name, standard_set
from sim.cli import main

REPO = Path(__file__).resolve().parents[2]
RTL = REPO / "rtl_out"


@pytest.fixture(scope="module")
def regenerated():
    """``{file name: bytes}`` of the standard set as the generators write it now, through the
    bench's cache (``build/rtl/<module>/``, keyed by the generator sources and parameters;
    the lint and bench tests build from the same folders)."""
    from sim.bench.runner import generate_cached
    files = {}
    for unit, params in standard_set():
        module = module_name(unit, **params)
        verilog, _ = generate_cached(unit, params, REPO / "build" / "rtl" / module)
        for path in (verilog, verilog.with_suffix(".json")):
            files[path.name] = path.read_bytes()
    return files


def test_rtl_out_is_fresh(regenerated):
    """Fails when rtl_out/ is stale: regenerate with `hif4 generate --all`."""
    assert len(regenerated) == 2 * len(standard_set())
    have = {p.name for p in RTL.iterdir() if p.suffix in (".v", ".json")}
    stale = [n for n, text in sorted(regenerated.items())
             if n not in have or (RTL / n).read_bytes() != text]
    assert not stale, f"rtl_out/ is stale or incomplete: {stale}; run `hif4 generate --all`"
    extra = sorted(have - set(regenerated))
    assert not extra, f"rtl_out/ holds other files: {extra}"


def test_generated_text_is_portable(regenerated):
    for text in regenerated.values():
        text = text.decode()
        assert str(REPO) not in text and "/home/" not in text and "/tmp" not in text
        assert text.endswith("\n")


def test_manifest_of_the_2_4_unit():
    m = json.loads((RTL / "hif4_dot_r24_s3_l64.json").read_text())
    assert m["module"] == "hif4_dot_r24_s3_l64" and m["unit"] == "hif4"
    assert m["parameters"] == {"residual": "2:4", "stages": 3, "lanes": 64, "accum": "window"}
    assert m["payload"] == {"a": {"offset": 0, "width": 288}, "w": {"offset": 288, "width": 288},
                            "r": {"offset": 576, "width": 224},
                            "first": {"offset": 800, "width": 1},
                            "last": {"offset": 801, "width": 1}}
    ports = {p["name"]: (p["direction"], p["width"]) for p in m["ports"]}
    assert ports == {"clk": ("input", 1), "rst": ("input", 1), "i__valid": ("input", 1),
                     "i__ready": ("output", 1), "i__payload": ("input", 802),
                     "o__valid": ("output", 1), "o__ready": ("input", 1),
                     "o__payload": ("output", 32)}
    assert (m["latency"], m["ii"]) == (3, 1)
    kinds = [s["kind"] for s in m["timing"]["pipeline"]]
    assert kinds == ["sequencer", "register", "comb", "register", "accumulator"]
    text = (RTL / "hif4_dot_r24_s3_l64.v").read_text()
    for name, (direction, width) in ports.items():
        decl = f"{direction} {'[%d:0] ' % (width - 1) if width > 1 else ''}{name};"
        assert decl in text, decl


def test_generate_one_unit(tmp_path, capsys):
    assert main(["generate", "--unit", "hif4", "--residual", "none", "--stages", "1",
                 "--lanes", "16", "--out", str(tmp_path)]) == 0
    # the default back end, bounded: its module name ends in _bnd
    m = json.loads((tmp_path / "hif4_dot_rnone_s1_l16_bnd.json").read_text())
    assert (m["latency"], m["ii"], m["parameters"]["accum"]) == (1, 4, "bounded")
    assert (tmp_path / "hif4_dot_rnone_s1_l16_bnd.v").exists()
    assert "hif4_dot_rnone_s1_l16_bnd.v" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["generate"], "give --unit NAME"),
    (["generate", "--unit", "fp8"], "Unit must be one of hif4, mxfp4, nvfp4, hif4_quant, "
                                       "mxfp4_quant, nvfp4_quant, tc4_hif4_mxfp4_nvfp4, "
                                       "tc4_hif4_mxfp4, tc4_hif4_nvfp4, tc4_mxfp4_nvfp4, "
                                       "not 'fp8'"),
    (["generate", "--unit", "hif4", "--stages", "0"], "Stage count must be an integer from 1"),
    (["generate", "--all", "--unit", "hif4"], "--all writes the standard set"),
    (["generate", "--unit", "nvfp4", "--residual", "2:4"],
     "Residual mode of nvfp4 must be one of none, not '2:4'"),
])
def test_generate_bad_input(argv, message, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    line = err.split("\r")[-1].strip()        # after any progress line
    assert line.startswith("hif4 generate: error: ") and message in line
    assert not list(tmp_path.iterdir())
