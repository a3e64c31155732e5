"""A tiny decoder-only transformer policy (pre-norm, RMSNorm, GELU MLP, learned positions).

Its Linear layers are named ``qkv``, ``proj``, ``up``, ``down`` and ``lm_head`` so that
:func:`sim.rl.qlinear.default_layer_type` groups them as attn.qkv, attn.out, mlp.up,
mlp.down and lm_head.
"""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["TinyConfig", "TinyDecoder"]


class TinyConfig:
    def __init__(self, vocab, max_len, d_model=64, n_layers=2, n_heads=4, d_ff=256):
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be a multiple of n_heads {n_heads}")
        self.vocab, self.max_len = vocab, max_len
        self.d_model, self.n_layers, self.n_heads, self.d_ff = d_model, n_layers, n_heads, d_ff


class _Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln1 = nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.RMSNorm(d)
        self.up = nn.Linear(d, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        heads = lambda z: z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens):
        """Logits (b, t, vocab) for tokens (b, t)."""
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(t, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))
