"""Fake quantization of torch tensors with torch operations, on the tensor's own device.

Every quantizer here (HiF4, MXFP4, NVFP4 with and without its tensor scale, HiF8, BF16, and
Rollout-ResQ with each sparsifier) is written with torch operations, so it runs wherever the
tensor lives, CPU or GPU, with no copy to the host. Results are bit-identical to the NumPy
golden model (:func:`sim.formats.fake_quantize`, :func:`sim.formats.resq.corrected`,
``docs/formats.md``); ``tests/sim/rl/test_torch_quant.py`` checks every format x axis x dtype x
ResQ mode with zero tolerance. Gradients pass straight through (the straight-through
estimator): the gradient with respect to the input is the incoming gradient, unchanged.

How the torch code stays equal to the golden model:

* Every input dtype (float16, bfloat16, float32, float64) converts exactly to float64, and
  each step is the float64 operation the spec writes, in its order: torch's element-wise
  float64 add, multiply, divide and floor are IEEE operations on the CPU and on CUDA, and in
  eager mode no two of them are fused. Maxima, comparisons and products by powers of two are
  exact. (BF16 of a float16, bfloat16 or float32 tensor is torch's float32 -> bfloat16
  conversion, the same RNE as the golden model's bit rounding.)
* Powers of two and binary exponents come from the float64 bit fields. Roundings to a grid
  (BF16, E6M2, E4M3, E2M1, NVFP4's FP32 T) use add-and-subtract: with u the grid step at
  the value's binade, ``(v + 1.5 * 2^52 * u) - 1.5 * 2^52 * u`` is v rounded RNE to a
  multiple of u (the golden model's ``round_float_fast``). Output dtypes: float64 ->
  float32 is one IEEE conversion, and so is float32 -> float16 or bfloat16 for values that
  are float32 values already (HiF4, MXFP4, HiF8, BF16); other values (NVFP4, ResQ sums) are
  rounded to float16 or bfloat16 in float64 by add-and-subtract and then converted exactly,
  since torch converts float64 to those dtypes through float32, which rounds twice.
* HiF4 follows the published reference steps as written: SF = BF16(Vmax * BF16(1/7)), the
  clip, E6M2 RNE with carry, REC = BF16(1/S), the b and c comparisons, then
  ``floor(a * (REC * 2^(2-b-c)) + 0.5)`` and the minimum with 7 (the golden kernel's
  association; multiplying REC by a power of two is exact).
* Rollout-ResQ's channel50 and block32x64 sparsifiers rank float64 sums of squares taken
  sequentially (spec section 6). On the CPU ``torch.cumsum`` is that sequential sum; on other
  devices it is a loop of element-wise additions over the summed dimension (the rows, or the
  2048 positions of a tile), sequential by construction at one kernel launch per step.
* NaN results have the golden model's bit patterns: the canonical NaN for the block
  formats and for ResQ (the negative default NaN where ResQ adds +Inf and -Inf, as x86
  does); the element-wise formats pass the input NaN through where the golden model does
  (HiF8 keeps sign and payload and sets the quiet bit except for bfloat16; BF16 of bfloat16
  keeps the sign, of float64 the sign and payload).

Block formats pad a quantization axis that is not a multiple of the block with +0.0 and drop
the padding afterwards, as the golden model does. Large tensors are processed in chunks of
whole blocks (:data:`CHUNK_ELEMS`), which bounds the float64 temporaries and keeps them in
cache on the CPU. Rare cases (NaN blocks, overflow, NaN inputs) are patched afterwards: on
the CPU only when a cheap reduction finds one (``torch.where`` is slow there), on other
devices always (a check would wait for the device).
"""

import dataclasses
import math
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from hif4spec.formats import (ELEMENT_TYPES, HIF4_BF16_ONE_SEVENTH, HIF4_MICROGROUP_ELEMS,
                              HIF4_SUBGROUP_ELEMS, HIF8_OVERFLOW, NVFP4_TENSOR_SCALE_DIVISOR)
from hif4spec.formats import FORMATS as _SPECS
from hif4spec.formats import RESQ_MODES
from sim.formats.registry import golden

