"""The interleaved accumulator ring (:mod:`hwgen.ring`): its placement of the adder's
blocks, its registers, and what the registry and the manifest say of an interleaved unit.
The RTL against the golden model: ``tests/sim/bench/test_interleave.py``; the cut adders
against the one-cycle ones: ``tests/sim/formal/test_formal_ring.py``."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hif4spec import (ACC_FIELD, INTERLEAVES, check_params, module_name, parse_module_name,
                      payload_fields, resolve)
from hwgen.manifest import manifest
from hwgen.parts import probe
from hwgen.ring import CUT_REGISTER, LoopCuts, partition
from hwgen.units import build_unit


def test_partition_is_contiguous_and_balanced():
    blocks = [("a", 5), ("b", 1), ("c", 1), ("d", 5), ("e", 2)]
    assert partition(blocks, 1) == dict.fromkeys("abcde", 0)
    assert partition(blocks, 2) == {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1}
    three = partition(blocks, 3)
    assert three == {"a": 0, "b": 0, "c": 1, "d": 1, "e": 2}      # 6, 6, 2
    # more stages than blocks: one block per stage, the stages after them empty
    assert partition(blocks, 8) == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}
    for L in (2, 4, 8):
        stages = list(partition(blocks, L).values())
        assert stages == sorted(stages) and stages[0] == 0


def test_cuts_delay_by_the_stages_between_blocks():
    cuts = LoopCuts({"x": 0, "y": 2}, 4)
    m = Module()
    v = Signal(8)
    late = cuts.move(m, v, "x", "y", name="v")
    assert cuts.move(m, v, "x", "y") is late            # the same registers again
    out = cuts.move(m, v, "in", "out", name="v")         # two more beyond y
    assert [b for b, _ in cuts.registers] == [8, 8, 8]
    assert cuts.move(m, v, "y", "y") is v
    with pytest.raises(ValueError, match="cannot use a value"):
        cuts.move(m, v, "y", "x")
    m.d.comb += cuts.enable.eq(1)
    seen = []

    async def bench(ctx):
        for t in range(6):
            ctx.set(v, 10 + t)
            seen.append((ctx.get(late), ctx.get(out)))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert [s for s, _ in seen[2:]] == [10, 11, 12, 13]
    assert [s for _, s in seen[3:]] == [10, 11, 12]


def test_registry_names_and_refusals():
    assert INTERLEAVES == (1, 2, 4, 8)
    assert module_name("hif4", "2:4", 3, 64, "bounded", 4) == "hif4_dot_r24_s3_l64_bnd_i4"
    assert module_name("hif4", "2:4", 3, 64, "bounded", 1) == "hif4_dot_r24_s3_l64_bnd"
    assert parse_module_name("mxfp4_dot_rnone_s2_l32_i8") == ("mxfp4", "none", 2, 32,
                                                              "window", 8)
    assert parse_module_name("hif4_dot_rnone_s3_l64_bnd_i3") is None
    assert parse_module_name("hif4_quant_rnone_s3_l64_i2") is None
    assert resolve("hif4") == {"residual": "none", "stages": 3, "lanes": 64,
                               "accum": "bounded"}
    assert resolve("hif4", interleave=4)["interleave"] == 4
    assert resolve("hif4", interleave=1) == resolve("hif4")
    fields = dict(payload_fields("nvfp4", "none", interleave=8))
    assert fields[ACC_FIELD] == 3 and list(fields)[-3:] == [ACC_FIELD, "first", "last"]
    for bad, message in [(dict(interleave=3), "Interleave must be one of 1, 2, 4, 8"),
                         (dict(interleave=True), "Interleave must be"),
                         (dict(accum="trunc", interleave=2), "needs an exact accumulator")]:
        with pytest.raises(ValueError, match=message):
            check_params("hif4", "none", 3, 64, **{"accum": "window", **bad})
    with pytest.raises(ValueError, match="encoder and has no accumulator to interleave"):
        check_params("hif4_quant", "none", 3, 64, interleave=2)


@pytest.mark.parametrize("unit,residual,accum", [("hif4", "2:4", "window"),
                                                 ("mxfp4", "2:4", "bounded"),
                                                 ("tc4_hif4_mxfp4_nvfp4", "none", "bounded")])
def test_manifest_of_an_interleaved_unit(unit, residual, accum):
    one = probe(build_unit(unit, residual=residual, accum=accum))
    four = probe(build_unit(unit, residual=residual, accum=accum, interleave=4))
    man = manifest(four)
    assert four.module_name.endswith("_i4")
    assert man["parameters"]["interleave"] == 4
    assert "interleave" not in manifest(one)["parameters"]
    assert man["payload"][ACC_FIELD]["width"] == 2
    assert man["payload"]["first"]["offset"] == man["payload"][ACC_FIELD]["offset"] + 2
    ring = man["timing"]["pipeline"][-1]
    assert man["latency"] == one.latency + 3 + ring["prep"]
    assert ring["kind"] == "ring" and ring["interleave"] == 4
    assert len(ring["loop_stages"]) == 4 and all(ring["loop_stages"])
    assert len(ring["prep_stages"]) == ring["prep"] and all(ring["prep_stages"])
    # the cut registers' names, as the liberty flow's per-stage timing reads them
    from sim.cost.libsynth import _STAGE_REG
    assert ring["cut_registers"] == "<name>_s<k>"
    assert _STAGE_REG.search(CUT_REGISTER.format(name="split_q", k=12)).group(1) == "12"
    # the step-only work (MXFP4 2:4's split) goes ahead of the join, not into the loop;
    # the full window has none
    assert ring["prep"] == 0 if accum == "window" else ring["prep"] > 0
    assert "ring(L, P = prep)" in man["timing"]["rules"]
    # the cut registers and the ring's own are in the structure, beside the adder's parts
    cut_bits = sum(e["params"][0] * e["count"] for e in man["structure"]
                   if e["block"] == "accum.cuts")
    assert cut_bits > 3 * 32
    ring_reg = [e for e in man["structure"] if e["block"] == "accum.reg"]
    assert {"family": "reg", "params": [35], "count": 1}.items() <= ring_reg[0].items()


@pytest.mark.parametrize("unit,residual,accum", [("hif4", "none", "window"),
                                                 ("hif4", "none", "bounded"),
                                                 ("hif4", "2:4", "bounded"),
                                                 ("mxfp4", "none", "bounded")])
def test_ring_stages_match_the_adders_blocks(unit, residual, accum):
    """The loop's blocks fill the L stages (one each at L = 8, where the adder has eight),
    the step-only blocks the P stages ahead, all in datapath order."""
    built = probe(build_unit(unit, residual=residual, accum=accum, interleave=8))
    ring = probe(built._accumulator())
    add = probe(ring._make_add(None))
    d = ring.describe()
    assert [b for s in d["loop_stages"] for b in s] == [b for b, _ in add.loop_blocks()]
    term = [b for b, _ in getattr(add, "term_blocks", lambda: [])()]
    assert [b for s in d["prep_stages"] for b in s] == term
    assert sum(1 for s in d["loop_stages"] if s) == min(8, len(add.loop_blocks()))
