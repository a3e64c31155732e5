"""Quantized ``nn.Linear`` for training and rollouts, and conversion of whole torch models.

A :class:`QuantLinear` has two precisions and a mode:

- ``train`` mode: every operand of every GEMM is fake-quantized in the training format
  (:attr:`Precision.weight` / :attr:`Precision.act` / :attr:`Precision.grad`), each along
  that GEMM's reduction axis. For ``y = x W^T`` (x: M x K, W: N x K):
  forward ``Q(x, K) Q(W, K)^T``; input gradient ``Q(dy, N) Q(W, N)``; weight gradient
  ``Q(dy, M)^T Q(x, M)``. Rollout-ResQ is never used in training.
- ``rollout`` mode (inference): the weight is fake-quantized along K (cached until the
  weight changes), the activation along K, and when :attr:`Precision.resq` is set the
  activation is replaced by its Rollout-ResQ correction (spec section 6). Gradients, if
  any are asked for, pass straight through.

The bias is added in the input's precision after the GEMM. By default (``gemm="fake"``)
fake-quantized operands are multiplied by torch's matmul in the model dtype, a
fake-quantization simulation. With ``gemm="bit-true"`` (:func:`set_gemm`) the forward GEMM of
a layer whose weight and activation share one unit format (hif4, mxfp4, nvfp4; with ResQ
hif4 and mxfp4) is the dot-product unit itself: the operands are quantized along K by the
golden model, and :func:`sim.dot.gemm`'s float32 results (NVFP4: scaled by the two tensor
scales) are computed on torch (:mod:`sim.rl.gemm_torch`); gradients are the fake
path's. ``gemm="trunc"`` is the same with units whose accumulator truncates
(``hif4spec.ACCUMS`` ``"trunc"``, :func:`sim.dot.accumulate_trunc`; numpy, slower), to see
how far such hardware drifts from the exact units.
"""

import contextlib
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from hif4spec import GEMMS, units_of_kind
from hif4spec.formats import FORMATS as _SPECS

from .torch_quant import FORMATS, RESQ_MODES, quantize_tensor, resq_parts, to_numpy

__all__ = [
    "Precision", "QuantLinear", "convert_linears", "set_mode", "set_collect_stats",
    "reset_stats", "gather_stats", "default_layer_type", "GEMMS", "set_gemm", "default_gemm",
    "RESQ_EXTRA", "clear_weight_caches", "compile_quantizers",
]

#: The quantizers the layers call: :func:`~sim.rl.torch_quant.quantize_tensor` and
#: :func:`~sim.rl.torch_quant.resq_parts`, or their ``torch.compile`` forms
#: (:func:`compile_quantizers`).
_QUANT = {"tensor": quantize_tensor, "resq": resq_parts}


def compile_quantizers(enable=True, **options):
    """Run every QuantLinear's quantizers through ``torch.compile(fn, **options)``
    (``enable=False``: eagerly again). On a GPU one eager quantization is tens of kernel
    launches; compiled, a few fused kernels. Whether the compiled quantizers stay
    bit-identical to the eager ones (and so to the golden model) on a device is checked by
    ``benchmarks/rl_gpu.py``, which compares them on the run's shapes."""
    if enable:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _QUANT["tensor"] = torch.compile(quantize_tensor, **options)
        _QUANT["resq"] = torch.compile(resq_parts, **options)
    else:
        _QUANT.update(tensor=quantize_tensor, resq=resq_parts)


#: Rollout-ResQ sparsifiers the experiments (:mod:`sim.rl.grpo`, :mod:`sim.rl.smollm2`) run
#: for some formats only, by format: the tensor-wide channel50 and block32x64 sparsifiers
#: of spec section 6, run with HiF4 (every other mode runs with every format).
RESQ_EXTRA = {"hif4": ("channel50", "block32x64")}


@dataclasses.dataclass(frozen=True)
class Precision:
    """Formats of the GEMM operands; ``None`` keeps an operand in the model dtype.

    Attributes
    ----------
    weight, act, grad : str or None
        Format of the weight, the activation (GEMM input) and, in training, the output
        gradient. One of ``hif4``, ``mxfp4``, ``nvfp4``, ``hif8``, ``bf16`` or ``None``.
    resq : str or None
        Rollout-ResQ sparsifier for the activation in rollout mode (needs ``act``):
        ``2:4``, ``dense``, ``channel50``, ``block32x64``.
    tensor_scale : bool
        NVFP4 per-tensor scale (on by default, as the spec).
    """

    weight: str | None = None
    act: str | None = None
    grad: str | None = None
    resq: str | None = None
    tensor_scale: bool = True

    def __post_init__(self):
        for field in ("weight", "act", "grad"):
            value = getattr(self, field)
            if value is not None and value not in FORMATS:
                raise ValueError(f"{field} format must be one of {', '.join(FORMATS)} or None, "
                                 f"not {value!r}")
        if self.resq is not None:
            if self.resq not in RESQ_MODES:
                raise ValueError(f"ResQ mode must be one of {', '.join(RESQ_MODES)} or None, "
                                 f"not {self.resq!r}")
            if self.act is None:
                raise ValueError("Rollout-ResQ corrects a quantized activation: set act too")

    @classmethod
    def uniform(cls, fmt):
        """Every operand (weight, activation, gradient) in ``fmt``; ``None`` for none."""
        return cls(weight=fmt, act=fmt, grad=fmt)

    def options(self, fmt):
        spec = _SPECS.get(fmt)
        return {"tensor_scale": self.tensor_scale} if spec and "tensor_scale" in spec.options \
            else {}


