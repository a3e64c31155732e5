"""How far a truncating accumulator drifts from the exact units on real activations: the
inputs of every Linear of all-MiniLM-L6-v2 or of every decoder-layer Linear of
SmolLM2-135M-Instruct (the models of ``hif4 numerics``), quantized with the layer's weight
in each format, multiplied by the exact unit (:func:`sim.dot.gemm`) and by the truncating
one (``accum="trunc"``, :func:`sim.dot.accumulate_trunc`), word for word.

Usage::

    python benchmarks/trunc_drift.py [--model minilm|smollm2] [--sentences N] [--tokens N]
                                     [--formats hif4,mxfp4,nvfp4] [--extra-bits 0,3,8]
                                     [--resq none,2:4]

MiniLM embeds the first ``--sentences`` sentences of ``hif4 numerics``' fixed set;
SmolLM2 reads the first ``--tokens`` tokens of its first evaluation window (one forward
pass, as ``hif4 numerics --model smollm2`` scores text).

The activations are captured in one fake-quantized rollout pass per format and ResQ mode
(the layer inputs as the model produces them in that precision); each Linear's GEMM then
runs through both units (NVFP4: scaled by the two tensor scales, as the GEMM result is).
Printed per format, ResQ mode and number of extra bits: the output words, how many differ
from the exact unit's and their share, the distance in FP32 units in the last place (median over
the differing words, 99th percentile and largest over all), and the relative error
``(trunc - exact) / |exact|`` (median magnitude and the mean with its sign: truncation
shrinks sums toward zero). Progress goes to stderr. Needs the ``rl`` extra (torch,
transformers, the model package).
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from sim.dot import FORMATS_DOT, RESIDUALS  # noqa: E402

FORMATS = tuple(FORMATS_DOT)
#: Model -> the option that sizes its input, and that option's default.
INPUT_SIZE = {"minilm": ("sentences", 4), "smollm2": ("tokens", 32)}


def _ordered(words):
    """FP32 words as integers in the order of their values (-0 and +0 both 0)."""
    w = words.astype(np.int64)
    mag = w & 0x7FFFFFFF
    return np.where(w >> 31 == 1, -mag, mag)


def load(model_name, count):
    """``(model, run)``: the model with its Linears converted to QuantLinear, and a function
    that runs the forward pass whose layer inputs are measured."""
    import torch

    from sim.rl.qlinear import convert_linears

    if model_name == "minilm":
        from sim.rl import minilm
        from sim.stimulus.minilm import load_minilm, load_sentences

        tokenizer, model = load_minilm()
        convert_linears(model, skip=lambda name, m: "pooler" in name)
        sentences = load_sentences(count)
        return model, lambda: minilm.embed(
            model, [tokenizer(s, return_tensors="pt") for s in sentences])
    from sim.rl import smollm2

    tokenizer, model = smollm2.load_smollm2()
    convert_linears(model, skip=lambda name, m: ".layers." not in name,
                    layer_type=smollm2.layer_type)
    ids = smollm2.eval_tokens(tokenizer, 1, count)

    def run():
        with torch.no_grad():
            model(input_ids=ids)
    return model, run


def capture(model, run, fmt, resq):
    """``[(quantized weight, quantized input, residual or None), ...]`` of every QuantLinear
    of ``model`` in one rollout pass (``run``) in ``fmt`` with ResQ ``resq``."""
    from sim.formats import quantize
    from sim.formats.resq import resq as resq_of
    from sim.rl.qlinear import Precision, QuantLinear, set_mode

    prec = Precision(weight=fmt, act=fmt, resq=resq)
    set_mode(model, "rollout", rollout=prec)
    opts = prec.options(fmt)
    seen = []

    def hook(layer, args):
        x = args[0].detach().reshape(-1, layer.in_features).double().numpy()
        seen.append((layer, x))

    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    handles = [m.register_forward_pre_hook(hook) for m in layers]
    run()
    for h in handles:
        h.remove()
    out, weights = [], {}
    for layer, x in seen:
        if id(layer) not in weights:
            w = layer.weight.detach().double().numpy()
            weights[id(layer)] = quantize(w, fmt, axis=1, **opts)
        if resq is None:
            out.append((weights[id(layer)], quantize(x, fmt, axis=1, **opts), None))
        else:
            r = resq_of(x, fmt, resq, axis=1, **opts)
            out.append((weights[id(layer)], r.main, r))
    return out


def exact_words(gemms):
    """The exact units' words of every GEMM, one flat array."""
    from sim.dot import gemm

    return np.concatenate([gemm(aq, wq, r, scaled=True).reshape(-1) for wq, aq, r in gemms])


