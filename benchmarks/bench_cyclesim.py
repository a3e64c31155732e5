"""Benchmark: cycle-level simulator vs the Verilated RTL on the same workload.

Usage::

    python benchmarks/bench_cyclesim.py [--unit hif4] [--steps 3000] [--lanes 64]

Two workloads, both timed in this run (no stored baseline):

1. One unit, one step stream with a random stall pattern (valid gaps, ready gaps): the
   Verilated unit on the fast harness (:mod:`sim.bench.fast`; build excluded, vector files
   and process start-up included) against
   :meth:`sim.cyclesim.UnitTiming.run` on the very same pattern; the cycles are checked to
   agree before the times are compared.
2. A GEMM on a 16 x 16 array (the simulator's use case): every unit of the array runs in
   lockstep, so one timeline serves all 256 units. The RTL would run each unit's stream
   through the Verilated unit; its rate per unit step is taken from workload 1.

Prints simulated steps per second of each and the ratio (the goal is >= 1000x).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hif4spec import ACCUMS, LANES, RESIDUAL_MODES, units_of_kind  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unit", default="hif4", choices=[u.name for u in units_of_kind("dot")])
    ap.add_argument("--steps", type=int, default=3000, help="steps through the RTL")
    ap.add_argument("--lanes", type=int, default=64, choices=LANES)
    ap.add_argument("--residual", default="none", choices=RESIDUAL_MODES)
    ap.add_argument("--stages", type=int, default=None)
    ap.add_argument("--accum", default=None, choices=ACCUMS,
                    help="accumulator back end (default: the unit's default one)")
    ap.add_argument("--gemm", default="256x4096x256", help="GEMM MxKxN of workload 2")
    args = ap.parse_args(argv)

    from hif4spec import module_name, resolve
    from sim.bench import runner as bench_runner
    from sim.stimulus import pack_payloads, random_stream
    from sim.bench import rtlcheck
    from sim.cyclesim import Stimulus, UnitTiming, simulate_gemm

    params = resolve(args.unit, args.residual, args.stages, args.lanes, args.accum)
    module = module_name(args.unit, **params)
    verilog, manifest = bench_runner.generate_cached(args.unit, params,
                                                     rtlcheck.BUILD_ROOT / "rtl" / module)
    rng = np.random.default_rng(7)
    stream = random_stream(args.unit, params["residual"], args.steps, rng)
    payload = pack_payloads(manifest, args.unit, params["residual"], stream)
    gaps, ready = rtlcheck.random_pattern(args.steps, rng, p_gap=0.3, p_stall=0.3)
    last = np.asarray(stream["last"], dtype=bool)
    outputs = int(np.count_nonzero(stream["last"]))
    print(f"workload 1: {module}, {args.steps} steps, {outputs} outputs, random stalls",
          file=sys.stderr)
    from sim.bench.fast import build_harness
    build_harness(verilog, manifest)   # not timed
    t0 = time.perf_counter()
    rtl = rtlcheck.run_rtl_cycles(verilog, manifest, payload, [args.steps], [outputs], gaps,
                                  ready)[0]
    t_rtl = time.perf_counter() - t0
    timing = UnitTiming.from_manifest(manifest)
    stim = Stimulus(gaps=gaps, ready=ready)
    reps = 0
    t0 = time.perf_counter()
    while True:
        run = timing.run(last, stim)
        reps += 1
        t_model = (time.perf_counter() - t0) / reps
        if time.perf_counter() - t0 > 1.0:
            break
    agree = run.same_cycles(rtl["in_cycles"], rtl["out_cycles"])
    rate_rtl = args.steps / t_rtl
    rate_model = args.steps / t_model
    print(f"  cycles agree: {agree} ({rtl['cycles']} cycles)")
    print(f"  Verilated RTL (fast harness): {t_rtl:8.3f} s  {rate_rtl:12.0f} steps/s")
    print(f"  cycle-level model: {t_model:8.5f} s  {rate_model:12.0f} steps/s")
    print(f"  ratio (one unit, same stall pattern): {rate_model / rate_rtl:8.0f}x")

    m, k, n = (int(x) for x in args.gemm.lower().split("x"))
    t0 = time.perf_counter()
    rep = simulate_gemm(args.unit, m, k, n, residual=args.residual, array=(16, 16),
                        bandwidth=512, timing=timing, compute=False)
    t_gemm = time.perf_counter() - t0
    rate_gemm = rep.unit_steps / t_gemm
    print(f"workload 2: GEMM {m}x{k}x{n} on 16x16 units, 512 B/cycle: {rep.unit_steps} unit "
          f"steps, {rep.cycles} cycles, utilization {rep.utilization:.1%}")
    print(f"  cycle-level model: {t_gemm:8.3f} s  {rate_gemm:12.0f} unit steps/s")
    print(f"  Verilated RTL (rate of workload 1): {rep.unit_steps / rate_rtl:10.0f} s "
          "estimated")
    print(f"  ratio (array GEMM): {rate_gemm / rate_rtl:8.0f}x")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