class _QuantGemm(torch.autograd.Function):
    """``y = Q(x) Q(W)^T`` with every backward GEMM operand quantized along its own K."""

    @staticmethod
    def forward(ctx, x2, weight, wq_k, layer, prec):
        xq = _QUANT["tensor"](x2, prec.act, 1, **prec.options(prec.act))
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.prec = layer, prec
        if layer.bit_true(prec):
            return layer.unit_gemm(x2, prec)
        return F.linear(xq, wq_k)

    @staticmethod
    def backward(ctx, gy):
        x2, weight = ctx.saved_tensors
        layer, prec = ctx.layer, ctx.prec
        g_opts = prec.options(prec.grad)
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gq = _QUANT["tensor"](gy, prec.grad, 1, **g_opts)              # (M, N) along N
            wq_n = layer.quantized_weight(prec.weight, 0, prec.options(prec.weight))
            gx = gq @ wq_n                                              # (M, K)
        if ctx.needs_input_grad[1]:
            gq = _QUANT["tensor"](gy, prec.grad, 0, **g_opts)              # along M
            xq_m = _QUANT["tensor"](x2, prec.act, 0, **prec.options(prec.act))
            gw = gq.transpose(0, 1) @ xq_m                              # (N, K)
        return gx, gw, None, None, None


class _PassThrough(torch.autograd.Function):
    """Return ``value`` in the forward pass; pass the gradient to ``x`` unchanged."""

    @staticmethod
    def forward(ctx, x, value):
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _BitTrue(torch.autograd.Function):
    """Return the unit's ``y`` in the forward pass; the gradient to ``xq`` is the fake
    path's, ``grad @ wq``."""

    @staticmethod
    def forward(ctx, xq, y, wq):
        ctx.save_for_backward(wq)
        return y.clone()

    @staticmethod
    def backward(ctx, grad):
        (wq,) = ctx.saved_tensors
        return grad @ wq.to(grad.dtype), None, None


#: Formats with a dot-product unit, which the bit-true GEMM needs.
#: Residual modes of the dot unit of each format that has one (the bit-true GEMM's formats).
_DOT_RESIDUALS = {u.fmt: u.residuals for u in units_of_kind("dot")}
BIT_TRUE_FORMATS = tuple(_DOT_RESIDUALS)
_default_gemm = "fake"


