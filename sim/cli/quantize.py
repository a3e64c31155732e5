"""``hif4 quantize``: quantize a .npy tensor, print error statistics, write results."""

import argparse
import sys
from pathlib import Path

from hif4spec import FORMATS, RESQ_MODES

from ._util import (CLIError, check_output_file, load_npy, output_option, parse_choice_list,
                    write_files)

FORMAT_NAMES = tuple(FORMATS)
#: Formats that take ``--no-tensor-scale`` (``FormatSpec.options``).
TENSOR_SCALE_FORMATS = tuple(f for f, s in FORMATS.items() if "tensor_scale" in s.options)
MODE_NAMES = RESQ_MODES

DESCRIPTION = """\
Quantize the array in a .npy file along one axis and print error statistics of the
dequantized (fake-quantized) result against the input: MSE, SNR in dB, the share of nonzero
inputs that became zero, and the largest absolute error.

Statistics are taken over the input's own elements (the padding of a last partial block is
not counted) whose input value is finite: NaN and +-Inf inputs are excluded from every
statistic, and so are finite inputs whose result is NaN or Inf (a finite value sharing a
block with a NaN or Inf, or a HiF8 overflow); their count is printed. SNR is
10*log10(sum x^2 / sum (q - x)^2). Integer arrays are converted to float64 first.

With --resq MODE the result is the Rollout-ResQ corrected activation
deq(Q(X)) + deq(S(Q(X - deq(Q(X))))), the residual sparsified by MODE (docs/formats.md
section 6). --compare prints one row per format, without ResQ and with each ResQ mode.
Bad input exits with status 2 and one line on stderr, leaving no output file."""

EPILOG = """\
examples:
  hif4 quantize --format hif4 --input x.npy
  hif4 quantize --format nvfp4 --input x.npy --axis 0 --output xq.npy --packed xq.bin
  hif4 quantize --format hif4 --resq 2:4 --input x.npy --packed xq.bin
      (writes xq.bin and the packed 2:4 residual xq.residual.bin)
  hif4 quantize --compare --input x.npy"""


def register(subparsers):
    p = subparsers.add_parser(
        "quantize", help="quantize a .npy tensor and print error statistics",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", "-f", metavar="F",
                   help=f"format: one of {', '.join(FORMAT_NAMES)} (needed unless --compare)")
    p.add_argument("--input", "-i", metavar="X.npy",
                   help="input array saved with numpy.save: float16, float32, float64 or "
                        "integers (converted to float64); numpy.save writes bfloat16 as raw "
                        "2-byte records that cannot be told apart, so save bfloat16 data as "
                        "float32 (exact)")
    p.add_argument("--axis", "-a", type=int, default=-1, metavar="A",
                   help="quantization (reduction) axis; negative counts from the end "
                        "(default -1)")
    p.add_argument("--resq", metavar="MODE",
                   help=f"Rollout-ResQ sparsifier: one of {', '.join(MODE_NAMES)}; the "
                        "statistics and --output then describe the corrected activation. "
                        "With --compare, a comma-separated list limits the modes shown")
    p.add_argument("--no-tensor-scale", action="store_true",
                   help="nvfp4: switch the per-tensor FP32 scale off (T = 1)")
    output_option(p, "--output", "-o", kind="file", metavar="Y.npy",
                   help="write the fake-quantized (with --resq: corrected) array as .npy, "
                        "same shape and dtype as the input")
    output_option(p, "--packed", kind="file", metavar="OUT.bin",
                   help="write the packed bytes (to_bytes(), docs/formats.md section 1) of "
                        "the main quantized tensor; with --resq also the residual beside it "
                        "as OUT.residual.bin: hif4 2:4 in the 224-bit packed 2:4 layout (28 "
                        "bytes per block), mxfp4 2:4 in the packed MXFP4 2:4 layout (13 bytes "
                        "per block), otherwise the residual tensor's to_bytes() with dropped "
                        "codes 0 (nvfp4: led by the residual's own T)")
    p.add_argument("--compare", action="store_true",
                   help="print one row per format (hif4, mxfp4, nvfp4, hif8, bf16), "
                        "without ResQ and with each ResQ mode; no files are written")
    p.set_defaults(func=run)


