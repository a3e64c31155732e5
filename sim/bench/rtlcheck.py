"""Cycle-exactness of the cycle-level model against the Verilated unit.

The same step stream and the same stall pattern (valid gaps on the input, ready gaps on the
output) go through the RTL, on the fast harness (:mod:`sim.bench.fast`, which records every
transfer cycle), and through
:class:`sim.cyclesim.UnitTiming` built from the unit's manifest; the cycle of every input and
output transfer must be the same, and the output words must equal the golden model's.
"""

from pathlib import Path

import numpy as np

from hif4spec import STEP_ELEMS, unit_spec

__all__ = ["BUILD_ROOT", "run_rtl_cycles", "random_pattern", "check_unit",
           "check_gemm_against_rtl"]

REPO = Path(__file__).resolve().parents[2]
#: Generated Verilog of this module's checks (``build/cycles/rtl``); the harness builds are
#: the fast engine's own (``build/fast/<module>``, under its lock, so an identical Verilog
#: text already built for verification is not built again).
BUILD_ROOT = REPO / "build" / "cycles"


def run_rtl_cycles(verilog, manifest, payloads, segments, outputs, gaps, ready, *,
                   sim="verilator", max_cycles=None, build_root=None):
    """Run packed payloads through the Verilated unit with an explicit stall pattern.

    Parameters
    ----------
    verilog : path
        The unit's Verilog (``manifest["module"]`` is the top).
    payloads : uint8 array (steps, bytes)
        Packed ``i__payload`` words (``sim.stimulus.pack_payloads``).
    segments, outputs : list of int
        Steps and expected output words of each segment (reset in between).
    gaps, ready : lists
        The stall pattern of :mod:`sim.bench.fast`, the same for every segment.

    Returns
    -------
    list of dict
        Per segment: ``in_cycles``, ``out_cycles``, ``words``, ``cycles``.
    """
    from .fast import build_harness, run_fast

    if sim != "verilator":
        raise ValueError(f"the cycle checks run on the Verilator harness, not {sim!r}")
    binary = build_harness(verilog, manifest, build_root=build_root or BUILD_ROOT.parent)
    payloads = np.asarray(payloads, dtype=np.uint8)
    gaps = np.minimum(np.asarray(gaps, dtype=np.int64), 0xFFFF).astype(np.uint16)
    ready = np.asarray(ready, dtype=bool)
    results, start = [], 0
    for steps, count in zip(segments, outputs):
        part = payloads[start:start + steps]
        start += steps
        if max_cycles is None:
            limit = 64 * steps + 4 * (len(ready) + int(gaps.sum())) + 1000
        else:
            limit = max_cycles
        # no words to compare: the model checks them; every output is recorded
        r = run_fast(binary, manifest, part, np.zeros(count, dtype=np.uint32),
                     np.zeros(count, dtype=np.int64), _fit(gaps, steps), ready,
                     stop_on_mismatch=False, max_cycles=limit, record=True)
        words = [int.from_bytes(w.tobytes(), "little") for w in r["words"]]
        results.append({"in_cycles": r["in_cycles"].tolist(),
                        "out_cycles": r["out_cycles"].tolist(), "words": words,
                        "cycles": r["cycles"]})
    return results


def _fit(gaps, steps):
    """The valid gaps of ``steps`` steps: the pattern's, zeros after it ends."""
    out = np.zeros(steps, dtype=np.uint16)
    out[:min(steps, len(gaps))] = gaps[:steps]
    return out


def random_pattern(n_steps, rng, *, p_gap=0.3, max_gap=4, p_stall=0.4, length=None):
    """Random valid gaps (one per step) and a random ``o.ready`` pattern."""
    gaps = [int(rng.integers(1, max_gap + 1)) if rng.random() < p_gap else 0
            for _ in range(n_steps)]
    length = length or 8 * n_steps + 64
    ready = (rng.random(length) >= p_stall).tolist()
    return gaps, ready


