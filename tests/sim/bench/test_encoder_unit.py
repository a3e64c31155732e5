"""The encoder units (``hwgen.encoder``): registry, manifest, timing, verification.

- the registry's encoder entries (kinds, module names, payload and output fields, bad
  parameters);
- manifests: ports, payload, output, the timing chain, ``latency = stages - 1`` and
  ``ii = 64 / lanes``;
- the deserializer's cycle behaviour in :mod:`sim.cyclesim` against the Amaranth simulator
  of whole encoders with random stalls on both sides (every stage count, 16 and 64 lanes),
  output bits against the golden model;
- Verilator: ``hif4 verify`` of a HiF4 2:4 and an NVFP4 encoder on short runs, and the cycle
  model against the Verilated MXFP4 2:4 encoder (``sim.bench.rtlcheck.check_unit``); longer
  runs are ``slow``.
"""

import numpy as np
import pytest

from hif4spec import (DEFAULTS, LANES, REFERENCE_ACCUM, STAGES, UNITS, accums_of,
                      all_configs, default_accum, module_name, output_fields,
                      parse_module_name, payload_fields, resolve, standard_set, unit_spec,
                      units_of_kind)

#: The registered encoders (the built-in ones and any unit registered before collection).
ENCODERS = tuple(u.name for u in units_of_kind("encoder"))
BUILT_IN = {"hif4": "hif4_quant", "mxfp4": "mxfp4_quant", "nvfp4": "nvfp4_quant"}


def _dot_of(fmt):
    """The first registered dot unit of format ``fmt``."""
    return next(u.name for u in units_of_kind("dot") if u.fmt == fmt)


def test_registry_kinds_and_names():
    dots = [u.name for u in units_of_kind("dot")]
    assert set(BUILT_IN) <= set(dots) and set(BUILT_IN.values()) <= set(ENCODERS)
    assert all(unit_spec(e).fmt == fmt for fmt, e in BUILT_IN.items())
    assert sorted([u.name for u in units_of_kind("dot", grid=False)] + list(ENCODERS)) \
        == sorted(UNITS)
    for e in ENCODERS:          # an encoder feeds a dot unit of its format, in its modes
        spec = unit_spec(e)
        assert set(spec.residuals) <= set(unit_spec(_dot_of(spec.fmt)).residuals)
    assert module_name("hif4_quant", "2:4", 3, 64) == "hif4_quant_r24_s3_l64"
    assert module_name("hif4", "2:4", 3, 64, "window") == "hif4_dot_r24_s3_l64"
    assert module_name("hif4", "2:4", 3, 64, "bounded") == "hif4_dot_r24_s3_l64_bnd"
    assert module_name("mxfp4", "dense", 3, 64, "trunc") == "mxfp4_dot_rdense_s3_l64_trc"
    # a dot unit's default back end: bounded (every unit and residual mode has it)
    assert module_name("hif4", "2:4", 3, 64) == "hif4_dot_r24_s3_l64_bnd"
    assert module_name("mxfp4", "2:4", 3, 64) == "mxfp4_dot_r24_s3_l64_bnd"
    for cfg in all_configs():
        for accum in accums_of(cfg[0], cfg[1]) or (None,):
            assert parse_module_name(module_name(*cfg, accum)) == (*cfg, accum, 1)
    assert parse_module_name("hif4_dot_r24_s3_l64_window") is None
    encoders = units_of_kind("encoder")
    assert len(all_configs("encoder")) == (sum(len(u.residuals) for u in encoders)
                                           * len(STAGES) * len(LANES))
    std = [(u, p["residual"]) for u, p in standard_set()]
    assert [x for x in std if x[0] in ENCODERS] == [(u.name, r) for u in encoders
                                                    for r in u.standard]
    assert [x for x in std if x[0] in BUILT_IN.values()] == [
        ("hif4_quant", "none"), ("hif4_quant", "2:4"), ("mxfp4_quant", "none"),
        ("mxfp4_quant", "2:4"), ("nvfp4_quant", "none")]
    names = [module_name(u, **p) for u, p in standard_set()]
    assert len(names) == len(set(names))
    with pytest.raises(ValueError, match="kind"):
        units_of_kind("decoder")


def test_default_accumulator_back_end():
    """Not asked for, a dot unit gets the bounded back end (every unit and residual mode has
    it; a pair without it would get the reference full window); an encoder none. The
    registry, the names, the generators and the CLI's parameters all take that one."""
    from hwgen.units import build_unit

    assert DEFAULTS["accum"] == "bounded" and REFERENCE_ACCUM == "window"
    for unit, residual, *_ in all_configs():
        have = accums_of(unit, residual)
        want = None if not have else "bounded" if "bounded" in have else "window"
        assert default_accum(unit, residual) == want
        assert resolve(unit, residual).get("accum") == want
    assert default_accum("mxfp4", "2:4") == default_accum("mxfp4", "dense") == "bounded"
    assert default_accum("hif4") == default_accum("nvfp4") == default_accum("mxfp4") == "bounded"
    assert all(default_accum(u, r) == "bounded" for u, r, *_ in all_configs("dot"))
    assert build_unit("hif4", residual="dense").accum == "bounded"
    assert build_unit("mxfp4", residual="dense").accum == "bounded"
    assert build_unit("mxfp4", residual="dense").module_name == "mxfp4_dot_rdense_s3_l64_bnd"
    assert build_unit("nvfp4").module_name == "nvfp4_dot_rnone_s3_l64_bnd"


