"""``hif4 estimate``: area, throughput and traffic of the generated units, side by side."""

import math
import re
import sys

from ._util import CLIError, atomic_output, parse_choice_list

UNITS = ("hif4", "mxfp4", "nvfp4")
RESIDUALS = ("none", "2:4", "dense")


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


def progress_bar(done, total, what):
    if not sys.stderr.isatty() and done not in (0, total):
        return
    width = 24
    filled = int(width * done / max(total, 1))
    end = "\n" if done >= total else ""
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what:<20.20}",
          end=end, file=sys.stderr, flush=True)


def register(subparsers):
    p = subparsers.add_parser(
        "estimate", help="compare area, throughput and traffic of the HiF4/MXFP4/NVFP4 units",
        description="Compare the generated dot-product units (rtl_out/): area from the "
                    "calibrated model (and Yosys synthesis with --synth), area per MAC, "
                    "longest path, MACs per cycle, cycles and effective TOPS of a GEMM on an "
                    "R x C array, bits moved per MAC, and ratios against MXFP4 and NVFP4.")
    p.add_argument("--units", default="hif4,mxfp4,nvfp4",
                   help="comma-separated units to compare (default: hif4,mxfp4,nvfp4)")
    p.add_argument("--residual", default="none,2:4",
                   help="comma-separated residual paths: none, 2:4, dense (default: none,2:4; "
                        "NVFP4 has none only)")
    p.add_argument("--gemm", default="256x2048x256",
                   help="GEMM size MxKxN for the cycle figures (default: 256x2048x256)")
    p.add_argument("--array", default="4x4",
                   help="array of R x C units running the GEMM (default: 4x4)")
    p.add_argument("--bandwidth", default="inf",
                   help="memory interface bytes per cycle, or 'inf' (default: inf)")
    p.add_argument("--freq-ghz", type=float, default=1.0,
                   help="clock frequency in GHz for effective TOPS (default: 1.0)")
    p.add_argument("--synth", action="store_true",
                   help="also report the Yosys-synthesized area (checked-in table, else a "
                        "fresh run: minutes per unit)")
    p.add_argument("--synth-backend", choices=("yowasp", "native"), default=None,
                   help="Yosys build for fresh --synth runs: yowasp (default, or "
                        "$HIF4_SYNTH_BACKEND) or native (pyosys, same Yosys, ~1.5x faster)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list with one object per configuration")
    p.add_argument("--plot", metavar="FILE.png",
                   help="write a PNG of area per MAC and throughput per area")
    p.add_argument("--rtl-dir", default=None,
                   help="folder with the generated modules and manifests (default: rtl_out/)")
    p.set_defaults(func=run)


def run(args):
    import json

    from sim.cost import estimate as est
    from sim.cost.synth import SynthError

    units = parse_choice_list(args.units, UNITS, "unit")
    residuals = parse_choice_list(args.residual, RESIDUALS, "residual")
    gemm = parse_gemm(args.gemm)
    array = parse_array(args.array)
    bandwidth = parse_bandwidth(args.bandwidth)
    if not args.freq_ghz > 0 or math.isinf(args.freq_ghz):
        raise CLIError(f"--freq-ghz must be a positive finite number, not {args.freq_ghz}")
    if args.plot and not args.plot.lower().endswith(".png"):
        raise CLIError(f"--plot writes a PNG file; give a name ending in .png, "
                       f"not {args.plot!r}")
    steps = -(-gemm[0] // array[0]) * -(-gemm[2] // array[1]) * -(-gemm[1] // 64)
    if steps > 5_000_000:
        raise CLIError(f"--gemm {args.gemm} on --array {args.array} needs {steps} array "
                       "steps; use a larger array or a smaller GEMM (at most 5,000,000)")
    kwargs = {}
    if args.rtl_dir:
        kwargs["rtl_dir"] = args.rtl_dir
    try:
        rows = est.estimate_rows(units, residuals, gemm=gemm, array=array,
                                 freq_ghz=args.freq_ghz, bandwidth=bandwidth,
                                 synth=args.synth, progress=progress_bar,
                                 synth_backend=args.synth_backend, **kwargs)
    except LookupError as exc:
        raise CLIError(str(exc)) from None
    except SynthError as exc:
        raise CLIError(f"synthesis failed: {str(exc).splitlines()[0]}") from None
    if args.plot:
        png = est.plot_rows(rows, args.plot)
        with atomic_output(args.plot) as fh:
            fh.write(png)
    if args.json:
        for r in rows:
            r["bandwidth_bytes_per_cycle"] = None if math.isinf(bandwidth) else bandwidth
            r["freq_ghz"] = args.freq_ghz
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        print(est.format_table(rows, args.freq_ghz))
    return 0
