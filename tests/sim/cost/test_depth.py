"""Stage depths (:mod:`sim.cost.depth`): the accumulator loop measured apart from the path
into it, on a handwritten module whose two paths are known, and the recorded depths of the
standard set in ``hif4 estimate``."""

import json

import pytest

from sim.cli import main
from sim.cost import depth

# acc <= acc + x: the loop is one 8-bit adder; x = a * b in front of it is on the input path
# only, so the path into the register is longer than the loop.
MAC = """
module mac(input clk, input [7:0] a, input [7:0] b, output [7:0] q);
  reg [7:0] acc;
  wire [7:0] x = a * b;
  always @(posedge clk) acc <= acc + x;
  assign q = acc;
endmodule
"""
# The same register fed from its input only: no loop.
PIPE = """
module pipe(input clk, input [7:0] a, input [7:0] b, output [7:0] q);
  reg [7:0] r;
  always @(posedge clk) r <= a * b;
  assign q = r;
endmodule
"""


def test_loop_and_input_path_are_told_apart(tmp_path):
    mac = depth.stage_depths(MAC, "mac", ("loop", "in", "path"), cache_dir=tmp_path)
    pipe = depth.stage_depths(PIPE, "pipe", ("loop", "in", "path"), cache_dir=tmp_path)
    assert pipe["loop"] == 0 < pipe["in"]
    assert 0 < mac["loop"] < mac["in"]
    assert mac["path"] == max(mac["loop"], mac["in"])
    assert mac["nand2"] > pipe["nand2"] > 0
    # cached: the second call reads the file written by the first
    assert len(list(tmp_path.glob("*.depth.json"))) == 2
    assert depth.stage_depths(MAC, "mac", ("loop", "in", "path"), cache_dir=tmp_path) == mac


def test_only_dot_units_have_depths():
    with pytest.raises(ValueError, match="dot units only"):
        depth.unit_depths("", {"kind": "encoder", "module": "x"})


def test_estimate_shows_recorded_loop_and_feed_forward_depths(capsys):
    rc = main(["estimate", "--json", "--unit", "hif4,nvfp4", "--residual", "none",
               "--accum", "bounded"])
    assert rc == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == "dot"]
    assert [r["accum"] for r in rows] == ["bounded", "bounded"]
    # each stage synthesized alone (a flat unit's optimization crosses stages, so these
    # need not stay under its longest path)
    for r in rows:
        assert r["loop_depth"] > 0 and r["feed_forward_depth"] > 0
    rc = main(["estimate", "--unit", "hif4", "--residual", "none"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "loop" in out and "ff" in out