def drift(gemms, exact, extra_bits):
    """The statistics of one configuration over all its GEMMs (``exact``: their words)."""
    from sim.dot import bits_f32, gemm

    trunc = [gemm(aq, wq, r, scaled=True, accum="trunc", extra_bits=extra_bits).reshape(-1)
             for wq, aq, r in gemms]
    e, t = exact, np.concatenate(trunc)
    ulp = np.abs(_ordered(t) - _ordered(e))
    ev, tv = bits_f32(e).astype(np.float64), bits_f32(t).astype(np.float64)
    nz = ev != 0
    rel = (tv[nz] - ev[nz]) / np.abs(ev[nz])
    differ = ulp > 0
    return {"outputs": int(e.size), "differ": float(differ.mean()), "n_differ": int(differ.sum()),
            "ulp_median": float(np.median(ulp[differ])) if differ.any() else 0.0,
            "ulp_p99": float(np.percentile(ulp, 99)), "ulp_max": int(ulp.max()),
            "rel_median": float(np.median(np.abs(rel))), "rel_mean": float(rel.mean())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("minilm", "smollm2"), default="minilm",
                   help="the model whose layer inputs are measured (default minilm)")
    p.add_argument("--sentences", type=int, default=None,
                   help="minilm: the first N sentences of hif4 numerics' fixed set "
                        "(default 4)")
    p.add_argument("--tokens", type=int, default=None,
                   help="smollm2: the first N tokens of its first evaluation window "
                        "(default 32)")
    p.add_argument("--formats", default=",".join(FORMATS))
    p.add_argument("--extra-bits", default="0,3,8",
                   help="comma-separated bits kept below FP32's 24 (default 0,3,8)")
    p.add_argument("--resq", default="none",
                   help="comma-separated ResQ modes, 'none' for plain W4A4 (default none)")
    args = p.parse_args(argv)
    formats = args.formats.split(",")
    try:
        bits = [int(b) for b in args.extra_bits.split(",")]
    except ValueError:
        p.error(f"--extra-bits must be comma-separated integers, not {args.extra_bits!r}")
    if bad := [f for f in formats if f not in FORMATS]:
        p.error(f"--formats: {bad[0]!r} is not one of {', '.join(FORMATS)}")
    from hif4spec import TRUNC_BITS_RANGE
    if bad := [b for b in bits if b not in TRUNC_BITS_RANGE]:
        p.error(f"--extra-bits: {bad[0]} is not from {TRUNC_BITS_RANGE[0]} to "
                f"{TRUNC_BITS_RANGE[-1]}")
    for model, (option, _) in INPUT_SIZE.items():
        if model != args.model and getattr(args, option) is not None:
            p.error(f"--{option} is for --model {model}")
    option, default = INPUT_SIZE[args.model]
    count = getattr(args, option)
    count = default if count is None else count
    if count < 1:
        p.error(f"--{option} must be >= 1, not {count}")
    modes = [None if m == "none" else m for m in args.resq.split(",")]
    from hif4spec import RESQ_MODES
    if bad := [m for m in modes if m is not None and m not in RESQ_MODES]:
        p.error(f"--resq: {bad[0]!r} is not one of none, {', '.join(RESQ_MODES)}")
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    rows = []
    t0 = time.monotonic()
    print(f"trunc_drift: loading {args.model}", file=sys.stderr, flush=True)
    model, run = load(args.model, count)
    for fmt in formats:
        for mode in modes:
            if mode is not None and RESIDUALS[fmt] == ("none",):
                continue                                # a unit without a residual input
            print(f"trunc_drift: capturing {fmt}{'+' + mode if mode else ''} "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            gemms = capture(model, run, fmt, mode)
            print(f"trunc_drift: {fmt} {len(gemms)} GEMMs, exact unit "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            exact = exact_words(gemms)
            for b in bits:
                print(f"trunc_drift: {fmt} {len(gemms)} GEMMs, {b} extra bits "
                      f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
                rows.append((fmt, mode or "none", b, drift(gemms, exact, b)))
    head = ("format", "resq", "extra bits", "outputs", "differ", "share", "ulp median", "ulp p99",
            "ulp max", "|rel| median", "rel mean")
    table = [head] + [(f, m, str(b), f"{d['outputs']:,}", f"{d['n_differ']:,}",
                       f"{d['differ']:.4%}",
                       f"{d['ulp_median']:g}", f"{d['ulp_p99']:g}", f"{d['ulp_max']:,}",
                       f"{d['rel_median']:.2e}", f"{d['rel_mean']:+.2e}")
                      for f, m, b, d in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for k, r in enumerate(table):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    what = (f"{count} sentences of all-MiniLM-L6-v2, every Linear" if args.model == "minilm"
            else f"{count} tokens of SmolLM2-135M-Instruct, every decoder-layer Linear")
    print(f"{what}; truncating unit vs exact unit, word for word; "
          f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
