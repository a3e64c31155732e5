"""Fake quantization of torch tensors through the NumPy golden model.

Every function here converts the tensor to NumPy (bfloat16 through ``ml_dtypes``, without
changing a bit), calls the golden model (:func:`sim.formats.fake_quantize`,
:func:`sim.formats.resq.resq`) and converts back, so the result is bit-identical to the
golden model by construction; ``tests/test_torch_quant.py`` checks it with zero tolerance.
Gradients pass straight through (the straight-through estimator): the gradient with respect
to the input is the incoming gradient, unchanged.

The golden model is NumPy on the CPU; a tensor on another device is copied to the CPU and
the result copied back.
"""

import numpy as np
import torch

__all__ = [
    "FORMATS", "RESQ_MODES", "to_numpy", "from_numpy", "fake_quantize", "resq_corrected",
    "fake_quantize_np", "resq_np", "quantize_tensor",
]

#: Formats the adapters accept (the golden model's names).
FORMATS = ("hif4", "mxfp4", "nvfp4", "hif8", "bf16")
#: Rollout-ResQ sparsifiers (spec section 6).
RESQ_MODES = ("2:4", "dense", "channel50", "block32x64")

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check(x, fmt, resq_mode=None):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of float16, bfloat16, float32, float64, "
                         f"not {x.dtype}")
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if resq_mode is not None and resq_mode not in RESQ_MODES:
        raise ValueError(f"ResQ mode must be one of {', '.join(RESQ_MODES)}, "
                         f"not {resq_mode!r}")


def to_numpy(x):
    """Copy a torch tensor to a NumPy array of the same dtype, bits unchanged.

    ``torch.bfloat16`` becomes ``ml_dtypes.bfloat16``.
    """
    x = x.detach().cpu().contiguous()
    if x.dtype == torch.bfloat16:
        import ml_dtypes

        return x.view(torch.int16).numpy().copy().view(ml_dtypes.bfloat16)
    return x.numpy().copy()


def from_numpy(a, device=None):
    """Inverse of :func:`to_numpy`: a NumPy array (float or ml_dtypes bfloat16) to torch."""
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a.copy())
    return t if device is None else t.to(device)


def fake_quantize_np(a, fmt, axis=-1, **options):
    """The golden model's fake quantization (imported lazily)."""
    from sim.formats import fake_quantize as golden

    return golden(a, fmt, axis=axis, **options)


def resq_np(a, fmt, mode, axis=-1, **options):
    """The golden model's Rollout-ResQ object (imported lazily)."""
    from sim.formats.resq import resq as golden

    return golden(a, fmt, mode, axis=axis, **options)


def _bf16_float32(x):
    """BF16 of a float32 tensor in torch: RNE with gradual underflow and overflow to Inf
    (torch's conversion), -0.0 -> +0.0 and every NaN -> 0x7FC00000, as the golden model
    does (spec section 1). ``tests/test_torch_quant.py`` checks it bit for bit."""
    y = x.to(torch.bfloat16).to(torch.float32)
    y = torch.where(x == 0, torch.zeros((), dtype=x.dtype, device=x.device), y)
    return torch.where(torch.isnan(x), torch.full((), float("nan"), dtype=x.dtype,
                                                  device=x.device), y)


def quantize_tensor(x, fmt, axis=-1, **options):
    """Fake-quantize ``x`` without autograd; ``fmt=None`` returns ``x`` itself.

    BF16 of a float32 tensor takes a torch-native path (no NumPy round trip); every other
    case calls the golden model.
    """
    if fmt is None:
        return x
    if fmt == "bf16" and x.dtype == torch.float32:
        return _bf16_float32(x.detach())
    out = fake_quantize_np(to_numpy(x), fmt, axis, **options)
    return from_numpy(out, x.device)


class _FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fmt, axis, resq_mode, options):
        if resq_mode is None:
            return quantize_tensor(x, fmt, axis, **options)
        out = resq_np(to_numpy(x), fmt, resq_mode, axis, **options).corrected()
        return from_numpy(out, x.device)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None, None


def fake_quantize(x, fmt, axis=-1, **options):
    """Quantize and dequantize ``x`` along ``axis`` in format ``fmt``; same dtype as ``x``.

    Bit-identical to :func:`sim.formats.fake_quantize` on the same data. The gradient is
    passed straight through.

    Parameters
    ----------
    x : torch.Tensor
        float16, bfloat16, float32 or float64 tensor.
    fmt : str
        One of :data:`FORMATS`.
    axis : int
        The block (reduction) axis.
    **options
        Passed to the golden model (NVFP4: ``tensor_scale``).
    """
    _check(x, fmt)
    return _FakeQuantize.apply(x, fmt, axis, None, options)


def resq_corrected(x, fmt, mode, axis=-1, **options):
    """Rollout-ResQ corrected activation deq(Q(X)) + deq(S(Q(dX))), in the dtype of ``x``.

    Bit-identical to ``sim.formats.resq.resq(x, fmt, mode, axis).corrected()``; the gradient
    is passed straight through.
    """
    _check(x, fmt, mode)
    return _FakeQuantize.apply(x, fmt, axis, mode, options)