__all__ = [
    "FORMATS", "RESQ_MODES", "CHUNK_ELEMS", "to_numpy", "from_numpy", "fake_quantize",
    "resq_corrected", "resq_parts", "quantize_tensor", "fake_quantize_np", "resq_np",
    "TorchQuantizer", "register",
]

#: Rollout-ResQ sparsifiers (spec section 6).
#: Elements per chunk of the block quantizers, by device type (others: the "cuda" entry).
#: Chunks hold whole blocks; the results do not depend on the chunk size.
CHUNK_ELEMS = {"cpu": 1 << 16, "cuda": 1 << 24}

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
             torch.float32: torch.int32, torch.float64: torch.int64}

_F64 = torch.float64
_F64_EXP_MASK = 0x7FF0000000000000
_INF = math.inf
_NAN = math.nan


def _two_to(e):
    return 2.0 ** e


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


def _check_options(fmt, options):
    """The golden model's option check; returns NVFP4's tensor_scale flag (True default)."""
    unknown = sorted(set(options) - set(_SPECS[fmt].options))
    if unknown:
        names = ", ".join(_SPECS[fmt].options) or "none"
        raise ValueError(f"Unknown option(s) {', '.join(unknown)} for format {fmt!r} "
                         f"(accepted: {names})")
    return bool(options.get("tensor_scale", True))


def _check_axis(x, fmt, axis, resq_mode=None):
    """Non-negative axis, with the golden model's errors (0-d tensors: element formats only)."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise ValueError(f"Axis must be an integer, not {axis!r}")
    axis = int(axis)
    if x.ndim == 0:
        if resq_mode is not None:
            raise ValueError("ResQ needs an array with at least one axis, not a 0-d array")
        if _SPECS[fmt].block > 1:
            raise ValueError(f"Format {fmt!r} needs an array with at least one axis, "
                             "not a 0-d array")
        return 0
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"Axis {axis} is out of range for an array with {x.ndim} dimensions")
    return axis % x.ndim


# ------------------------------------------------------------------------------------------
# NumPy interop (the golden model is the reference of the tests and the benchmark)


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
    """The golden model's fake quantization of a NumPy array (imported lazily)."""
    from sim.formats import fake_quantize as golden

    return golden(a, fmt, axis=axis, **options)


def resq_np(a, fmt, mode, axis=-1, **options):
    """The golden model's Rollout-ResQ object for a NumPy array (imported lazily)."""
    from sim.formats.resq import resq as golden

    return golden(a, fmt, mode, axis=axis, **options)


# ------------------------------------------------------------------------------------------
# float64 building blocks


def _on_cpu(t):
    """Whether ``t`` is on the CPU. There, rare cases are found by a reduction and patched in
    place, and sequential sums are ``torch.cumsum``; elsewhere the code never waits for the
    device. (The tests replace this function to run the other path on the CPU.)"""
    return t.device.type == "cpu"


def _patch(t, mask, value):
    """``t`` with ``value`` where ``mask`` (of ``t``'s shape, or (G,) selecting rows of a
    (G, B) ``t``). On the CPU, where ``torch.where`` is slow, ``t`` (a temporary) is written
    in place and only when some entry is set; elsewhere ``torch.where``, which needs no
    host synchronization."""
    if _on_cpu(t):
        if bool(mask.any()):
            t[mask] = value
        return t
    return torch.where(mask if mask.ndim == t.ndim else mask[:, None], value, t)


def _maybe(flag):
    """Whether a rare special case needs handling: on the CPU the 0-d bool ``flag``; on
    other devices always (a check would synchronize with the host)."""
    return not _on_cpu(flag) or bool(flag)


def _pow2_floor(v):
    """2^exp2floor(v) for float64 v >= 0 from the exponent bits: 0 for zero and subnormals,
    +Inf for Inf and NaN."""
    return (v.view(torch.int64) & _F64_EXP_MASK).view(_F64)


def _exp_field(v):
    """The biased exponent field of float64 v >= 0 (int64)."""
    return v.view(torch.int64) >> 52