def test_payload_and_output_fields():
    assert payload_fields("hif4_quant", "2:4", 16) == [("x", 256)]
    assert payload_fields("nvfp4_quant", "none", 32) == [("x", 512), ("t", 32)]
    assert output_fields("hif4_quant", "2:4") == [("q", 288), ("r", 224)]
    assert output_fields("hif4_quant", "dense") == [("q", 288), ("r", 288)]
    assert output_fields("mxfp4_quant", "2:4") == [("q", 272), ("r", 208)]
    assert output_fields("nvfp4_quant", "none") == [("q", 288)]
    assert output_fields("hif4", "none") == [("acc", 32)]
    # the encoder's output is the a (and r) fields of its dot unit's step
    for u in ENCODERS:
        fmt = unit_spec(u).fmt
        for r in unit_spec(u).residuals:
            dot = dict(payload_fields(_dot_of(fmt), r))
            assert dict(output_fields(u, r)) == {"q": dot["a"], **({"r": dot["r"]}
                                                                   if "r" in dot else {})}
    with pytest.raises(ValueError, match="Lane count"):
        payload_fields("hif4_quant", "none")


@pytest.mark.parametrize("params, message", [
    ({"unit": "nvfp4_quant", "residual": "2:4"},
     r"^Residual mode of nvfp4_quant must be one of none, not '2:4'$"),
    ({"unit": "hif4_quant", "residual": "3:4"},
     r"^Residual mode of hif4_quant must be one of none, 2:4, dense, not '3:4'$"),
    ({"unit": "hif4_quant", "accum": "window"}, "has no accumulator"),
    ({"unit": "hif4_quant", "stages": 5}, "Stage count"),
    ({"unit": "mxfp4_quant", "lanes": 8}, "Lane count"),
    ({"unit": "hif4_quant", "stages": True}, "Stage count"),
])
def test_bad_parameters(params, message):
    from hwgen.encoder import HiF4QuantUnit, MXFP4QuantUnit, NVFP4QuantUnit

    cls = {"hif4_quant": HiF4QuantUnit, "mxfp4_quant": MXFP4QuantUnit,
           "nvfp4_quant": NVFP4QuantUnit}[params.pop("unit")]
    with pytest.raises(ValueError, match=message):
        cls(**params)


@pytest.mark.parametrize("unit", ENCODERS)
@pytest.mark.parametrize("stages", STAGES)
def test_manifest(unit, stages):
    from hwgen.manifest import manifest
    from hwgen.parts import probe
    from hwgen.units import build_unit
    from sim.cyclesim import UnitTiming

    for lanes in LANES:
        residual = unit_spec(unit).standard[-1]
        m = manifest(probe(build_unit(unit, residual=residual, stages=stages, lanes=lanes)))
        assert m["kind"] == "encoder"
        assert m["module"] == module_name(unit, residual, stages, lanes)
        ports = {p["name"]: p["width"] for p in m["ports"]}
        assert ports["i__payload"] == sum(b for _, b in payload_fields(unit, residual, lanes))
        assert ports["o__payload"] == sum(b for _, b in output_fields(unit, residual))
        assert list(m["output"]) == [f for f, _ in output_fields(unit, residual)]
        assert m["latency"] == stages - 1 and m["ii"] == 64 // lanes
        kinds = [s["kind"] for s in m["timing"]["pipeline"]]
        assert kinds.count("register") == stages - 1
        assert kinds.count("deserializer") == 1 and "accumulator" not in kinds
        assert "deserializer(n)" in m["timing"]["rules"]
        timing = UnitTiming.from_manifest(m)
        assert (timing.ii, timing.latency) == (m["ii"], m["latency"])
        assert any(e["block"] == "deserializer" for e in m["structure"]) == (lanes < 64)


def test_cyclesim_deserializer_rules():
    from sim.cyclesim import Stimulus, UnitTiming

    t = UnitTiming([{"kind": "deserializer", "beats": 4}, {"kind": "comb"},
                    {"kind": "register"}])
    assert (t.ii, t.latency) == (4, 1)
    run = t.run([i % 4 == 3 for i in range(8)], Stimulus(), fast=False)
    assert list(run.in_cycles) == list(range(8)) and list(run.out_cycles) == [4, 8]
    # the group's last beat waits for the register; the others never wait
    run = t.run([i % 4 == 3 for i in range(8)], Stimulus(ready=[0] * 6))
    assert list(run.in_cycles) == [0, 1, 2, 3, 4, 5, 6, 7] and list(run.out_cycles) == [6, 8]
    with pytest.raises(ValueError, match="every beat that ends a group"):
        t.run([True] * 4)
    with pytest.raises(ValueError, match="at most one deserializer"):
        UnitTiming([{"kind": "deserializer", "beats": 2}, {"kind": "accumulator"}])
    assert UnitTiming([{"kind": "deserializer", "beats": 1}, {"kind": "register"}]).ii == 1


