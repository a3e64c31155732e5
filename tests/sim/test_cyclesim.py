"""Cycle-level simulator: the step recurrence against a plain cycle-by-cycle model of the
stream stages (hwgen/stream.py, hwgen/accum.py semantics), and the GEMM array report."""

import math
import random

import numpy as np
import pytest

from sim.cyclesim import (Stimulus, UnitTiming, simulate_gemm, step_bytes)


def reference_run(pipeline, last, gaps, ready, start=0, horizon=100000):
    """Cycle-by-cycle simulation of a stage chain, written from the stage docstrings."""
    n = len(last)
    state = []
    for st in pipeline:
        if st["kind"] in ("register", "accumulator"):
            state.append({"valid": False, "item": None})
        elif st["kind"] == "sequencer":
            state.append({"count": 0})
        else:
            state.append({})
    nxt = 0                 # next item the driver presents
    prev_in = -1
    ins, outs = [], []
    for t in range(horizon):
        if len(outs) == sum(1 for x in last if x) and nxt == n:
            break
        present = nxt < n and t >= max(start, prev_in + 1) + gaps[nxt]
        # forward valids (valid at the input of each stage, and at the output)
        valid_in, item_in = [], []
        v, item = present, (nxt if present else None)
        for st, s in zip(pipeline, state):
            valid_in.append(v)
            item_in.append(item)
            kind = st["kind"]
            if kind == "sequencer":
                v = v and s["count"] == st["slices"] - 1
            elif kind in ("register", "accumulator"):
                v, item = s["valid"], s["item"]
        out_valid = v
        port_ready = ready[t] if t < len(ready) else True
        # backward readies
        readies = [None] * len(pipeline)
        r = port_ready
        for idx in range(len(pipeline) - 1, -1, -1):
            st, s = pipeline[idx], state[idx]
            kind = st["kind"]
            if kind == "sequencer":
                r = r and s["count"] == st["slices"] - 1
            elif kind in ("register", "accumulator"):
                r = (not s["valid"]) or r
            readies[idx] = r
        if out_valid and port_ready:
            outs.append(t)
        if present and readies[0]:
            ins.append(t)
            prev_in = t
            nxt += 1
        # rising edge: update (use the next stage's readiness as o.ready)
        for idx, (st, s) in enumerate(zip(pipeline, state)):
            kind = st["kind"]
            o_ready = readies[idx + 1] if idx + 1 < len(pipeline) else port_ready
            fire = valid_in[idx] and readies[idx]
            if kind in ("register", "accumulator"):
                if fire:
                    s["item"] = item_in[idx]
                    s["valid"] = True if kind == "register" else bool(last[item_in[idx]])
                elif o_ready:
                    s["valid"] = False
            elif kind == "sequencer":
                if valid_in[idx] and s["count"] < st["slices"] - 1:
                    s["count"] += 1
                if fire:
                    s["count"] = 0
    return ins, outs


def random_pipeline(rnd):
    stages = []
    for _ in range(rnd.randint(0, 4)):
        kind = rnd.choice(["comb", "register", "sequencer", "register"])
        st = {"kind": kind}
        if kind == "sequencer":
            st["slices"] = rnd.choice([1, 2, 4])
        stages.append(st)
    stages.append({"kind": "accumulator"})
    for _ in range(rnd.randint(0, 1)):
        stages.append({"kind": "comb"})
    return stages


@pytest.mark.parametrize("seed", range(40))
def test_recurrence_matches_cycle_by_cycle_model(seed):
    rnd = random.Random(seed)
    pipeline = random_pipeline(rnd)
    n = rnd.randint(1, 40)
    last = [rnd.random() < 0.4 for _ in range(n)]
    last[-1] = True
    p_gap, p_stall = rnd.choice([0, 0.3, 0.7]), rnd.choice([0, 0.3, 0.8])
    gaps = [rnd.randint(1, 4) if rnd.random() < p_gap else 0 for _ in range(n)]
    ready = [rnd.random() >= p_stall for _ in range(400)]
    ins, outs = reference_run(pipeline, last, gaps, ready)
    stim = Stimulus(gaps=gaps, ready=ready)
    run = UnitTiming(pipeline).run(last, stim, fast=False)
    assert run.in_cycles == ins
    assert run.out_cycles == outs
    fast = UnitTiming(pipeline).run(last, stim)      # compiled recurrence (if a C compiler)
    assert fast.same_cycles(ins, outs)
    assert list(fast.valid_cycles) == run.valid_cycles


