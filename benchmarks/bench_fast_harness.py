"""Benchmark: the fast verification harness against the cocotb bench on the same module.

Usage::

    python benchmarks/bench_fast_harness.py [--unit hif4] [--residual none] [--steps 100000]
                                            [--long 1000000]

Both engines are timed in this run, on the same module and the same step stream (named
cases, then random K-loops), with no stalls; builds are excluded (each engine's build is
cached first). Printed:

1. steps per second of the cocotb bench and of the harness on that stream (the harness time
   includes writing its vector files and starting its process), and their ratio (the goal
   is at least 50x);
2. the harness alone on ``--long`` steps (one process on one core; the goal is at least
   10^6 steps/s on the standard HiF4 unit), and the whole fast engine on them: stimulus,
   golden model and packing included, which is what a soak pays per step.

Each fast figure is the median of three runs. The machine is named first: runs elsewhere
or beside other work differ.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hif4spec import ACCUMS, LANES, RESIDUAL_MODES, STAGES, units_of_kind  # noqa: E402
from sim.tools import machine  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unit", default="hif4", choices=[u.name for u in units_of_kind("dot")])
    ap.add_argument("--residual", default="none", choices=RESIDUAL_MODES)
    ap.add_argument("--stages", type=int, default=None, choices=STAGES)
    ap.add_argument("--lanes", type=int, default=None, choices=LANES)
    ap.add_argument("--accum", default=None, choices=ACCUMS)
    ap.add_argument("--steps", type=int, default=100000, help="steps of the shared stream")
    ap.add_argument("--long", type=int, default=1000000, help="steps of the harness-alone run")
    args = ap.parse_args(argv)

    from hif4spec import module_name, resolve
    from sim.bench.fast import build_harness, run_fast, stall_pattern
    from sim.bench.runner import REPO, build, generate_cached, make_stream, unit_vectors, verify

    params = resolve(args.unit, args.residual, args.stages, args.lanes, args.accum)
    module = module_name(args.unit, **params)
    verilog, manifest = generate_cached(args.unit, params, REPO / "build" / "rtl" / module)
    print(f"machine: {machine()}")
    print(f"module: {module}")
    build(verilog, module)                          # not timed
    binary = build_harness(verilog, manifest)       # not timed

    stream = make_stream(args.unit, params["residual"], args.steps, 1)
    slow = verify(args.unit, **params, stream=stream, valid_prob=1.0, ready_prob=1.0,
                  engine="cocotb")
    fast = [verify(args.unit, **params, stream=stream, valid_prob=1.0, ready_prob=1.0,
                   engine="fast") for _ in range(3)]
    assert slow["mismatches"] == 0 and all(f["mismatches"] == 0 for f in fast)
    assert all(f["cycles"] == slow["cycles"] for f in fast), "the engines disagree on cycles"
    rate_slow = args.steps / slow["sim_s"]
    rate_fast = args.steps / statistics.median(f["sim_s"] for f in fast)
    print(f"1. the same {args.steps} steps ({slow['checked']} outputs, {slow['cycles']} "
          "cycles, 0 mismatches in both):")
    print(f"   cocotb bench:  {rate_slow:12,.0f} steps/s")
    print(f"   fast harness:  {rate_fast:12,.0f} steps/s")
    print(f"   ratio:         {rate_fast / rate_slow:12,.0f}x   (goal >= 50x)")

    t0 = time.perf_counter()
    long = make_stream(args.unit, params["residual"], args.long, 2, named=False)
    payload, expected, steps = unit_vectors(args.unit, params["residual"], manifest, long)
    gaps, ready = stall_pattern(len(payload), 2)
    t_stim = time.perf_counter() - t0
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = run_fast(binary, manifest, payload, expected, steps, gaps, ready)
        runs.append(time.perf_counter() - t0)
        assert r["mismatches"] == 0 and r["checked"] == len(expected)
    t_run = statistics.median(runs)
    print(f"2. {args.long:,} steps ({len(expected):,} outputs) on one core:")
    print(f"   harness alone:           {args.long / t_run:12,.0f} steps/s   (goal >= 1,000,000)")
    print(f"   stimulus + golden model: {args.long / t_stim:12,.0f} steps/s")
    print(f"   whole fast engine:       {args.long / (t_stim + t_run):12,.0f} steps/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
