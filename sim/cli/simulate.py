"""``hif4 simulate``: run a GEMM through the cycle-level model of an R x C unit array."""

import math

from ._util import CLIError
from .estimate import RESIDUALS, UNITS, parse_array, parse_bandwidth, parse_gemm


def register(subparsers):
    p = subparsers.add_parser(
        "simulate", help="cycle-level simulation of a GEMM on an array of dot-product units",
        description="Run an M x K x N GEMM on an R x C array of generated units fed through "
                    "an operand buffer and a memory interface with a bandwidth limit. Prints "
                    "cycles, utilization, bytes moved and stall cycles by cause; the output "
                    "values are the golden model's bit-true GEMM. With --rtl the same step "
                    "stream and stall pattern also run through the Verilated unit (cocotb) "
                    "and both cycle counts and outputs are compared.")
    p.add_argument("--unit", required=True, choices=UNITS, help="unit format")
    p.add_argument("--residual", default="none", choices=RESIDUALS,
                   help="activation residual path (default: none)")
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
    p.add_argument("--rtl-dir", default=None,
                   help="folder with the generated modules and manifests (default: rtl_out/)")
    p.set_defaults(func=run)


def run(args):
    import json

    from sim.cost.estimate import RTL_DIR, find_manifests, select_manifest
    from sim.cyclesim import UnitTiming, simulate_gemm

    gemm = parse_gemm(args.gemm)
    array = parse_array(args.array)
    bandwidth = parse_bandwidth(args.bandwidth)
    if args.unit == "nvfp4" and args.residual != "none":
        raise CLIError("NVFP4 units have no residual input; use --residual none")
    if args.buffer_steps < 1:
        raise CLIError(f"--buffer-steps must be >= 1, not {args.buffer_steps}")
    steps = -(-gemm[0] // array[0]) * -(-gemm[2] // array[1]) * -(-gemm[1] // 64)
    if steps > 5_000_000:
        raise CLIError(f"--gemm {args.gemm} on --array {args.array} needs {steps} array "
                       "steps; use a larger array or a smaller GEMM (at most 5,000,000)")
    if gemm[0] * gemm[2] > 4_000_000:
        raise CLIError(f"--gemm {args.gemm} has {gemm[0] * gemm[2]} outputs; at most "
                       "4,000,000 are computed bit-true")
    rtl_dir = args.rtl_dir or RTL_DIR
    sel = select_manifest(find_manifests(rtl_dir), args.unit, args.residual)
    if sel is None:
        raise CLIError(f"no generated module for unit {args.unit!r} with residual "
                       f"{args.residual!r} in {rtl_dir}; run `hif4 generate --all` first")
    verilog, manifest = sel
    timing = UnitTiming.from_manifest(manifest)
    rep = simulate_gemm(args.unit, *gemm, residual=args.residual, array=array,
                        bandwidth=bandwidth, timing=timing, buffer_steps=args.buffer_steps,
                        seed=args.seed)
    out = rep.to_json()
    out["module"] = manifest["module"]
    if math.isinf(bandwidth):
        out["bandwidth_bytes_per_cycle"] = None
    if args.rtl:
        from sim.cost import rtlcheck

        if rep.unit_steps > 20000:
            raise CLIError(f"--rtl runs {rep.unit_steps} unit steps through cocotb; keep it "
                           "under 20000 (a smaller GEMM or array)")
        res = rtlcheck.check_gemm_against_rtl(verilog, manifest, rep, seed=args.seed)
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