def _pow2(e):
    """2.0 ** e (float64) for an int64 tensor e in -1022..1023, built from bits."""
    return ((e + 1023) << 52).view(_F64)


def _round_grid(a, man_bits, emin, emax=None):
    """RNE of float64 a >= 0 to a float with ``man_bits`` fraction bits and a subnormal
    binade below 2^emin (the golden model's ``round_float_fast``); with ``emax``, values
    from 2^(emax+1) on become +Inf. NaN stays NaN. The result is exact in float64.

    The overflow is two products by powers of two: q * 2^(1023-emax) reaches 2^1024 (+Inf)
    exactly when q >= 2^(emax+1), and otherwise both products are exact.
    """
    if emax is not None:
        a = torch.clamp_max(a, _two_to(emax + 2))       # keeps the constant below finite
    c = _pow2_floor(a).clamp_min_(_two_to(emin)).mul_(1.5 * _two_to(52 - man_bits))
    q = (a + c).sub_(c)
    if emax is not None:
        q.mul_(_two_to(1023 - emax)).mul_(_two_to(emax - 1023))
    return q


def _grid_of(name):
    """(man_bits, emin, emax) of an ElementType of the spec."""
    t = ELEMENT_TYPES[name]
    emin = 1 - t.bias if t.subnormals else -t.bias
    return t.man_bits, emin, math.frexp(t.max_finite)[1] - 1


_BF16_GRID = _grid_of("BF16")
_E4M3_MAN, _E4M3_EMIN, _ = _grid_of("E4M3")
_E6M2_MAN, _E6M2_EMIN, _ = _grid_of("E6M2")
_E6M2_MIN, _E6M2_MAX = _two_to(_E6M2_EMIN), ELEMENT_TYPES["E6M2"].max_finite
_E4M3_MAX = ELEMENT_TYPES["E4M3"].max_finite
_E2M1_MAX = ELEMENT_TYPES["E2M1"].max_finite
_E8M0_BIAS = ELEMENT_TYPES["E8M0"].bias
_FP32_GRID = (23, -126, 127)
_DTYPE_GRID = {torch.float16: (10, -14, 15), torch.bfloat16: _BF16_GRID}


def _bf16(a):
    """BF16 of float64 a >= 0 (RNE, gradual underflow, overflow to +Inf), as float64."""
    return _round_grid(a, *_BF16_GRID)


def _e2m1(v):
    """RNE of float64 v >= 0 onto the E2M1 magnitudes, saturating at 6, in place (the golden
    model's ``e2m1_round_fast``: grid step clip(2^exp2floor(v), 1, 4) / 2)."""
    c = _pow2_floor(v).clamp_(1.0, 4.0).mul_(0.75 * _two_to(52))
    return v.add_(c).sub_(c).clamp_max_(_E2M1_MAX)


def _to_dtype(v, dtype, exact32):
    """float64 values ``v`` rounded once (RNE) to ``dtype``, signs and zeros kept; NaN
    entries get unspecified NaN bits (callers patch them).

    float64 -> float32 is one IEEE conversion. torch converts float64 to float16 and
    bfloat16 through float32, which would round twice, so those are rounded in float64
    first unless ``exact32`` says every value is a float32 (then float32 -> dtype is the
    one rounding).
    """
    if dtype == _F64:
        return v
    if dtype == torch.float32 or exact32:
        return v.to(torch.float32).to(dtype)
    q = torch.copysign(_round_grid(v.abs(), *_DTYPE_GRID[dtype]), v)
    return q.to(dtype)                                                   # exact


def _nan_bits(dtype, negative=False):
    """Bits (as the signed integer of the same width) of the canonical NaN of ``dtype``."""
    width = torch.finfo(dtype).bits
    bits = int(torch.tensor(_NAN, dtype=dtype).view(_INT_VIEW[dtype]).item()) % (1 << width)
    if negative:
        bits |= 1 << (width - 1)
    return bits - (1 << width) if bits >> (width - 1) else bits


def _quiet_bit(dtype):
    return 1 << {torch.float16: 9, torch.bfloat16: 6, torch.float32: 22, torch.float64: 51}[dtype]


