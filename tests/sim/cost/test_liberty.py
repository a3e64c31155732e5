"""The liberty flow's library reader, static timing and synthesis (sim.cost.liberty, .sta,
.libsynth), on the default library and on a small library the tests write."""

import json
import shutil
from pathlib import Path

import pytest

from sim.cost import libsynth, sta
from sim.cost.liberty import LibertyError, default_liberty, load_library, lookup, truth_table
from sim.cost.libsynth import synthesize_liberty

from small_liberty import write_small_liberty

ROOT = Path(__file__).resolve().parents[3]

ACC8 = """module acc8(input clk, input [7:0] x, output reg [7:0] s);
  always @(posedge clk) s <= s + x;
endmodule
"""

ADD16 = """module add16(input [15:0] a, input [15:0] b, output [16:0] s);
  assign s = a + b;
endmodule
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = write_small_liberty(tmp_path_factory.mktemp("lib") / "tiny.lib")
    return load_library(path, cache=None)


@pytest.fixture(scope="module")
def nangate():
    return load_library()


def _bilinear(xs, ys, v, x, y):
    """Independent bilinear inter/extrapolation on a 2 x 2 table."""
    tx = (x - xs[0]) / (xs[1] - xs[0])
    ty = (y - ys[0]) / (ys[1] - ys[0])
    top = v[0][0] + (v[0][1] - v[0][0]) * ty
    bot = v[1][0] + (v[1][1] - v[1][0]) * ty
    return top + (bot - top) * tx


def test_default_library_is_found_in_the_installed_package(nangate):
    path = default_liberty()
    assert path.name == "stdcells.lib" and "site-packages" in str(path)
    assert not (ROOT / "stdcells.lib").exists()
    assert nangate.voltage == pytest.approx(1.1)
    # FO4 of a 45-nm library is about 20 ps; the flip-flop's overheads a few FO4
    assert 15 < nangate.fo4() < 35
    assert 2 < nangate.clk_to_q() / nangate.fo4() < 8
    assert 0 < nangate.setup() < nangate.clk_to_q()


def test_cells_are_found_by_function_not_name(small):
    assert small.inverters == ["iv"] and small.buffers == ["bf"]
    assert small.flip_flops == ["fl"]
    assert small.cells["fl"].ff["outputs"] == {"Q": False, "QB": True}
    assert truth_table("(A ^ B)", ["A", "B"]) == [0, 1, 1, 0]
    assert truth_table("!(A & B)", ["A", "B"]) == [1, 1, 1, 0]


def test_fo4_by_hand(small):
    """The FO4 of the small library from its tables, computed here without the module."""
    slews, loads = (5, 50), (1, 20)
    rise, fall = [[10, 40], [20, 50]], [[8, 36], [18, 46]]
    rise_tr, fall_tr = [[8, 60], [12, 64]], [[7, 50], [11, 54]]
    load = 4 * 1.0                      # four inputs of iv (1.0 fF each)
    slew = small.default_slew           # the fixed point of the chain's slew
    after = 0.5 * (_bilinear(slews, loads, rise_tr, slew, load)
                   + _bilinear(slews, loads, fall_tr, slew, load))
    assert after == pytest.approx(slew, rel=1e-6)
    fo4 = 0.5 * (_bilinear(slews, loads, rise, slew, load)
                 + _bilinear(slews, loads, fall, slew, load))
    assert small.fo4() == pytest.approx(fo4, rel=1e-9)
    assert lookup(small.cells["iv"].outputs["Y"]["arcs"][0]["rise"], 5, 1) == 10


@pytest.mark.parametrize("options, words", [
    (dict(timing=False), "no timing tables"),
    (dict(flop=False), "no usable flip-flop"),
    (dict(inverter=False), "no usable inverter"),
])
def test_unusable_libraries_get_one_line(tmp_path, options, words):
    path = write_small_liberty(tmp_path / "bad.lib", **options)
    with pytest.raises(LibertyError) as err:
        load_library(path, cache=None)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_missing_and_malformed_files_get_one_line(tmp_path):
    (tmp_path / "junk.lib").write_text("this is { not liberty")
    (tmp_path / "cell.lib").write_text("cell (x) { area : 1; }\n")
    for path in (tmp_path / "none.lib", tmp_path, tmp_path / "junk.lib",
                 tmp_path / "cell.lib"):
        with pytest.raises(LibertyError) as err:
            load_library(path, cache=None)
        assert "\n" not in str(err.value)


def test_small_library_maps_and_times_an_accumulator(small):
    r = synthesize_liberty(ACC8, lib=small, cache_dir=None, backend="yowasp")
    assert set(r.cells) <= set(small.cells)
    assert r.flip_flops == 8 and r.cells["fl"] == 8
    # stat -liberty's area is the sum of the cells' areas
    assert r.area == pytest.approx(sum(small.cells[c].area * n for c, n in r.cells.items()))
    assert r.leakage_nw == pytest.approx(
        sum(small.cells[c].leakage * n for c, n in r.cells.items()))
    t = r.timing
    # every register is on its own feedback cycle: the carry chain is the loop
    assert t["loop_ps"] == pytest.approx(t["critical_ps"])
    assert t["path"][0] == "fl" and t["path_cells"] >= 4
    assert t["critical_ps"] > small.clk_to_q() + small.setup()


def test_timing_agrees_with_abc_stime(nangate, tmp_path):
    """Our static timing of a 16-bit adder against ABC's own (native Yosys shows ABC's
    output): the combinational delay, both without a wire-load model."""
    pytest.importorskip("pyosys")
    shutil.copyfile(nangate.path, tmp_path / "cells.lib")
    (tmp_path / "M.v").write_text(ADD16)
    (tmp_path / "abc.constr").write_text(libsynth._constr(nangate))
    script = libsynth.flow_script("add16", nangate, "delay").replace(
        "dnsize,{D}", "dnsize,{D};stime,-p")
    (tmp_path / "flow.ys").write_text(script)
    out = libsynth._run(str(tmp_path), 600, "native")
    abc = float(libsynth._STIME.findall(out)[-1])
    net = json.loads((tmp_path / "netlist.json").read_text())
    t = sta.analyze(net, nangate, "add16", wire_load=False)
    comb = t.critical - nangate.clk_to_q() - nangate.setup()
    assert comb == pytest.approx(abc, rel=0.03)


def test_standard_unit_splits_loop_from_feed_forward(nangate):
    name = "hif4_dot_rnone_s3_l64_bnd"
    text = (ROOT / "rtl_out" / f"{name}.v").read_text()
    manifest = json.loads((ROOT / "rtl_out" / f"{name}.json").read_text())
    assert libsynth.loop_modules(manifest) == (f"{name}.acc",)
    r = synthesize_liberty(text, manifest=manifest, lib=nangate, script="delay")
    t = r.timing
    assert r.library == "NangateOpenCellLibrary" and r.area > 1000
    assert 0 < t["loop_ps"] <= t["critical_ps"]
    assert t["critical_ps"] == pytest.approx(max(t["loop_ps"], t["feed_forward_ps"]))
    assert t["loop_fo4"] == pytest.approx(t["loop_ps"] / nangate.fo4())
    # the accumulator holds its 32-bit word: its flip-flops are the loop's
    net = libsynth.load_netlist(r)
    loop = libsynth._cells_of_modules(text, net, name, (f"{name}.acc",))
    assert 32 <= len(loop) < r.flip_flops
    # with a clock target the flow reports whether it is met
    slow = synthesize_liberty(text, manifest=manifest, lib=nangate, script="delay",
                              clock_ps=2 * t["critical_ps"])
    assert slow.meets is True


RING3 = """module ring3(input clk, input [7:0] x, output [15:0] y);
  reg [7:0] a_s1;
  reg [15:0] b_s2, word;
  always @(posedge clk) begin
    a_s1 <= x + 8'd3;
    b_s2 <= a_s1 * a_s1;
    word <= b_s2 + 16'd1;
  end
  assign y = word;