class QuantLinear(nn.Module):
    """A ``nn.Linear`` whose GEMM operands are fake-quantized (see the module docstring).

    Parameters
    ----------
    linear : nn.Linear
        The layer to wrap; its ``weight`` and ``bias`` Parameters are shared, not copied
        (optimizers and tied weights keep working).
    train, rollout : Precision
        Precisions of the two modes.
    layer_type : str
        Name used to group statistics (``attn.qkv``, ``mlp.down``, ...).

    Members
    -------
    mode : str
        ``"train"`` or ``"rollout"``.
    collect_stats : bool
        In rollout mode, count nonzero activation inputs and how many of them quantize to
        zero (``zero_main``: in Q(X); ``zero_final``: in the GEMM operand, after ResQ).
    stats : dict
    gemm : str
        One of :data:`GEMMS` (the default of :func:`set_gemm` when made).
    """

    def __init__(self, linear, train=Precision(), rollout=Precision(), layer_type="linear"):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.train_precision = train
        self.rollout_precision = rollout
        self.layer_type = layer_type
        self.mode = "train"
        self.collect_stats = False
        self.stats = {"nonzero": 0, "zero_main": 0, "zero_final": 0}
        self._wcache = {}
        self.gemm = _default_gemm

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, mode={self.mode}, "
                f"train={self.train_precision}, rollout={self.rollout_precision}")

    def quantized_weight(self, fmt, axis, options):
        """The weight fake-quantized along ``axis``, cached until the weight changes.

        A change is seen by the weight's version counter (and storage), which in-place
        updates through autograd-visible ops bump. Some do not: fused optimizers (torch's
        ``AdamW(fused=True)``, the transformers Trainer's default) write the weights
        without it, so a training loop using one calls :func:`clear_weight_caches` after
        each optimizer step.
        """
        if fmt is None:
            return self.weight.detach()
        w = self.weight
        key = (fmt, axis, tuple(sorted(options.items())))
        stamp = (w._version, w.data_ptr(), w.dtype, w.device)
        hit = self._wcache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = _QUANT["tensor"](w.detach(), fmt, axis, **options)
        self._wcache[key] = (stamp, value)
        return value

    def bit_true(self, prec):
        """Whether the forward GEMM in precision ``prec`` runs on the bit-true unit (exact or
        truncating)."""
        return (self.gemm in ("bit-true", "trunc") and prec.act in BIT_TRUE_FORMATS
                and prec.weight == prec.act
                and not (prec.resq and _DOT_RESIDUALS[prec.act] == ("none",)))

    def unit_gemm(self, x2, prec):
        """The unit's results for ``Q(x2) Q(W)^T`` (x2: M x K; with ``prec.resq`` in rollout
        mode, its residual too), in ``x2``'s dtype on its device (NVFP4: scaled by T)."""
        from sim.formats import quantize
        from sim.formats.resq import resq
        from .gemm_torch import gemm_torch, prepare

        fmt, opts = prec.act, prec.options(prec.act)
        mode = prec.resq if self.mode == "rollout" else None
        xn = to_numpy(x2.detach())
        if mode is None:
            aq, r = quantize(xn, fmt, axis=1, **opts), None
        else:
            r = resq(xn, fmt, mode, axis=1, **opts)
            aq = r.main
        w = self.weight
        if self.gemm == "trunc":
            from sim.dot import bits_f32, gemm

            key = ("trunc", fmt, tuple(sorted(opts.items())))
            stamp = (w._version, w.data_ptr(), w.dtype, w.device)
            hit = self._wcache.get(key)
            if hit is None or hit[0] != stamp:
                hit = (stamp, quantize(to_numpy(w.detach()), fmt, axis=1, **opts))
                self._wcache[key] = hit
            y = bits_f32(gemm(aq, hit[1], r, scaled=True, accum="trunc"))
            return torch.from_numpy(y).to(device=x2.device, dtype=x2.dtype)
        key = ("unit", fmt, tuple(sorted(opts.items())), r is not None)
        stamp = (w._version, w.data_ptr(), w.dtype, w.device)
        hit = self._wcache.get(key)
        if hit is None or hit[0] != stamp:
            wq = quantize(to_numpy(w.detach()), fmt, axis=1, **opts)
            hit = (stamp, prepare(wq, repeat=2 if r is not None else 1, device=x2.device))
            self._wcache[key] = hit
        y = gemm_torch(prepare(aq, r, device=x2.device), hit[1], scaled=True, as_tensor=True,
                       device=x2.device)
        return y.to(x2.dtype)

    def forward(self, x):
        if self.mode == "train":
            y = self._forward_train(x)
        elif self.mode == "rollout":
            y = self._forward_rollout(x)
        else:
            raise ValueError(f"mode must be 'train' or 'rollout', not {self.mode!r}")
        if self.bias is not None:
            y = y + self.bias
        return y

    def _forward_train(self, x):
        prec = self.train_precision
        if prec.weight is None and prec.act is None and prec.grad is None:
            return F.linear(x, self.weight)
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        wq_k = self.quantized_weight(prec.weight, 1, prec.options(prec.weight))
        if not (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            if self.bit_true(prec):
                y2 = self.unit_gemm(x2, prec)
            else:
                xq = _QUANT["tensor"](x2, prec.act, 1, **prec.options(prec.act))
                y2 = F.linear(xq, wq_k)
        else:
            y2 = _QuantGemm.apply(x2, self.weight, wq_k, self, prec)
        return y2.reshape(*lead, self.out_features)

    def _forward_rollout(self, x):
        prec = self.rollout_precision
        wq = self.quantized_weight(prec.weight, 1, prec.options(prec.weight))
        opts = prec.options(prec.act)
        if prec.act is None:
            xq = main = x.detach()
        elif prec.resq is None:
            xq = main = _QUANT["tensor"](x.detach(), prec.act, -1, **opts)
        else:
            xq, main = _QUANT["resq"](x.detach(), prec.act, prec.resq, -1, **opts)
        if self.collect_stats and prec.act is not None:
            nonzero = (x != 0) & ~torch.isnan(x)
            self.stats["nonzero"] += int(nonzero.sum())
            self.stats["zero_main"] += int((nonzero & (main == 0)).sum())
            self.stats["zero_final"] += int((nonzero & (xq == 0)).sum())
        if torch.is_grad_enabled() and x.requires_grad:
            xq = _PassThrough.apply(x, xq)
        if self.bit_true(prec):
            x2 = x.detach().reshape(-1, self.in_features)
            y = self.unit_gemm(x2, prec).reshape(*x.shape[:-1], self.out_features)
            return _BitTrue.apply(xq, y, wq)
        return F.linear(xq, wq.to(xq.dtype))


def default_layer_type(name):
    """Group a Linear by its module name: attn.qkv, attn.out, mlp.up, mlp.down, lm_head."""
    last = name.rsplit(".", 1)[-1]
    if last in ("q_proj", "k_proj", "v_proj", "qkv", "query", "key", "value", "c_attn"):
        return "attn.qkv"
    if last in ("o_proj", "out_proj", "proj", "c_proj") or name.endswith("attention.output.dense"):
        return "attn.out"
    if last in ("gate_proj", "up_proj", "up", "fc1", "c_fc") or name.endswith("intermediate.dense"):
        return "mlp.up"
    if last in ("down_proj", "down", "fc2") or name.endswith("output.dense"):
        return "mlp.down"
    if last in ("lm_head", "head"):
        return "lm_head"
    return last


def convert_linears(model, train=Precision(), rollout=Precision(), skip=None,
                    layer_type=default_layer_type):
    """Replace every ``nn.Linear`` of ``model`` (in place) by a :class:`QuantLinear`.

    Works on any ``nn.Module``, including Hugging Face ``transformers`` models. Parameters
    are shared, so an optimizer built before or after conversion sees the same tensors.

    Parameters
    ----------
    skip : callable or None
        ``skip(name, module) -> bool``: leave that Linear as it is.
    layer_type : callable
        ``layer_type(name) -> str`` for statistics.

    Returns
    -------
    list of str
        Names of the converted layers.
    """
    targets = [(name, module) for name, module in model.named_modules()
               if type(module) is nn.Linear and not (skip and skip(name, module))]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, QuantLinear(module, train, rollout, layer_type(name)))
    return [name for name, _ in targets]