# ------------------------------------------------------------------------------------------


def error_stats(x, q):
    """Statistics of q against x (numpy arrays of one shape), see the help text."""
    import numpy as np

    x64 = np.asarray(x, dtype=np.float64).ravel()
    q64 = np.asarray(q, dtype=np.float64).ravel()
    finite_in = np.isfinite(x64)
    ok = finite_in & np.isfinite(q64)
    xs, qs = x64[ok], q64[ok]
    err = qs - xs
    n = int(ok.sum())
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mse = float(np.mean(err * err)) if n else float("nan")
        sig = float(np.sum(xs * xs))
        noise = float(np.sum(err * err))
        if not n:
            snr = float("nan")
        elif noise == 0:
            snr = float("inf")
        elif sig == 0:
            snr = float("-inf")
        else:
            snr = 10 * np.log10(sig / noise)
    nz = xs != 0
    zeroed = float(np.mean(qs[nz] == 0)) if nz.any() else float("nan")
    return {"count": n, "excluded_in": int((~finite_in).sum()),
            "excluded_out": int((finite_in & ~ok).sum()), "mse": mse, "snr_db": snr,
            "zeroed": zeroed, "max_abs_err": float(np.max(np.abs(err))) if n else float("nan")}


def _fmt_num(v, spec):
    if v != v:
        return "n/a"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return format(v, spec)


def _check_format(name):
    if name is None:
        raise CLIError(f"--format is required (one of {', '.join(FORMAT_NAMES)}), "
                       "or give --compare")
    if name not in FORMAT_NAMES:
        raise CLIError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")
    return name


def _check_mode(name):
    if name not in MODE_NAMES:
        raise CLIError(f"unknown ResQ mode {name!r}; choose one of {', '.join(MODE_NAMES)}")
    return name


def _load(args):
    import numpy as np

    if not args.input:
        raise CLIError("--input X.npy is required")
    x = load_npy(args.input)
    if x.dtype.kind in "iub":
        x = x.astype(np.float64)
    if x.ndim == 0:
        raise CLIError(f"input {args.input!r} holds a 0-d array (a scalar); "
                       "give an array with at least one axis")
    if not -x.ndim <= args.axis < x.ndim:
        raise CLIError(f"axis {args.axis} is out of range for the input's shape {x.shape}; "
                       f"give -{x.ndim}..{x.ndim - 1}")
    return x


def _options(fmt, args):
    return ({"tensor_scale": not args.no_tensor_scale} if fmt in TENSOR_SCALE_FORMATS
            else {})


def _residual_bytes(out):
    """Packed bytes of a ResQ residual and a word on the layout used."""
    from sim.formats import golden

    g = golden(out.fmt)
    if out.mode == "2:4" and g.pack_residual is not None and g.residual_bytes is not None:
        return (g.residual_bytes(g.pack_residual(out.residual)),
                f"packed 2:4 {g.title} residual")
    return out.residual.to_bytes(), f"{out.fmt} residual tensor, dropped codes 0"


def _residual_path(path):
    path = Path(path)
    return path.with_name(f"{path.stem}.residual{path.suffix or '.bin'}")