endmodule
"""


def test_endpoints_and_ring_stages(nangate, tmp_path):
    """Every flip-flop's latest arrival (the critical path is the latest of them), and a
    ring's stages told apart by their registers' names: ``<name>_s<k>`` is boundary k,
    ``word`` the exit; a stage's data come from those registers, not from the inputs."""
    r = synthesize_liberty(RING3, top="ring3", lib=nangate, script="delay",
                           cache_dir=tmp_path)
    net = libsynth.load_netlist(r, tmp_path)
    t = sta.analyze(net, nangate, "ring3", loop_ffs=set(), endpoints=True)
    # every flip-flop but those with a constant input (bit 1 of a square is 0)
    assert r.flip_flops == 40 and 36 <= len(t.endpoints) < 40
    assert max(max(a, b) for a, b, _, _ in t.endpoints.values()) == pytest.approx(t.critical)
    assert all(launch is None for a, b, launch, _ in t.endpoints.values() if a == b == 0)
    stages = libsynth.ring_stages(r, nangate, tmp_path)
    assert set(stages) == {1, 2, "exit"}
    assert stages[1][0] == 0 and stages[1][1] > 0          # x + 3: from the input
    assert stages[2][0] > stages["exit"][0] > 0            # the product, then the increment
    assert stages[2][0] == pytest.approx(t.critical)
    assert stages[2][2][0].startswith("DFF")