def check_unit(unit, *, residual="none", stages=None, lanes=None, accum=None, steps=120,
               seed=0, p_gap=0.3, p_stall=0.4, sim="verilator", interleave=None):
    """Model vs RTL on one random stream with a random stall pattern (an encoder: random
    groups of :mod:`sim.stimulus.encoder`, ``steps`` beats rounded up to whole groups).

    ``accum`` is a dot unit's accumulator back end (None: the default); with ``interleave``
    L > 1 the stream is interleaved over its L accumulators (:mod:`sim.stimulus.interleave`)
    and the model is told each step's. Returns a dict with
    the model's and the RTL's cycles, the words and whether they agree.
    """
    from hif4spec import module_name, resolve
    from sim.cyclesim import Stimulus, UnitTiming
    from sim.stimulus import (expected_words, manifest_accum, pack_payloads, random_stream,
                              short_loops)

    from . import runner as bench_runner

    params = resolve(unit, residual, stages, lanes, accum, interleave)
    module = module_name(unit, **params)
    verilog, manifest = bench_runner.generate_cached(unit, params,
                                                     BUILD_ROOT / "rtl" / module)
    rng = np.random.default_rng(seed)
    if unit_spec(unit).kind == "encoder":
        # steps are beats; every ii-th ends a group and gives one output
        from sim.stimulus.encoder import encoder_stream, expected_outputs, pack_beats

        n = manifest["ii"]
        groups = encoder_stream(unit, params["residual"], -(-steps // n), seed, named=False)
        payload = pack_beats(manifest, unit, groups, seed=seed)
        expected = expected_outputs(unit, params["residual"], groups)
        last = [i % n == n - 1 for i in range(len(payload))]
        steps = len(payload)
    else:
        stream = random_stream(unit, params["residual"], steps, rng)
        # short K-loops (1..6 steps) so that outputs, and their ready stalls, are frequent
        stream["first"], stream["last"] = short_loops(steps, rng, max_len=6)
        L = params.get("interleave", 1)
        if L > 1:
            from sim.stimulus import interleave as inter
            stream = inter.interleave(stream, L, rng)
            payload = inter.pack_payloads(manifest, unit, params["residual"], stream)
            expected, _ = inter.expected_words(unit, params["residual"], stream,
                                               **manifest_accum(manifest))
            acc_id = [int(j) for j in stream["acc_id"]]
        else:
            payload = pack_payloads(manifest, unit, params["residual"], stream)
            expected, _ = expected_words(unit, params["residual"], stream,
                                         **manifest_accum(manifest))
            acc_id = None
        last = [bool(x) for x in stream["last"]]
    gaps, ready = random_pattern(steps, rng, p_gap=p_gap, p_stall=p_stall)
    rtl = run_rtl_cycles(verilog, manifest, payload, [steps], [len(expected)], gaps, ready,
                         sim=sim)[0]
    timing = UnitTiming.from_manifest(manifest)
    model = timing.run(last, Stimulus(gaps=gaps, ready=ready),
                       acc_id=None if unit_spec(unit).kind == "encoder" else acc_id)
    return {
        "module": module, "steps": steps, "ii": timing.ii, "latency": timing.latency,
        "manifest_ii": manifest.get("ii"), "manifest_latency": manifest.get("latency"),
        "model_in": [int(x) for x in model.in_cycles],
        "model_out": [int(x) for x in model.out_cycles],
        "rtl_in": rtl["in_cycles"], "rtl_out": rtl["out_cycles"],
        "expected": [int(x) for x in expected], "words": rtl["words"],
        "cycles_agree": model.same_cycles(rtl["in_cycles"], rtl["out_cycles"]),
        "values_agree": [int(x) for x in expected] == rtl["words"],
    }


def check_gemm_against_rtl(verilog, manifest, rep, *, seed=0, a=None, w=None, r=None,
                           sim="verilator"):
    """Run a simulated GEMM's step streams through the Verilated unit.

    Every unit of the R x C array sees the same handshake timing (lockstep), so each array
    position runs as one segment with the stall pattern the array model produced (the valid
    gaps of its operand buffer, the ready gaps of its output buffer); positions idle in an
    edge tile get zero operands there and their words are ignored. Returns the RTL's cycle
    count and whether every transfer cycle and every output word agree with the model.
    """
    from sim import dot
    from sim.cyclesim import UnitTiming
    from sim.formats import quantize
    from sim.stimulus import pack_payloads
    from sim.stimulus.gemm import operand_steps, pair_stream, residual_of, residual_steps

    unit, residual = rep.unit, rep.residual
    m, k, n = rep.gemm
    rows, cols = rep.array
    fmt = unit_spec(unit).fmt
    rng = np.random.default_rng(seed)
    if a is None:
        x = rng.standard_normal((m, k)).astype(np.float32)
        a = quantize(x, fmt, axis=1)
        if residual != "none":
            r = residual_of(x, unit, residual)
    if w is None:
        w = quantize(rng.standard_normal((n, k)).astype(np.float32), fmt, axis=1)
    ksteps = -(-k // STEP_ELEMS)
    a_steps = operand_steps(a, unit, ksteps)
    w_steps = operand_steps(w, unit, ksteps)
    r_steps = None
    if residual != "none":
        r_steps = residual_steps(r, unit, residual, a, ksteps)
    # the model's stall pattern, as gaps relative to the previous transfer and ready gaps
    timing = UnitTiming.from_manifest(manifest)
    ins, outs = rep_in_out(rep, timing)
    valid = rep_valid(rep, timing)
    gaps = [int(valid[0])] + [int(valid[i] - (ins[i - 1] + 1)) for i in range(1, len(ins))]
    ready = np.ones(outs[-1] + 2, dtype=bool)
    for t0, t1 in rep_ready_gaps(rep, timing):
        ready[t0:t1] = False
    mt, nt = -(-m // rows), -(-n // cols)
    payload_parts, segs, nouts, used = [], [], [], []
    for pr in range(rows):
        for pc in range(cols):
            sel_a, sel_w, mask = [], [], []
            for ti in range(mt):
                for tj in range(nt):
                    mi, ni = ti * rows + pr, tj * cols + pc
                    ok = mi < m and ni < n
                    sel_a.append(mi if mi < m else -1)
                    sel_w.append(ni if ni < n else -1)
                    mask.append((mi, ni) if ok else None)
            stream = pair_stream(a_steps, w_steps, r_steps, sel_a, sel_w, ksteps)
            payload_parts.append(pack_payloads(manifest, unit, residual, stream))
            segs.append(len(sel_a) * ksteps)
            nouts.append(len(sel_a))
            used.append(mask)
    payloads = np.concatenate(payload_parts)
    res = run_rtl_cycles(verilog, manifest, payloads, segs, nouts, gaps, ready.tolist(),
                         sim=sim)
    expected = dot.gemm(a, w, r if residual != "none" else None)
    cycles_ok = all(rep.run.same_cycles(s["in_cycles"], s["out_cycles"]) for s in res)
    values_ok = True
    for s, mask in zip(res, used):
        for word, pos in zip(s["words"], mask):
            if pos is not None and word != int(expected[pos]):
                values_ok = False
        values_ok &= len(s["words"]) == len(mask)
    model_values = rep.output is None or bool(np.array_equal(rep.output, expected))
    return {"cycles": res[0]["out_cycles"][-1] + 1 if res[0]["out_cycles"] else None,
            "model_cycles": rep.cycles, "positions": len(res), "cycles_agree": cycles_ok,
            "values_agree": bool(values_ok and model_values)}


def rep_in_out(rep, timing):
    return rep.run.in_cycles, rep.run.out_cycles


def rep_valid(rep, timing):
    return rep.run.valid_cycles


def rep_ready_gaps(rep, timing):
    return rep.ready_gaps
