"""``hif4 verify``: simulate a generated unit against the golden model, bit for bit."""

import sys

from ._util import (CLIError, ToolError, add_unit_options, check_output_folder, display_path,
                    output_option, say_using, select_module, unit_params)

#: ``--waves-limit-mb`` default: the largest waveform written without asking.
WAVES_LIMIT_MB = 300


def register(subparsers):
    p = subparsers.add_parser(
        "verify", help="check a generated unit against the golden model in cocotb",
        description="Generate (cached) and build (cached: build/fast/<module>/ for the fast "
                    "engine, build/<sim>/<module>/ for cocotb) a unit, or "
                    "with --rtl-dir/--manifest build the generated Verilog file itself "
                    "(<module>-<hash>/) with the payload offsets of its manifest; "
                    "then drive random K-loops and named edge cases through it with random "
                    "stalls on valid and ready, checking every output word against "
                    "sim.dot.run_steps and no output earlier than the manifest's latency. "
                    "An encoder unit (hif4_quant, mxfp4_quant, nvfp4_quant) gets BF16 groups "
                    "(named cases, then random groups of many distributions) in 64/lanes "
                    "beats, and every output bit is checked against sim.formats (quantize, "
                    "resq and its packing). "
                    "The fast engine runs long streams in chunks of 131072 steps, each from "
                    "reset. Exits 1 on the first mismatch, printing the step's inputs and the "
                    "expected and actual words.")
    add_unit_options(p, rtl="generate", unit_default="hif4")
    p.add_argument("--vectors", type=int, default=10000,
                   help="steps to simulate (an encoder: groups of 64 elements), named "
                        "cases included (default 10000)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--replay", metavar="FILE",
                   help="run the steps of a replay file (hif4 soak writes one for each failing "
                        "chunk: its shortest failing K-loop) through the unit it names, or "
                        "through --rtl-dir/--manifest's, on the fast engine, against the golden "
                        "model; its stall pattern when it has one, else none")
    p.add_argument("--engine", default="auto", choices=["auto", "fast", "cocotb"],
                   help="fast: a compiled Verilator harness (about 10^6 steps/s on the "
                        "standard HiF4 unit; built once per module in build/fast/); cocotb: "
                        "the Python bench (waveforms, Icarus); auto (default): fast unless "
                        "--waves or --sim icarus")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus"],
                   help="simulator (default verilator; icarus needs iverilog and vvp on PATH)")
    p.add_argument("--waves", action="store_true",
                   help="write a waveform: BUILD/<sim>/<module>[-<hash>]_waves/dump.fst "
                        "(dump.vcd when the LZ4 headers FST needs are missing); its size is "
                        "estimated first (a 16-lane NVFP4 unit: about 25 kB per cycle, 1.1 GB "
                        "as VCD for 10000 steps)")
    p.add_argument("--waves-limit-mb", type=float, default=WAVES_LIMIT_MB, metavar="MB",
                   help=f"refuse --waves when the estimated VCD size passes MB megabytes "
                        f"(default {WAVES_LIMIT_MB})")
    output_option(p, "--build-dir", kind="folder", default=None, metavar="DIR",
                   help="folder for generated Verilog and simulator builds (default: build/ "
                        "in the repository; created if missing, its parent must exist)")
    p.add_argument("--valid-prob", type=float, default=0.9,
                   help="probability the driver offers a step in a cycle (default 0.9)")
    p.add_argument("--ready-prob", type=float, default=0.9,
                   help="probability the output is ready in a cycle (default 0.9)")
    p.set_defaults(func=run)