# ------------------------------------------------------------------------------------------
# Block formats: groups (G, block) of float64 (-0.0 already +0.0) -> (values, bad)
#
# ``values`` (G, block) float64 are exact; the rows of NaN blocks (``bad``, (G,) bool) hold
# unspecified values and are overwritten by the caller.


def _hif4_groups(x):
    """HiF4 (spec section 2, steps 1-8) of groups ``x`` (G, 64)."""
    g = x.shape[0]
    micro, sub = HIF4_MICROGROUP_ELEMS, HIF4_SUBGROUP_ELEMS // HIF4_MICROGROUP_ELEMS
    a = x.abs().view(g, -1, micro)
    v16 = a.amax(-1)                                                      # step 1
    v8 = v16.view(g, -1, sub).amax(-1)
    vmax = v8.amax(-1)
    bad = ~torch.isfinite(vmax)
    sf = _bf16(vmax * HIF4_BF16_ONE_SEVENTH)                              # step 2
    s = _round_grid(sf.clamp_(_E6M2_MIN, _E6M2_MAX), _E6M2_MAN, _E6M2_EMIN)  # step 3
    rec = _bf16(torch.ones_like(s) / s)[:, None]                          # step 4
    b = ((v8 * rec) >= 4.0).to(torch.int64)                               # step 5
    b16 = b.repeat_interleave(sub, dim=1)
    c = ((v16 * rec) >= _pow2(b16 + 1)).to(torch.int64)                   # step 6
    shift = b16 + c                                                       # b + c
    m = (rec * _pow2(2 - shift))[..., None]                               # REC * 2^(2-b-c)
    d = (s[:, None] * _pow2(shift - 2))[..., None]                        # S * 2^(b+c) / 4
    k = (a * m).add_(0.5).floor_().clamp_max_(7.0)                        # step 7
    v = torch.copysign(k.mul_(d), x.view(g, -1, micro))                   # step 8
    return v.view(g, -1), bad


def _mxfp4_groups(x):
    """MXFP4 (spec section 3) of blocks ``x`` (G, 32)."""
    a = x.abs()
    amax = a.amax(-1)
    bad = ~torch.isfinite(amax)
    # X = 2^clamp(exp2floor(amax) - 2, -127, 127); zero and subnormal amax give field 0.
    e = (_exp_field(amax) - 1023 - 2).clamp_(-_E8M0_BIAS, _E8M0_BIAS)[:, None]
    q = _e2m1(a.mul_(_pow2(-e)))
    return torch.copysign(q.mul_(_pow2(e)), x), bad


def _nvfp4_groups(x, t):
    """NVFP4 (spec section 4) of blocks ``x`` (G, 16) with tensor scale ``t`` (0-d float64
    tensor)."""
    a = x.abs()
    amax = a.amax(-1)
    bad = ~torch.isfinite(amax)
    amax = torch.where(bad, 0.0, amax)
    s = _round_grid(torch.clamp_max(amax / 6.0 / t, _E4M3_MAX), _E4M3_MAN, _E4M3_EMIN)
    st = (s * t)[:, None]                                                 # exact
    q = _e2m1(a.div_(torch.where(st == 0, _INF, st)))  # a zero scale gives zero elements
    return torch.copysign(q.mul_(st), x), bad


def _tensor_scale(x, enabled):
    """NVFP4's T as a 0-d float64 tensor: float32(amax / 2688) over the finite values of
    ``x``, clamped to [2^-126, 2^127]; 1 when disabled or when that amax is 0.

    Clamping before the rounding to float32 gives the golden model's clamp after it (both
    bounds are float32 values and the rounding is monotone), and keeps the rounding normal.
    """
    if not enabled or x.numel() == 0:
        return torch.ones((), dtype=_F64, device=x.device)
    a = x.abs()
    if _maybe(~torch.isfinite(a.amax())):
        a = torch.where(torch.isfinite(a), a, 0.0)
    amax = a.amax().to(_F64)
    lo, hi = _two_to(_FP32_GRID[1]), _two_to(_FP32_GRID[2])
    t = _round_grid((amax / NVFP4_TENSOR_SCALE_DIVISOR).clamp_(lo, hi), *_FP32_GRID)
    return torch.where(amax == 0, 1.0, t)


