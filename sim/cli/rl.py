"""``hif4 rl``: the GRPO precision-matrix experiment (BF16 / HiF4 / MXFP4 / NVFP4 rollouts,
BF16 or FP4 training, Rollout-ResQ) on a tiny transformer learning addition."""

import sys
from pathlib import Path

from ._util import CLIError, check_output_file, output_option, parse_choice_list, write_files

FP4_FORMATS = ("hif4", "mxfp4", "nvfp4")


def register(subparsers):
    p = subparsers.add_parser(
        "rl", help="GRPO experiment: FP4 rollouts/training with and without Rollout-ResQ",
        description="Supervised warm-up of a tiny decoder-only transformer on fixed-width "
                    "addition (once per seed), then GRPO (group-normalised advantages, clipped "
                    "ratio, token-level truncated importance weight 5) in every configuration "
                    "of the precision matrix: training BF16 or FP4 x rollout BF16, W4A16, "
                    "W16A4, W4A4 per format, FP4 W4A4 rollouts with Rollout-ResQ. Prints a "
                    "table (accuracy, gap to BF16, rollout-train mismatch, activation underflow "
                    "per layer type); progress goes to stderr.")
    p.add_argument("--quick", action="store_true",
                   help="smoke run, not a result: tiny settings (2-digit addition, 3 GRPO "
                        "steps, one seed), every configuration in a few minutes; used by the "
                        "test suite")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds (default: 0 with --quick, else 0,1,2)")
    p.add_argument("--formats", default=",".join(FP4_FORMATS),
                   help="comma-separated FP4 formats to include (default: all of "
                        "hif4,mxfp4,nvfp4)")
    p.add_argument("--steps", type=int, default=None, help="override the number of GRPO steps")
    p.add_argument("--warmup-steps", type=int, default=None,
                   help="override the number of supervised warm-up steps")
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes running configurations in parallel (default 1)")
    p.add_argument("--gemm", choices=("fake", "bit-true"), default="fake",
                   help="forward GEMM of the FP4 layers: fake (torch matmul of fake-quantized "
                        "operands, default) or bit-true (the dot-product unit's float32 "
                        "results, sim.dot.gemm's torch backend; NVFP4 with ResQ has no unit "
                        "and stays fake). Default fake: measured on --quick, bit-true takes "
                        "1.8x the wall time (106 s vs 59 s) for the same accuracies; its logits "
                        "equalled fake's for HiF4 and MXFP4 (K of 64 and 256: one to four "
                        "steps) and were within 3.3e-6 for NVFP4")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (default 1; tiny GEMMs gain nothing from more)")
    output_option(p, "--json", kind="file", metavar="FILE",
                  help="write the full results (per run and summary) as JSON")
    output_option(p, "--plot", kind="file", metavar="FILE.png",
                  help="write accuracy vs step per configuration as a PNG plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _int_list(text, what):
    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise CLIError(f"{what} must be comma-separated integers, not {text!r}") from None
    if not values:
        raise CLIError(f"empty {what} list")
    if len(set(values)) != len(values):
        raise CLIError(f"{what} repeat a value: {text!r}")
    return values


def sweep_runner(jobs, cluster=None, retries=0):
    """The ``run_tasks`` of :func:`sim.rl.grpo.run_experiment` on :func:`sim.sweep.run_tasks`:
    ``jobs`` local processes, or Ray tasks at ``cluster``; a task that fails is run again up
    to ``retries`` times, and one that still fails raises ``RuntimeError`` naming it."""
    from sim import sweep

    def run_tasks(tasks, on_result):
        report = sweep.run_tasks([sweep.Task(name, "rl", fn, args) for name, fn, args in tasks],
                                 lambda task, value: on_result(task.args, value),
                                 cluster=cluster, jobs=jobs, retries=retries, progress=False,
                                 desc="hif4 rl")
        if report.failed:
            raise RuntimeError("runs failed: " + "; ".join(
                f"{name} ({why})" for name, why in report.failed.items()))

    return run_tasks


def run(args):
    import dataclasses
    import json

    for name in ("steps", "warmup_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise CLIError(f"--{name.replace('_', '-')} must be >= 1, not {value}")
    if args.jobs < 1 or args.threads < 1:
        raise CLIError("--jobs and --threads must be >= 1")
    formats = parse_choice_list(args.formats, FP4_FORMATS, "format")
    seeds = _int_list(args.seeds or ("0" if args.quick else "0,1,2"), "seeds")
    if args.plot and not args.plot.endswith(".png"):
        raise CLIError(f"--plot writes PNG: give a file name ending in .png, not {args.plot!r}")
    for option in ("json", "plot"):
        if getattr(args, option):
            check_output_file(getattr(args, option), f"--{option}")
    if args.json and args.plot and Path(args.json).resolve() == Path(args.plot).resolve():
        raise CLIError(f"--json and --plot name the same file {args.json!r}")

    from sim.rl import grpo

    settings = grpo.QUICK if args.quick else grpo.FULL
    if args.steps is not None:
        settings = dataclasses.replace(settings, steps=args.steps,
                                       eval_every=min(settings.eval_every, args.steps))
    if args.warmup_steps is not None:
        settings = dataclasses.replace(settings, warmup_steps=args.warmup_steps)
    settings = dataclasses.replace(settings, gemm=args.gemm)
    configs = grpo.build_configs(formats=formats)
    results = grpo.run_experiment(settings, configs, seeds, progress=not args.quiet,
                                  threads=args.threads,
                                  run_tasks=sweep_runner(args.jobs) if args.jobs > 1 else None)
    wall = results.pop("wall_s")
    if args.quick:
        print(f"SMOKE RUN (--quick: {settings.steps} GRPO steps, {len(seeds)} seed(s), tiny "
              "model): this table shows that every configuration runs, it is not a result; "
              "run without --quick for the experiment")
    sys.stdout.write(grpo.format_table(results))
    print(f"hif4 rl: {len(configs)} configurations x {len(seeds)} seed(s) in {wall:.0f} s",
          file=sys.stderr)
    outputs = []
    if args.json:
        outputs.append((args.json, (json.dumps(results, indent=1, sort_keys=False) + "\n")
                        .encode()))
    if args.plot:
        import io

        buffer = io.BytesIO()
        grpo.plot_curves(results, buffer)
        outputs.append((args.plot, buffer.getvalue()))
    write_files(outputs)
    return 0
