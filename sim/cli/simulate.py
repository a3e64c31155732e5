"""``hif4 simulate``: run a GEMM through the cycle-level model of an R x C unit array."""

import math

from ._util import (CLIError, ToolError, add_unit_options, check_output_folder, refuse_interleave,
                    select_module)
from .estimate import check_array_steps, parse_array, parse_bandwidth, parse_gemm


def register(subparsers):
    p = subparsers.add_parser(
        "simulate", help="cycle-level simulation of a GEMM on an array of dot-product units",
        description="Run an M x K x N GEMM on an R x C array of generated units fed through "
                    "an operand buffer and a memory interface with a bandwidth limit. Prints "
                    "cycles, utilization, bytes moved and stall cycles by cause; the output "
                    "values are the golden model's bit-true GEMM. With --rtl the same step "
                    "stream and stall pattern also run through the Verilated unit (cocotb) "
                    "and both cycle counts and outputs are compared.")
    add_unit_options(p, rtl="read", kind="dot")
    p.add_argument("--gemm", required=True, help="GEMM size MxKxN, e.g. 64x1024x64")
    p.add_argument("--array", default="4x4", help="array of R x C units (default: 4x4)")
    p.add_argument("--bandwidth", default="inf",
                   help="memory interface bytes per cycle, or 'inf' (default: inf)")
    p.add_argument("--buffer-steps", type=int, default=2,
                   help="operand buffer depth in array steps (default: 2)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random Gaussian operands (default: 0)")
    p.add_argument("--rtl", action="store_true",
                   help="also run the workload through the Verilated unit and compare "
                        "(slow: keep the GEMM small)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args):
    import json

    from sim.cyclesim import UnitTiming, simulate_gemm

    if args.rtl:        # the array's RTL check streams one accumulator per unit so far
        refuse_interleave(args, "simulate --rtl")
    gemm = parse_gemm(args.gemm)
    array = parse_array(args.array)
    bandwidth = parse_bandwidth(args.bandwidth)
    if args.buffer_steps < 1:
        raise CLIError(f"--buffer-steps must be >= 1, not {args.buffer_steps}")
    check_array_steps(args, gemm, array)
    if gemm[0] * gemm[2] > 4_000_000:
        raise CLIError(f"--gemm {args.gemm} has {gemm[0] * gemm[2]} outputs; at most "
                       "4,000,000 are computed bit-true")
    if args.rtl:
        from hif4spec import STEP_ELEMS

        unit_steps = gemm[0] * gemm[2] * -(-gemm[1] // STEP_ELEMS)
        if unit_steps > 20000:
            raise CLIError(f"--rtl runs {unit_steps} unit steps through cocotb; keep it "
                           "under 20000 (a smaller GEMM)")
    verilog, manifest = select_module(args, "simulate")
    if args.rtl:
        from sim.bench.runner import REPO

        check_output_folder(REPO / "build", "the build folder")
    timing = UnitTiming.from_manifest(manifest)
    rep = simulate_gemm(manifest["unit"], *gemm, residual=manifest["parameters"]["residual"],
                        array=array, bandwidth=bandwidth, timing=timing,
                        buffer_steps=args.buffer_steps, seed=args.seed)
    out = rep.to_json()
    out["module"] = manifest["module"]
    if math.isinf(bandwidth):
        out["bandwidth_bytes_per_cycle"] = None
    if args.rtl:
        from sim.bench.runner import SimulatorError
        from sim.bench import rtlcheck

        try:
            res = rtlcheck.check_gemm_against_rtl(verilog, manifest, rep, seed=args.seed)
        except SimulatorError as exc:
            raise ToolError(str(exc)) from None
        out["rtl"] = res
    if args.json:
        print(json.dumps(out, indent=1, sort_keys=True))
        return 0
    m, k, n = gemm
    print(f"{manifest['module']}: GEMM {m}x{k}x{n} on {array[0]}x{array[1]} units, "
          f"bandwidth {'unlimited' if math.isinf(bandwidth) else f'{bandwidth:g} B/cycle'}")
    print(f"  cycles         {rep.cycles}")
    print(f"  utilization    {rep.utilization:.1%}  (ii {rep.ii}, latency {rep.latency})")
    print(f"  array steps    {rep.array_steps}  unit steps {rep.unit_steps}  MACs {rep.macs}")
    reads = ", ".join(f"{k2} {v}" for k2, v in rep.bytes_read.items())
    print(f"  bytes read     {reads}; written {rep.bytes_written}; "
          f"{8 * rep.bytes_moved / rep.macs:.3f} bits/MAC")
    stalls = ", ".join(f"{k2} {v}" for k2, v in rep.stall_cycles.items())
    print(f"  stall cycles   {stalls}")
    if args.rtl:
        r = out["rtl"]
        print(f"  RTL (cocotb)   cycles {r['cycles']}, output cycles "
              f"{'agree' if r['cycles_agree'] else 'DIFFER'}, values "
              f"{'agree' if r['values_agree'] else 'DIFFER'}")
        if not (r["cycles_agree"] and r["values_agree"]):
            return 1
    return 0