# ------------------------------------------------------------------------------------------
# Element-wise formats: float64 -> float64 values (NaN entries unspecified)


def _hif8_values(x, wide):
    """HiF8 (spec section 5) of float64 ``x``: RHA at the binade's width, +-Inf at and above
    40960, 0 below 2^-23, no -0. ``wide``: ``x`` may hold values that are not float32."""
    a = x.abs()
    e = (_exp_field(a) - 1023).clamp_(-22, 16)          # E = -23 counts as -22
    # Mantissa width w: 3 for |E| <= 3, 2 for |E| <= 7, 1 for |E| <= 15, 0 below -15, as
    # 4 - floor(log2(|E| | 3)) (E = 16, where w would be 1, overflows to Inf anyway).
    w = 1027 - _exp_field((e.abs() | 3).to(_F64))
    shift = w - e
    q = (a * _pow2(shift)).add_(0.5).floor_().mul_(_pow2(-shift))
    if wide:
        # |x| < 2^-23 gives 0: the formula does so for float32 values, but a float64 just
        # below 2^-23 has y = 0.5 - 2^-54 and y + 0.5 rounds up to 1.
        q.mul_((a >= _two_to(-23)).to(_F64))
    if _maybe(~(q.amax() < 49152.0)):                  # overflow (or NaN) present
        q = _patch(q, a >= HIF8_OVERFLOW, _INF)
    return torch.copysign(q, x).add_(0.0)               # -0.0 -> +0.0


def _bf16_values(x, wide):
    """BF16 format of float64 ``x``: RNE with the spec's sign rule (-0.0 -> +0.0)."""
    return torch.copysign(_bf16(x.abs()), x + 0.0)


def _bf16_narrow(x):
    """BF16 values, as float32, of a float16, bfloat16 or float32 ``x``: float32 holds the
    value exactly, and torch's float32 -> bfloat16 conversion is RNE (the golden model's bit
    rounding), then exact back to float32."""
    return (x.to(torch.float32) + 0.0).to(torch.bfloat16).to(torch.float32)


def _bf16_nan_bits(xb, dtype):
    """BF16's NaN outputs: of bfloat16 the input's sign with 0x7FC0, of float16 and float32
    the canonical NaN; of float64 the default (the input quieted)."""
    if dtype == torch.bfloat16:
        return (xb & (-1 << 15)) | (_nan_bits(dtype) & 0x7FFF)        # sign | 0x7FC0
    if dtype != _F64:
        return torch.full_like(xb, _nan_bits(dtype))                   # canonical
    return None


# ------------------------------------------------------------------------------------------
# One quantizer per format


@dataclasses.dataclass(frozen=True)
class TorchQuantizer:
    """The torch quantizer of one format of :data:`sim.formats.registry` (see :func:`register`).

    ``values``: for a block format ``(groups, *t) -> (values, bad)``, groups (G, block) of
    float64 (-0.0 already +0.0) and ``t`` the tensor scale (a 0-d float64 tensor) where the
    format has one, giving exact float64 values and the NaN blocks (G,) bool; for an
    element-wise format ``(x, wide) -> values``, float64 (NaN entries unspecified; ``wide``:
    ``x`` may hold values that are not float32). ``exact32``: every dequantized value is a
    float32 value (6 significant bits at most, inside float32's range; NVFP4's e * s * T can
    carry 30). Element-wise formats only: ``narrow(x)``, the float32 values of a float16,
    bfloat16 or float32 ``x``, used instead of ``values`` for such inputs; ``nan_bits(bits,
    dtype)``, the integer bits of the outputs of NaN inputs, or None for the default (the
    canonical NaN for bfloat16, the input quieted otherwise).
    """

    values: Callable
    exact32: bool
    narrow: Callable | None = None
    nan_bits: Callable | None = None


_QUANTIZERS = {}


