"""``hif4 verify``: simulate a generated unit against the golden model, bit for bit."""

import sys

from ._util import CLIError


def register(subparsers):
    p = subparsers.add_parser(
        "verify", help="check a generated unit against the golden model in cocotb",
        description="Generate (cached) and build (cached, build/<sim>/<module>/) a unit, then "
                    "drive random K-loops and named edge cases through it with random stalls "
                    "on valid and ready, checking every output word against sim.dot.run_steps. "
                    "Exits 1 on the first mismatch, printing the step's inputs and the "
                    "expected and actual words.")
    p.add_argument("--unit", default="hif4", help="unit to verify (default hif4)")
    p.add_argument("--residual", default=None, choices=["none", "2:4", "dense"],
                   help="residual input (default none)")
    p.add_argument("--stages", type=int, default=None, help="pipeline stages (unit default)")
    p.add_argument("--lanes", type=int, default=None, choices=[16, 32, 64],
                   help="element products per cycle (default 64)")
    p.add_argument("--vectors", type=int, default=10000,
                   help="steps to simulate, named cases included (default 10000)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus"],
                   help="simulator (default verilator; icarus is skipped if not installed)")
    p.add_argument("--waves", action="store_true",
                   help="write a waveform: build/<sim>/<module>_waves/dump.fst (dump.vcd when "
                        "the LZ4 headers FST needs are missing)")
    p.add_argument("--valid-prob", type=float, default=0.9,
                   help="probability the driver offers a step in a cycle (default 0.9)")
    p.add_argument("--ready-prob", type=float, default=0.9,
                   help="probability the output is ready in a cycle (default 0.9)")
    p.set_defaults(func=run)


def run(args):
    from hwgen.units import UNITS
    from sim.bench.runner import simulator_available, verify

    if args.unit not in UNITS:
        raise CLIError(f"unknown unit {args.unit!r}; choose from {', '.join(sorted(UNITS))}")
    if args.vectors < 1:
        raise CLIError(f"--vectors must be at least 1, not {args.vectors}")
    for name in ("valid_prob", "ready_prob"):
        value = getattr(args, name)
        if not 0 < value <= 1:
            raise CLIError(f"--{name.replace('_', '-')} must be in (0, 1], not {value}")
    ok, message = simulator_available(args.sim)
    if not ok:
        if args.sim == "icarus":
            print(f"hif4 verify: {message}", file=sys.stderr)
            return 0
        raise CLIError(message)
    if args.waves and args.sim != "verilator":
        raise CLIError("--waves is supported with --sim verilator only")
    residual = args.residual or UNITS[args.unit].defaults["residual"]
    if residual not in UNITS[args.unit].residuals:
        raise CLIError(f"unit {args.unit} supports residual "
                       f"{', '.join(UNITS[args.unit].residuals)}, not {residual!r}")
    try:
        result = verify(args.unit, residual=residual, stages=args.stages, lanes=args.lanes,
                        vectors=args.vectors, seed=args.seed, sim=args.sim, waves=args.waves,
                        valid_prob=args.valid_prob, ready_prob=args.ready_prob, progress=True)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    print(file=sys.stderr)
    steps = result["transferred"]
    rate = steps / result["sim_s"] if result["sim_s"] > 0 else float("inf")
    print(f"{result['module']}: {steps} steps checked ({result['checked']} outputs), "
          f"{result['mismatches']} mismatches, {result['seconds']:.1f} s "
          f"(generate {result['generate_s']:.1f}, build {result['build_s']:.1f}, "
          f"simulate {result['sim_s']:.1f}), {rate:.0f} steps/s, {result['cycles']} cycles")
    if result.get("waves"):
        print(f"waves: {result['waves']}")
    if result["timeout"]:
        print(f"FAIL: timeout after {result['cycles']} cycles", file=sys.stderr)
        return 1
    if result["mismatches"]:
        bad = result["first_mismatch"]
        print(f"FAIL: first mismatch at output {bad['output']} (step {bad['step']})")
        if bad.get("inputs") is not None:
            for key, value in bad["inputs"].items():
                print(f"  {key}: {value}")
        expected = "none" if bad["expected"] is None else f"0x{bad['expected']:08x}"
        print(f"  expected {expected}  actual 0x{bad['actual']:08x}")
        return 1
    return 0