def test_ii_and_latency():
    t = UnitTiming([{"kind": "sequencer", "slices": 4}, {"kind": "register"},
                    {"kind": "register"}, {"kind": "accumulator"}])
    assert t.ii == 4
    assert t.latency == 3
    run = t.run([True] * 5)
    assert np.diff(run.in_cycles).tolist() == [4] * 4
    run = UnitRun_lists(run)
    assert [o - i for i, o in zip(run.in_cycles, run.out_cycles)] == [3] * 5


def UnitRun_lists(run):
    run.in_cycles = [int(x) for x in run.in_cycles]
    run.out_cycles = [int(x) for x in run.out_cycles]
    return run


def test_bad_pipeline_rejected():
    with pytest.raises(ValueError, match="Stage kind must be one of"):
        UnitTiming([{"kind": "fifo"}])
    with pytest.raises(ValueError, match="at least one stage"):
        UnitTiming([])


def test_step_bytes():
    assert step_bytes("hif4", "2:4") == (36, 36, 28)
    assert step_bytes("mxfp4") == (34, 34, 0)
    assert step_bytes("mxfp4", "2:4") == (34, 34, 26)
    assert step_bytes("nvfp4") == (36, 36, 0)
    with pytest.raises(ValueError, match="Format must be one of"):
        step_bytes("fp8")


def test_gemm_traffic_and_cycles_unbounded_bandwidth():
    t = UnitTiming([{"kind": "register"}, {"kind": "accumulator"}])
    rep = simulate_gemm("hif4", 8, 128, 8, array=(4, 4), timing=t, compute=False,
                        residual="2:4")
    # 4 tiles x 2 steps, ii 1, latency 2, no stalls
    assert rep.array_steps == 8
    assert (rep.ii, rep.latency) == (1, 2)
    assert rep.cycles == 8 + 2
    assert rep.bytes_read == {"a": 4 * 4 * 2 * 36, "w": 4 * 4 * 2 * 36, "r": 4 * 4 * 2 * 28}
    assert rep.bytes_written == 4 * 64
    assert rep.stall_cycles == {"memory": 0, "backpressure": 0, "drain": 2}


def test_gemm_bandwidth_bound():
    t = UnitTiming([{"kind": "register"}, {"kind": "accumulator"}])
    rep = simulate_gemm("mxfp4", 4, 64 * 50, 4, array=(4, 4), bandwidth=34, timing=t,
                        compute=False)
    # 8 x 34 bytes per array step at 34 B/cycle: 8 cycles per step
    assert rep.cycles == 50 * 8 + 3     # last operand at cycle 400, latency 2
    assert rep.stall_cycles["memory"] >= 49 * 7
    assert rep.utilization == pytest.approx(1 / 8, rel=0.02)


def test_gemm_output_is_golden_gemm():
    from sim import dot
    from sim.formats import quantize

    rng = np.random.default_rng(5)
    a = quantize(rng.standard_normal((5, 130)).astype(np.float32), "nvfp4", axis=1)
    w = quantize(rng.standard_normal((3, 130)).astype(np.float32), "nvfp4", axis=1)
    rep = simulate_gemm("nvfp4", 5, 130, 3, array=(2, 2), a=a, w=w)
    assert rep.output.dtype == np.uint32
    assert np.array_equal(rep.output, dot.gemm(a, w))
    assert rep.array_steps == 3 * 2 * 3      # 3 x 2 tiles, 3 steps each
    assert rep.bytes_read["tensor_scale"] == 8


