"""``hif4 bench``: benchmarks (a measurement printed beside baselines, never a test)."""

from ._util import CLIError, parse_choice_list

FORMATS = ("hif4", "mxfp4", "nvfp4", "hif8", "bf16")


def register(subparsers):
    parser = subparsers.add_parser(
        "bench", help="run a benchmark and print figures beside baselines",
        description="Benchmarks of the golden model. Figures are printed beside baselines "
                    "measured in the same run; nothing here passes or fails on speed.")
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH",
                                help="which benchmark to run (quantize)")
    q = sub.add_parser(
        "quantize", help="quantizer throughput and Gaussian MSE ratios",
        description="Quantize N float32 values on one core with each format (fake_quantize "
                    "and the packed quantize), print values/s and the ratios to numpy.copy "
                    "and to ml_dtypes' float4_e2m1fn cast of the same array; then print the "
                    "Gaussian MSE ratios NVFP4/HiF4 and MXFP4/HiF4 (512 x 256 samples, "
                    "groups along axis 0, NVFP4 without tensor scale, averaged over "
                    "sigma = 0.01 * 2^k, k = 3..16) beside the HiF4 paper's 1.32 and 1.89.")
    q.add_argument("--values", type=int, default=1 << 24, metavar="N",
                   help="number of float32 values to quantize (default 16777216 = 16M)")
    q.add_argument("--formats", default=",".join(FORMATS), metavar="LIST",
                   help="comma-separated formats to time (default: all of "
                        f"{', '.join(FORMATS)})")
    q.add_argument("--repeats", type=int, default=3, metavar="R",
                   help="time each job R times and keep the best (default 3)")
    q.add_argument("--seed", type=int, default=0, help="random seed of the samples (default 0)")
    q.add_argument("--no-packed", action="store_true",
                   help="time only fake_quantize, not quantize() to codes")
    q.add_argument("--no-mse", action="store_true",
                   help="skip the Gaussian MSE ratios")
    q.add_argument("--all-cores", action="store_true",
                   help="do not pin the process to one CPU")
    q.set_defaults(func=run)
    parser.set_defaults(func=_need_benchmark)


def _need_benchmark(args):
    raise CLIError("name a benchmark: hif4 bench quantize [--values N] (see --help)")


def run(args):
    import sys

    from sim.formats import bench

    formats = parse_choice_list(args.formats, FORMATS, "format")
    if args.values < 64:
        raise CLIError(f"--values must be at least 64, not {args.values}")
    if args.repeats < 1:
        raise CLIError(f"--repeats must be at least 1, not {args.repeats}")

    def progress(text):
        print(f"\r{text:<60s}", end="", file=sys.stderr, flush=True)

    cpu = None if args.all_cores else bench.pin_one_core()
    rows = bench.throughput(args.values, formats, args.repeats, args.seed,
                            packed=not args.no_packed, progress=progress)
    print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
    print(f"pinned to CPU {cpu}" if cpu is not None else "not pinned")
    print(bench.format_report(rows, args.values))
    if not args.no_mse:
        progress("Gaussian MSE ratios")
        nv, mx = bench.gaussian_mse_ratios(seed=args.seed)
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
        print("Gaussian MSE ratios (mean over sigma = 0.01 * 2^k, k = 3..16):")
        for name, got in (("nvfp4", nv), ("mxfp4", mx)):
            paper = bench.PAPER_RATIOS[name]
            print(f"  {name.upper()}/HiF4 = {got:.3f}   paper {paper:.2f}   "
                  f"({100 * (got / paper - 1):+.1f}%)")
    return 0