def run(args):
    from sim.bench.runner import REPO, SimulatorError, engine_of, simulator_available, verify

    if args.vectors < 1:
        raise CLIError(f"--vectors must be at least 1, not {args.vectors}")
    if not args.waves_limit_mb > 0:
        raise CLIError(f"--waves-limit-mb must be a positive number, not {args.waves_limit_mb}")
    for name in ("valid_prob", "ready_prob"):
        value = getattr(args, name)
        if not 0 < value <= 1:
            raise CLIError(f"--{name.replace('_', '-')} must be in (0, 1], not {value}")
    if args.waves and args.sim != "verilator":
        raise CLIError("--waves is supported with --sim verilator only")
    try:
        engine_of(args.engine, args.sim, args.waves)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    build_root = check_output_folder(args.build_dir or REPO / "build", "--build-dir")
    replay = _read_replay(args) if args.replay else None
    if args.rtl_dir or args.manifest:
        rtl = select_module(args, "verify")
        unit, params = None, {}
    else:
        rtl = None
        unit, params = unit_params(args)
    ok, message = simulator_available(args.sim)
    if not ok:
        raise CLIError(message)
    extra = {}
    if replay is not None:
        meta, stream, pattern = replay
        if rtl is None:
            have = {"unit": meta["unit"], "interleave": 1, **meta["parameters"]}
            for key in ("unit", "residual", "stages", "lanes", "accum", "interleave"):
                value = getattr(args, key, None)
                if value is not None and key in have and value != have[key]:
                    raise CLIError(f"--{key} {value} disagrees with --replay {args.replay!r} "
                                   f"(a case of {meta['module']}: {key} {have[key]})")
            unit, params = meta["unit"], dict(meta["parameters"])
        elif rtl[1]["unit"] != meta["unit"] or rtl[1]["parameters"] != meta["parameters"]:
            raise CLIError(f"--replay {args.replay!r} is a case of {meta['module']}, not of "
                           f"{rtl[1]['module']}")
        extra = {"stream": stream, "pattern": pattern, "engine": "fast"}
        if pattern is None:
            extra.update(valid_prob=1.0, ready_prob=1.0)
        print(f"replay: {meta.get('length')} steps of {meta['module']} ({meta.get('why')}; "
              f"when saved: expected {meta.get('expected')}, actual {meta.get('actual')})")
    settings = dict(vectors=args.vectors, seed=args.seed, sim=args.sim, waves=args.waves,
                    valid_prob=args.valid_prob, ready_prob=args.ready_prob,
                    engine=args.engine)
    settings.update(extra)
    try:
        result = verify(unit, **params, progress=True, rtl=rtl, build_root=build_root,
                        waves_limit=args.waves_limit_mb * 1e6, **settings)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    except SimulatorError as exc:
        raise ToolError(str(exc)) from None
    if rtl is None:
        say_using("verify", result["verilog"])
    steps = result["transferred"]
    if "groups" in result:                      # an encoder: groups of beats
        steps, what = result["checked"], "groups"
        checked = f"{result['beats']} beats"
    else:
        what, checked = "steps", f"{result['checked']} outputs"
    rate = steps / result["sim_s"] if result["sim_s"] > 0 else float("inf")
    print(f"{result['module']} ({result['engine']}): {steps} {what} checked ({checked}), "
          f"{result['mismatches']} mismatches, {result['seconds']:.1f} s "
          f"(generate {result['generate_s']:.1f}, build {result['build_s']:.1f}, "
          f"simulate {result['sim_s']:.1f}), {rate:.0f} {what}/s, {result['cycles']} cycles")
    if result.get("waves"):
        print(f"waves: {display_path(result['waves'])}")
    if result["timeout"]:
        print(f"FAIL: timeout after {result['cycles']} cycles", file=sys.stderr)
        return 1
    latency = result["manifest"]["latency"]
    if result.get("early_output") is not None or (result["latency_min"] is not None
                                                   and result["latency_min"] < latency):
        print(f"FAIL: an output came {result['latency_min']} cycles after its last step, "
              f"before the manifest's latency {latency}")
        return 1
    if result["mismatches"]:
        bad = result["first_mismatch"]
        print(f"FAIL: first mismatch at output {bad['output']} (step {bad['step']})")
        if bad.get("inputs") is not None:
            for key, value in bad["inputs"].items():
                print(f"  {key}: {value}")
        if "groups" in result:
            _field_diff(result["manifest"], bad)
        else:
            expected = "none" if bad["expected"] is None else f"0x{bad['expected']:08x}"
            print(f"  expected {expected}  actual 0x{bad['actual']:08x}")
        return 1
    return 0


def _field_diff(manifest, bad):
    """Print an encoder mismatch field by field (``manifest["output"]``)."""
    for name, f in manifest["output"].items():
        digits = -(-f["width"] // 4)
        mask = (1 << f["width"]) - 1
        actual = (bad["actual"] >> f["offset"]) & mask
        if bad["expected"] is None:
            print(f"  {name}: expected none  actual 0x{actual:0{digits}x}")
            continue
        expected = (bad["expected"] >> f["offset"]) & mask
        same = "equal" if expected == actual else "DIFFER"
        print(f"  {name} ({same}): expected 0x{expected:0{digits}x}\n"
              f"  {' ' * len(name)}           actual   0x{actual:0{digits}x}")


def _read_replay(args):
    """``(meta, stream, pattern)`` of ``--replay``, or a one-line error."""
    from pathlib import Path

    from sim.bench.soak import load_case

    if args.engine == "cocotb" or args.waves or args.sim != "verilator":
        raise CLIError("--replay runs on the fast engine (Verilator, no waveforms)")
    if not Path(args.replay).is_file():
        raise CLIError(f"--replay {args.replay!r}: no such file")
    try:
        return load_case(args.replay)
    except ValueError as exc:
        raise CLIError(f"--replay: {exc}") from None