def _simulate(u, beats, gaps, ready, groups):
    """Drive beats with the pattern's valid gaps and o.ready; returns (in, out, words)."""
    from amaranth.sim import Simulator

    res = {"in": [], "out": [], "words": []}
    sim = Simulator(u)
    sim.add_clock(1e-6)

    async def bench(ctx):
        idx, cycle, ready_at = 0, 0, gaps[0]
        while len(res["out"]) < groups and cycle < 20 * len(beats) + 100:
            rdy = ready[cycle] if cycle < len(ready) else True
            ctx.set(u.o.ready, rdy)
            valid = idx < len(beats) and cycle >= ready_at
            ctx.set(u.i.valid, valid)
            if valid:
                ctx.set(u.i.payload.as_value(), beats[idx])
            if valid and ctx.get(u.i.ready):
                res["in"].append(cycle)
                idx += 1
                if idx < len(beats):
                    ready_at = cycle + 1 + gaps[idx]
            if rdy and ctx.get(u.o.valid):
                res["out"].append(cycle)
                res["words"].append(ctx.get(u.o.payload.as_value()))
            await ctx.tick()
            cycle += 1

    sim.add_testbench(bench)
    sim.run()
    return res


@pytest.mark.parametrize("stages", STAGES)
@pytest.mark.parametrize("lanes", [16, 64])
def test_timing_and_bits_in_amaranth(stages, lanes):
    """Handshake cycles equal the cycle model's, output bits the golden model's."""
    from hwgen.manifest import manifest
    from hwgen.units import build_unit
    from sim.bench.rtlcheck import random_pattern
    from sim.cyclesim import Stimulus, UnitTiming
    from sim.stimulus.encoder import expected_outputs, pack_beats, random_groups

    unit, residual = "mxfp4_quant", "2:4"
    u = build_unit(unit, residual=residual, stages=stages, lanes=lanes)
    man = manifest(u)
    rng = np.random.default_rng(10 * stages + lanes)
    groups = random_groups(unit, 24, rng)
    beats = [int.from_bytes(b.tobytes(), "little") for b in pack_beats(man, unit, groups)]
    gaps, ready = random_pattern(len(beats), rng, p_gap=0.35, p_stall=0.45)
    res = _simulate(u, beats, gaps, ready, len(groups["x"]))
    n = man["ii"]
    model = UnitTiming.from_manifest(man).run([i % n == n - 1 for i in range(len(beats))],
                                              Stimulus(gaps=gaps, ready=ready))
    assert [int(x) for x in model.in_cycles] == res["in"]
    assert [int(x) for x in model.out_cycles] == res["out"]
    assert res["words"] == expected_outputs(unit, residual, groups)
    assert np.diff(res["in"]).max() > 1 and np.diff(res["out"]).max() > n


@pytest.mark.parametrize("unit, residual, stages, lanes, vectors, engine", [
    ("hif4_quant", "2:4", 3, 16, 400, "cocotb"),     # the cocotb bench's encoder run
    ("nvfp4_quant", "none", 2, 16, 300, "fast"),
])
def test_verify_in_verilator(unit, residual, stages, lanes, vectors, engine):
    """Named cases first, then random groups, random stalls: every output bit checked."""
    from sim.bench.runner import verify

    res = verify(unit, residual=residual, stages=stages, lanes=lanes, vectors=vectors,
                 seed=5, valid_prob=0.8, ready_prob=0.7, engine=engine)
    assert res["engine"] == engine
    assert not res["timeout"] and res["mismatches"] == 0, res["first_mismatch"]
    assert res["groups"] == res["checked"] == vectors
    assert res["beats"] == vectors * 64 // lanes
    assert res["latency_min"] >= res["manifest"]["latency"]


def test_cycle_model_against_verilated_encoder():
    """``sim.bench.rtlcheck.check_unit`` on an encoder: every transfer cycle of the RTL is the
    cycle model's, every output the golden model's."""
    from sim.bench.rtlcheck import check_unit

    res = check_unit("mxfp4_quant", residual="2:4", stages=3, lanes=32, steps=160, seed=3,
                     p_gap=0.35, p_stall=0.45)
    assert (res["ii"], res["latency"]) == (res["manifest_ii"], res["manifest_latency"]) == (2, 2)
    assert res["rtl_in"] == res["model_in"] and res["rtl_out"] == res["model_out"]
    assert res["words"] == res["expected"] and len(res["words"]) == 80
    assert np.diff(res["rtl_in"]).max() > 1


@pytest.mark.slow
@pytest.mark.parametrize("unit, residual", [(u.name, r) for u in units_of_kind("encoder")
                                            for r in u.residuals])
def test_verify_standard_long(unit, residual):
    from sim.bench.runner import verify

    res = verify(unit, residual=residual, stages=DEFAULTS["stages"], lanes=16,
                 vectors=20000, seed=2)
    assert res["mismatches"] == 0, res["first_mismatch"]
