"""``hif4 bench``: benchmarks (a measurement printed beside baselines, never a test)."""

from hif4spec import FORMATS as SPECS

from ._util import CLIError, parse_choice_list

#: The ``--formats`` choices: every format of ``hif4spec.FORMATS``.
FORMATS = tuple(SPECS)


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

    from sim.progress import progress

    # the two baselines, then fake_quantize (and quantize) per format
    jobs = 2 + len(formats) * (1 if args.no_packed else 2)
    with progress(jobs, "hif4 bench", unit="job") as bar:
        def report(text):               # called as each job starts: the one before is done
            bar.update(int(text[1:text.index("/")]) - 1 - bar.n)
            bar.set_postfix_str(text.split("] ", 1)[-1], refresh=False)

        cpu = None if args.all_cores else bench.pin_one_core()
        rows = bench.throughput(args.values, formats, args.repeats, args.seed,
                                packed=not args.no_packed, progress=report)
        bar.update(jobs - bar.n)
    print(f"pinned to CPU {cpu}" if cpu is not None else "not pinned")
    print(bench.format_report(rows, args.values))
    if not args.no_mse:
        print("hif4 bench: Gaussian MSE ratios ...", file=sys.stderr, flush=True)
        ratios = bench.gaussian_mse_ratios(seed=args.seed)
        print("Gaussian MSE ratios (mean over sigma = 0.01 * 2^k, k = 3..16):")
        base = SPECS[bench.PAPER_BASELINE].title
        for (name, paper), got in zip(bench.PAPER_RATIOS.items(), ratios):
            print(f"  {SPECS[name].title}/{base} = {got:.3f}   paper {paper:.2f}   "
                  f"({100 * (got / paper - 1):+.1f}%)")
    return 0