def run(args):
    if args.compare:
        return run_compare(args)
    import numpy as np

    fmt = _check_format(args.format)
    mode = _check_mode(args.resq) if args.resq is not None else None
    if args.no_tensor_scale and fmt not in TENSOR_SCALE_FORMATS:
        raise CLIError(f"--no-tensor-scale applies to --format "
                       f"{' / '.join(TENSOR_SCALE_FORMATS)} only")
    outputs = [(option, p) for option, p in (("--output", args.output),
                                              ("--packed", args.packed)) if p]
    if mode and args.packed:
        outputs.append(("--packed (residual)", _residual_path(args.packed)))
    for option, p in outputs:           # fail before doing anything
        check_output_file(p, option)
    if len({Path(p).resolve() for _, p in outputs}) < len(outputs):
        raise CLIError("the output files must differ: "
                       + ", ".join(f"{option} {str(p)!r}" for option, p in outputs))
    x = _load(args)
    from sim.formats import FORMATS, quantize
    from sim.formats.resq import resq

    try:
        if mode:
            out = resq(x, fmt, mode, axis=args.axis, **_options(fmt, args))
            qt, y = out.main, out.corrected()
        else:
            qt = quantize(x, fmt, axis=args.axis, **_options(fmt, args))
            y = qt.dequantize()
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    st = error_stats(x, y)
    spec = FORMATS[fmt]
    what = f"ResQ {mode}" if mode else "no ResQ"
    print(f"{fmt} ({spec.bits_per_value:.2f} bits/value), axis {args.axis}, {what}: "
          f"{x.size} values, shape {x.shape}, dtype {x.dtype}")
    if st["excluded_in"] or st["excluded_out"]:
        print(f"  excluded: {st['excluded_in']} NaN/Inf inputs, {st['excluded_out']} finite "
              "inputs with a NaN/Inf result")
    print(f"  MSE        {_fmt_num(st['mse'], '.6e')}")
    print(f"  SNR        {_fmt_num(st['snr_db'], '.3f')} dB")
    print(f"  zeroed     {_fmt_num(100 * st['zeroed'], '.4f')} % of nonzero inputs")
    print(f"  max |err|  {_fmt_num(st['max_abs_err'], '.6e')}")
    blobs = []
    if args.output:
        import io

        buf = io.BytesIO()
        np.save(buf, y, allow_pickle=False)
        blobs.append((args.output, buf.getvalue(), "fake-quantized array" if not mode
                      else "corrected array"))
    if args.packed:
        blobs.append((args.packed, qt.to_bytes(), f"packed {fmt} tensor"))
        if mode:
            data, word = _residual_bytes(out)
            blobs.append((str(_residual_path(args.packed)), data, word))
    write_files([(path, data) for path, data, _ in blobs])
    for path, data, word in blobs:
        print(f"wrote {path} ({len(data)} bytes, {word})")
    return 0


def run_compare(args):
    for name in ("output", "packed"):
        if getattr(args, name):
            raise CLIError(f"--{name} cannot be used with --compare")
    if args.format is not None:
        raise CLIError("--format cannot be used with --compare (it shows every format)")
    modes = list(MODE_NAMES)
    if args.resq is not None:
        modes = parse_choice_list(args.resq, MODE_NAMES, "ResQ mode")
    x = _load(args)
    from sim.formats import FORMATS, quantize
    from sim.formats.resq import resq

    from sim.progress import progress

    rows = []
    jobs = [(f, m) for f in FORMAT_NAMES for m in [None] + modes]
    bar = progress(len(jobs), "hif4 quantize", enabled=sys.stderr.isatty(), unit="row")
    for fmt, mode in jobs:
        bar.set_postfix_str(f"{fmt} {mode or 'none'}", refresh=False)
        opts = _options(fmt, args)
        try:
            if mode:
                y = resq(x, fmt, mode, axis=args.axis, **opts).corrected()
            else:
                y = quantize(x, fmt, axis=args.axis, **opts).dequantize()
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        rows.append((fmt, mode or "none", FORMATS[fmt].bits_per_value, error_stats(x, y)))
        bar.update()
    bar.close()
    print(f"input {args.input}: {x.size} values, shape {x.shape}, dtype {x.dtype}, "
          f"axis {args.axis}")
    head = (f"{'format':<7} {'resq':<11} {'bits':>5} {'MSE':>13} {'SNR dB':>9} "
            f"{'zeroed %':>9} {'max |err|':>13} {'excluded':>8}")
    print(head)
    print("-" * len(head))
    for fmt, mode, bits, st in rows:
        excl = st["excluded_in"] + st["excluded_out"]
        print(f"{fmt:<7} {mode:<11} {bits:>5.2f} {_fmt_num(st['mse'], '13.6e'):>13} "
              f"{_fmt_num(st['snr_db'], '9.3f'):>9} {_fmt_num(100 * st['zeroed'], '9.4f'):>9} "
              f"{_fmt_num(st['max_abs_err'], '13.6e'):>13} {excl:>8}")
    print("bits: bits per value of the main format; a ResQ residual adds its own storage "
          "(2:4 HiF4 packed: 3.5, dense: the format's bits again).")
    return 0