def register(fmt, values, exact32, narrow=None, nan_bits=None):
    """Register the torch quantizer of format ``fmt`` (a name of the golden model's
    registry; see :class:`TorchQuantizer`) and add it to :data:`FORMATS`."""
    global FORMATS
    golden(fmt)                                     # ValueError for an unknown format
    _QUANTIZERS[fmt] = TorchQuantizer(values, exact32, narrow, nan_bits)
    FORMATS = tuple(_QUANTIZERS)


register("hif4", _hif4_groups, exact32=True)
register("mxfp4", _mxfp4_groups, exact32=True)
register("nvfp4", _nvfp4_groups, exact32=False)
register("hif8", _hif8_values, exact32=True)
register("bf16", _bf16_values, exact32=True, narrow=_bf16_narrow, nan_bits=_bf16_nan_bits)
#: Formats the quantizers accept (the golden model's names), in registration order.
FORMATS = tuple(_QUANTIZERS)


def _chunk_rows(x, width):
    limit = CHUNK_ELEMS.get(x.device.type, CHUNK_ELEMS["cuda"])
    return max(1, limit // width)


def _quantized(x, fmt, axis, tensor_scale, dtype):
    """``x`` (any float dtype) quantized along ``axis`` in ``fmt``, each exact value rounded
    once to ``dtype`` (float64: the exact values). NaN entries: the canonical NaN of
    ``dtype`` for NaN blocks; unspecified bits for NaN inputs of the element formats."""
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=dtype, device=x.device)
    q = _QUANTIZERS[fmt]
    if golden(fmt).elementwise:
        flat = x.reshape(-1)
        out = torch.empty(flat.shape, dtype=dtype, device=x.device)
        step = _chunk_rows(x, 1)
        for lo in range(0, flat.numel(), step):
            src = flat[lo:lo + step]
            if q.narrow is not None and x.dtype != _F64:
                out[lo:lo + step] = q.narrow(src).to(dtype)
                continue
            v = q.values(src.to(_F64), x.dtype == _F64)
            out[lo:lo + step] = _to_dtype(v, dtype, q.exact32)
        return out.view(x.shape)
    block = _SPECS[fmt].block
    args = (_tensor_scale(x, tensor_scale),) if golden(fmt).has_tensor_scale else ()
    xm = x.movedim(axis, -1)
    n = xm.shape[-1]
    nb = -(-n // block)
    if n % block:
        xm = F.pad(xm, (0, nb * block - n))                                # +0.0
    xg = xm.reshape(-1, block)
    out = torch.empty(xg.shape, dtype=dtype, device=x.device)
    step = _chunk_rows(x, block)
    for lo in range(0, xg.shape[0], step):
        chunk = (xg[lo:lo + step].to(_F64) + 0.0).contiguous()           # -0.0 -> +0.0
        v, bad = q.values(chunk, *args)
        out[lo:lo + step] = _patch(_to_dtype(v, dtype, q.exact32), bad, _NAN)
    out = out.view(xm.shape)[..., :n]
    return out.movedim(-1, axis)


def _fake(x, fmt, axis, tensor_scale):
    """The golden model's ``fake_quantize`` in torch (no autograd)."""
    y = _quantized(x, fmt, axis, tensor_scale, x.dtype).contiguous()
    if not golden(fmt).elementwise or not _maybe(torch.isnan(x.sum())):
        return y
    # NaN inputs of the element-wise formats: the golden model passes some of them through.
    dtype, iview = x.dtype, _INT_VIEW[x.dtype]
    xb, nan = x.view(iview), torch.isnan(x)
    nan_bits = _QUANTIZERS[fmt].nan_bits
    keep = None if nan_bits is None else nan_bits(xb, dtype)
    if keep is None and dtype == torch.bfloat16:
        keep = torch.full_like(xb, _nan_bits(dtype))                   # canonical
    elif keep is None:
        keep = xb | _quiet_bit(dtype)                                  # quieted input
    return torch.where(nan, keep, y.view(iview)).view(dtype)


# ------------------------------------------------------------------------------------------
# Rollout-ResQ


def _seqsum(t, dim):
    """Float64 sum along ``dim`` taken sequentially in index order (a cumulative sum's
    last entry)."""
    if t.shape[dim] == 0:
        shape = list(t.shape)
        del shape[dim]
        return torch.zeros(shape, dtype=t.dtype, device=t.device)
    if _on_cpu(t):
        return torch.cumsum(t, dim).select(dim, -1)     # sequential in torch's CPU kernel
    return _seqsum_loop(t, dim)


def _seqsum_loop(t, dim):
    """:func:`_seqsum` as a loop of element-wise additions (any device, one launch a step)."""
    acc = t.select(dim, 0).clone()
    for i in range(1, t.shape[dim]):
        acc = acc + t.select(dim, i)
    return acc


def _rank_top(key, k):
    """Mask of the k largest entries of the 1-D ``key`` (NaN ranks as +Inf; ties: lower
    index first)."""
    key = torch.where(torch.isnan(key), _INF, key)
    order = torch.sort(-key, stable=True).indices
    mask = torch.zeros(key.shape, dtype=torch.bool, device=key.device)
    mask[order[:k]] = True
    return mask


def _keep_mask(values, mode, axis):
    """The sparsifier's keep mask over the decoded residual ``values`` (float64), as
    :func:`sim.formats.resq.keep_mask`."""
    if mode == "dense":
        return torch.ones(values.shape, dtype=torch.bool, device=values.device)
    vm = values.movedim(axis, -1)
    n = vm.shape[-1]
    if mode == "2:4":
        n4 = -(-n // 4) * 4
        key = torch.nan_to_num(vm.abs(), nan=_INF, posinf=_INF)
        key = F.pad(key, (0, n4 - n), value=-1.0)                        # padding ranks last
        key = key.reshape(*vm.shape[:-1], n4 // 4, 4)
        # stable descending order: element i is beaten by j if k_j > k_i, or k_j == k_i
        # and j < i; it is kept when fewer than two beat it
        beaten = torch.zeros(key.shape, dtype=torch.int8, device=values.device)
        for i in range(4):
            for j in range(4):
                if i != j:
                    ki, kj = key[..., i], key[..., j]
                    beaten[..., i] += (kj > ki) if j > i else (kj >= ki)
        keep = (beaten < 2).reshape(*vm.shape[:-1], n4)[..., :n]
        return keep.movedim(-1, axis)
    v2 = vm.reshape(-1, n)
    rows = v2.shape[0]
    sq = v2 * v2
    if mode == "channel50":
        keep = _rank_top(_seqsum(sq, 0), -(-n // 2)).expand(rows, n)
    else:
        tr, tc = -(-rows // 32), -(-n // 64)
        pad = F.pad(sq, (0, tc * 64 - n, 0, tr * 32 - rows))
        tiles = pad.reshape(tr, 32, tc, 64).permute(1, 3, 0, 2).reshape(32 * 64, tr * tc)
        keep_tiles = _rank_top(_seqsum(tiles, 0), -(-(tr * tc) // 2)).reshape(tr, tc)
        keep = keep_tiles.repeat_interleave(32, 0).repeat_interleave(64, 1)[:rows, :n]
    return keep.reshape(vm.shape).movedim(-1, axis)


def _resq(x, fmt, mode, axis, tensor_scale):
    """(corrected, main) in x's dtype: deq(Q(X)) + deq(S(Q(dX))) rounded once, and Q(X)."""
    # NaN bits inside do not matter: only where the NaNs are (the golden model's NaN
    # values are all canonical, and the output is patched below)
    main = _quantized(x, fmt, axis, tensor_scale, _F64)
    dx = x.to(_F64) - main
    r = _quantized(dx, fmt, axis, tensor_scale, _F64)
    if mode != "dense":
        keep = _keep_mask(r, mode, axis)
        if not golden(fmt).elementwise and _maybe(torch.isnan(r.sum())):
            keep = keep | torch.isnan(r)        # a NaN block decodes NaN whatever its codes
        # a dropped code decodes +0: clear all the bits of the dropped values
        r = (r.view(torch.int64) & -keep.to(torch.int64)).view(_F64)
    total = main + r
    out = _to_dtype(total, x.dtype, False)
    if _maybe(torch.isnan(total.sum())):
        # NaN sums: the canonical NaN, except +Inf + -Inf, where x86 gives its default NaN
        # (sign bit set); the golden model keeps that except in bfloat16, whose encoder
        # writes the canonical NaN.
        iview = _INT_VIEW[x.dtype]
        nan = torch.isnan(total)
        clash = nan & ~torch.isnan(main) & ~torch.isnan(r) & (x.dtype != torch.bfloat16)
        bits = torch.where(clash, _nan_bits(x.dtype, negative=True), _nan_bits(x.dtype))
        out = torch.where(nan, bits.to(iview), out.view(iview)).view(x.dtype)
    return out.contiguous(), _patch_nan(_to_dtype(main, x.dtype, _QUANTIZERS[fmt].exact32),
                                        main).contiguous()


def _patch_nan(y, v):
    """``y`` (a rounding of ``v``) with the canonical NaN wherever ``v`` is NaN."""
    if not _maybe(torch.isnan(v.sum())):
        return y
    return torch.where(torch.isnan(v), _NAN, y)


# ------------------------------------------------------------------------------------------
# Public functions


def quantize_tensor(x, fmt, axis=-1, **options):
    """Fake-quantize ``x`` without autograd; ``fmt=None`` returns ``x`` itself.

    Same result as :func:`fake_quantize` (torch operations on ``x``'s device).
    """
    if fmt is None:
        return x
    _check(x, fmt)
    tensor_scale = _check_options(fmt, options)
    axis = _check_axis(x, fmt, axis)
    with torch.no_grad():
        return _fake(x.detach(), fmt, axis, tensor_scale)


def resq_parts(x, fmt, mode, axis=-1, **options):
    """Rollout-ResQ without autograd: ``(corrected, main)``, both in ``x``'s dtype.

    ``corrected`` is :func:`resq_corrected`'s value; ``main`` is deq(Q(X)), equal to the
    golden model's ``resq(...).main.dequantize()``.
    """
    _check(x, fmt, mode)
    tensor_scale = _check_options(fmt, options)
    axis = _check_axis(x, fmt, axis, mode)
    with torch.no_grad():
        if x.numel() == 0:
            return torch.empty_like(x), torch.empty_like(x)
        return _resq(x.detach(), fmt, mode, axis, tensor_scale)


class _StraightThrough(torch.autograd.Function):
    """Forward: ``fn(x)``; backward: the incoming gradient, unchanged."""

    @staticmethod
    def forward(ctx, x, fn):
        return fn(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def fake_quantize(x, fmt, axis=-1, **options):
    """Quantize and dequantize ``x`` along ``axis`` in format ``fmt``; same dtype as ``x``.

    Bit-identical to :func:`sim.formats.fake_quantize` on the same data, computed with torch
    operations on ``x``'s device. The gradient is passed straight through.

    Parameters
    ----------
    x : torch.Tensor
        float16, bfloat16, float32 or float64 tensor.
    fmt : str
        One of :data:`FORMATS`.
    axis : int
        The block (reduction) axis.
    **options
        The golden model's options (NVFP4: ``tensor_scale``, default True).
    """
    _check(x, fmt)
    tensor_scale = _check_options(fmt, options)
    axis = _check_axis(x, fmt, axis)
    return _StraightThrough.apply(x, lambda t: _fake(t, fmt, axis, tensor_scale))


def resq_corrected(x, fmt, mode, axis=-1, **options):
    """Rollout-ResQ corrected activation deq(Q(X)) + deq(S(Q(dX))), in the dtype of ``x``.

    Bit-identical to ``sim.formats.resq.resq(x, fmt, mode, axis).corrected()``, computed
    with torch operations on ``x``'s device; the gradient is passed straight through.
    """
    _check(x, fmt, mode)
    tensor_scale = _check_options(fmt, options)
    axis = _check_axis(x, fmt, axis, mode)

    def fn(t):
        if t.numel() == 0:
            return torch.empty_like(t)
        return _resq(t, fmt, mode, axis, tensor_scale)[0]
    return _StraightThrough.apply(x, fn)