def _quant_layers(model):
    return [m for m in model.modules() if isinstance(m, QuantLinear)]


def set_mode(model, mode, train=None, rollout=None):
    """Set every QuantLinear to ``mode`` ('train'/'rollout'), optionally new precisions."""
    if mode not in ("train", "rollout"):
        raise ValueError(f"mode must be 'train' or 'rollout', not {mode!r}")
    for layer in _quant_layers(model):
        layer.mode = mode
        if train is not None:
            layer.train_precision = train
        if rollout is not None:
            layer.rollout_precision = rollout
    return model


def set_gemm(model=None, gemm="fake"):
    """Set the forward GEMM (:data:`GEMMS`) of every QuantLinear of ``model``; with
    ``model=None``, the default of QuantLinears made afterwards."""
    global _default_gemm
    if gemm not in GEMMS:
        raise ValueError(f"gemm must be one of {', '.join(GEMMS)}, not {gemm!r}")
    if model is None:
        _default_gemm = gemm
        return None
    for layer in _quant_layers(model):
        layer.gemm = gemm
    return model


@contextlib.contextmanager
def default_gemm(gemm):
    """QuantLinears made inside the ``with`` block take forward GEMM ``gemm``; the default
    before the block is restored when it ends, however it ends, so one run (``hif4
    numerics --gemm trunc`` called in-process) does not change the layers of the next."""
    previous = _default_gemm
    set_gemm(None, gemm)
    try:
        yield
    finally:
        set_gemm(None, previous)


def clear_weight_caches(model):
    """Drop every QuantLinear's cached quantized weights (after weight updates that do not
    bump the version counter; see :meth:`QuantLinear.quantized_weight`)."""
    for layer in _quant_layers(model):
        layer._wcache.clear()


def set_collect_stats(model, flag=True):
    for layer in _quant_layers(model):
        layer.collect_stats = flag


def reset_stats(model):
    for layer in _quant_layers(model):
        layer.stats = {"nonzero": 0, "zero_main": 0, "zero_final": 0}


def gather_stats(model):
    """Per layer type: nonzero inputs seen and the shares that quantized to zero."""
    out = {}
    for layer in _quant_layers(model):
        entry = out.setdefault(layer.layer_type, {"nonzero": 0, "zero_main": 0, "zero_final": 0})
        for key in entry:
            entry[key] += layer.stats[key]
    for entry in out.values():
        n = entry["nonzero"]
        entry["underflow"] = entry["zero_main"] / n if n else 0.0
        entry["underflow_final"] = entry["zero_final"] / n if n else 0.0
    return out