def test_gemm_bad_input():
    with pytest.raises(ValueError, match="no residual"):
        simulate_gemm("nvfp4", 4, 64, 4, residual="2:4", compute=False)
    with pytest.raises(ValueError, match="GEMM size M"):
        simulate_gemm("hif4", 0, 64, 4, compute=False)
    with pytest.raises(ValueError, match="Bandwidth"):
        simulate_gemm("hif4", 4, 64, 4, bandwidth=0, compute=False)
    assert math.isinf(simulate_gemm("hif4", 1, 64, 1, compute=False).bandwidth)


def test_ring_takes_steps_at_their_turn():
    """A ring of L accumulators (turn = moves since reset mod L): steps naming the
    accumulators in turn go one per cycle, steps of one accumulator one per L cycles, and
    an output waiting for o.ready holds the ring, and so the later steps' turns, still."""
    from sim.cyclesim import Stimulus, UnitTiming

    L = 4
    timing = UnitTiming([{"kind": "register"}, {"kind": "ring", "interleave": L}])
    assert timing.latency == 2 + L - 1
    # a step reaches the ring a cycle after the register takes it: turn (i + 1) mod L
    turns = timing.run([False] * 4 + [True] * 4, acc_id=[(i + 1) % L for i in range(8)])
    assert list(turns.in_cycles) == list(range(8))
    assert list(turns.out_cycles) == [i + timing.latency for i in range(4, 8)]
    one = timing.run([False, False, True], acc_id=[2, 2, 2])
    assert list(one.in_cycles) == [0, 2, 6] and list(one.out_cycles) == [10 + L]
    # o.ready low in cycles 5-7: the ring stands still, the third step's turn comes later
    held = timing.run([True, True, True], Stimulus(ready=[True] * 5 + [False] * 3),
                      acc_id=[1, 2, 1])
    assert list(held.in_cycles) == [0, 1, 2] and list(held.out_cycles) == [8, 9, 12]
    with pytest.raises(ValueError, match="need acc_id"):
        timing.run([True])
    with pytest.raises(ValueError, match="one accumulator of 0..3"):
        timing.run([True], acc_id=[4])


def test_array_of_rings_takes_tiles_in_turn():
    """An array of units with L accumulators computes L tiles at a time, their steps in
    turn: one array step per cycle as with one accumulator, the same outputs, L - 1 more
    cycles of latency at the end."""
    import math

    from sim.cyclesim import UnitTiming, simulate_gemm

    base = [{"kind": "register"}, {"kind": "register"}]
    one = simulate_gemm("hif4", 8, 256, 8, array=(2, 2),
                        timing=UnitTiming(base + [{"kind": "accumulator"}]), seed=1)
    four = simulate_gemm("hif4", 8, 256, 8, array=(2, 2),
                         timing=UnitTiming(base + [{"kind": "ring", "interleave": 4}]), seed=1)
    assert four.array_steps == one.array_steps == 16 * 4
    assert four.bytes_read == one.bytes_read
    # the first step waits for its turn (2 cycles), the last output comes L - 1 later
    assert four.cycles == one.cycles + 2 + 3
    assert four.stall_cycles["backpressure"] == 2
    assert (four.output == one.output).all()
    slow = simulate_gemm("hif4", 8, 256, 8, array=(2, 2), bandwidth=40.0,
                         timing=UnitTiming(base + [{"kind": "ring", "interleave": 4}]),
                         compute=False)
    assert slow.cycles > four.cycles and not math.isinf(slow.bandwidth)


def test_in_turn_interleaves_chains_l_at_a_time():
    import numpy as np

    from sim.stimulus import interleave

    first = np.array([1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0], dtype=bool)
    s = {"first": first, "last": np.roll(first, -1), "a": None, "w": None, "r": None}
    t = interleave.in_turn(s, 2)
    assert t["acc_id"].tolist() == [0, 1] * 3 + [0, 1, 0, 1, 0] + [0, 0]
    assert t["order"].tolist() == [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11, 12]
