"""HiF4 (HiFloat4), spec section 2: 64 elements, E6M2 + 8 L2 bits + 16 L3 bits + S1P2.

Group-level functions take a 2-D array ``(G, 64)`` of groups; :mod:`sim.formats.tensor`
does the reshaping, padding and chunking.

How the fast kernel stays equal to the spec's steps
(``tests/sim/formats/test_formats_spec.py`` checks
it against a plain per-group transcription, bit for bit):

* Layout. A chunk of groups is transposed to ``(4, 16, G)`` (element in micro-group,
  micro-group, group) so that every per-group and per-micro-group quantity is a contiguous
  row of length G and every element operation is a long contiguous loop.
* Steps 2-4. The E6M2 code is a non-decreasing function of Vmax (a product by a positive
  constant, BF16 RNE, a clip and an E6M2 RNE are each monotone), so it equals the number of
  thresholds ``_SCALE_THRESHOLDS[c] = min{v : code(v) > c}`` not above Vmax. The thresholds
  are found once by bisection over float64 bit patterns with the plain step 2-3 code and
  checked at import (``code(t) = c + 1`` and ``code(prev(t)) = c``). REC = BF16(1/S) is a
  table over the code.
* Steps 5-6. b is ``V8 * REC >= 4`` as written. ``(V16 * REC) * 2^-b >= 2`` equals
  ``V16 * REC >= 2^(1+b)``: scaling by 2^-b is exact unless the product is subnormal,
  where both sides are false.
* Step 7. ``(a * REC) * 2^(2-b-c)`` equals ``a * (REC * 2^(2-b-c))``: the power of two only
  moves the exponent, so both round the same real product the same way unless ``a * REC``
  is subnormal, where y < 2^-1020 and k = 0 either way. For float32 (and narrower) inputs
  the product is exact (24 + 8 bits). Then ``t = y + 0.5``, floor and min 7 in float64,
  exactly as written.
* Dequantization ``k * S * 2^(b+c) / 4`` is exact in float64 and representable in float32
  (6 significant bits, magnitudes 2^-50..2^19), so the float64 product is written straight
  into a float32 buffer; other output dtypes get one RNE from that exact value.
* Step 8 / sign rule: the sign is copied from ``x + 0.0`` (which turns -0.0 into +0.0).
"""

import threading

import numpy as np

from .codecs import E6M2_VALUES, HIF4_REC, S1P2_VALUES, bf16_round, encode_e6m2
from hif4spec.formats import FORMATS, HIF4_BF16_ONE_SEVENTH

SPEC = FORMATS["hif4"]
NAN_SCALE = SPEC.nan_scale_code


def scale_code_plain(vmax):
    """Steps 2-3 as written: E6M2 code of SF = BF16(Vmax * BF16(1/7)) (clipped)."""
    with np.errstate(over="ignore"):
        return encode_e6m2(bf16_round(np.asarray(vmax, dtype=np.float64)
                                      * HIF4_BF16_ONE_SEVENTH))


def _scale_thresholds():
    target = np.arange(1, 255)
    lo = np.zeros(254, dtype=np.int64)                        # bits of +0.0
    hi = np.full(254, np.float64(1e300).view(np.int64))       # code 254 well before this
    for _ in range(64):
        mid = lo + (hi - lo) // 2
        ge = scale_code_plain(mid.view(np.float64)) >= target
        hi = np.where(ge, mid, hi)
        lo = np.where(ge, lo, mid)
    thr = hi.view(np.float64)
    assert np.array_equal(scale_code_plain(thr), target)
    assert np.array_equal(scale_code_plain(np.nextafter(thr, 0.0)), target - 1)
    return thr


#: ``_SCALE_THRESHOLDS[c]``: the least float64 Vmax whose E6M2 code exceeds c.
_SCALE_THRESHOLDS = _scale_thresholds()
# Per (code, shift = b + c): multiplier REC * 2^(2 - shift) and dequantization unit
# S * 2^shift / 4, indexed by 3 * code + shift. Code 255 (NaN) gives NaN.
_M_TABLE = (HIF4_REC[:, None] * np.array([4.0, 2.0, 1.0])).ravel()
_D_TABLE = (E6M2_VALUES[:, None] * np.array([0.25, 0.5, 1.0])).ravel()


def scale_codes(vmax):
    """E6M2 codes of group maxima (any float array; NaN/Inf give 0xFF)."""
    vmax = np.asarray(vmax)
    code = np.searchsorted(_SCALE_THRESHOLDS, vmax, side="right").astype(np.uint8)
    return np.where(np.isfinite(vmax), code, np.uint8(NAN_SCALE))


class _Workspace:
    """Preallocated kernel buffers for up to ``gmax`` groups of one dtype.

    Reusing them across chunks avoids fresh allocations per chunk, which the C allocator
    tends to return to the OS and fault in again (that alone cost over half the run time).
    ``views(g)`` gives C-contiguous views for g <= gmax groups.
    """

    def __init__(self, gmax, dtype):
        self.gmax = gmax
        self.dtype = dtype
        self._buf = {
            "xt": (64, dtype), "a": (64, dtype), "vt": (64, dtype), "k": (64, np.float64),
            "v16": (16, dtype), "v8": (8, dtype), "v4": (4, dtype), "v2": (2, dtype),
            "vmax": (1, dtype), "rec": (1, np.float64), "bad": (1, np.bool_),
            "t8": (8, np.float64), "b": (8, np.bool_), "v16r": (16, np.float64),
            "c": (16, np.bool_), "sh": (16, np.int8), "idx": (16, np.intp),
            "m": (16, np.float64), "d": (16, np.float64),
        }
        self._buf = {k: np.empty(n * gmax, dtype=t) for k, (n, t) in self._buf.items()}
        self._views = {}

    def views(self, g):
        v = self._views.get(g)
        if v is None:
            if len(self._views) > 4:
                self._views.clear()
            v = self._views[g] = self._make_views(g)
        return dict(v)

    def _make_views(self, g):
        shapes = {"xt": (4, 16, g), "a": (4, 16, g), "vt": (4, 16, g), "k": (4, 16, g),
                  "v16": (16, g), "v8": (8, g), "v4": (4, g), "v2": (2, g), "vmax": (g,),
                  "rec": (g,), "bad": (g,), "t8": (8, g), "b": (8, g), "v16r": (16, g),
                  "c": (16, g), "sh": (16, g), "idx": (16, g), "m": (16, g), "d": (16, g)}
        return {k: self._buf[k][:int(np.prod(v))].reshape(v) for k, v in shapes.items()}


_LOCAL = threading.local()


def _workspace(g, dtype):
    key = np.dtype(dtype).str
    cache = getattr(_LOCAL, "work", None)
    if cache is None:
        cache = _LOCAL.work = {}
    work = cache.get(key)
    if work is None or work.gmax < g:
        work = cache[key] = _Workspace(max(g, 64), np.dtype(dtype))
    return work.views(g)


def _kernel(x):
    """Steps 1-7 on a chunk ``x`` (G, 64) of float32 or float64.

    Returns a dict of workspace views: ``xt`` the input transposed to (4, 16, G) with -0.0
    turned into +0.0, ``k`` (4, 16, G) float64 holding k_i, ``code`` (G,) intp E6M2 codes
    (meaningless for NaN groups), ``b`` (8, G) bool, ``sh`` (16, G) b + c, ``idx``
    3 * code + sh, ``bad`` (G,) NaN/Inf groups, and scratch. Valid until the next call.
    """
    g = x.shape[0]
    w = _workspace(g, x.dtype)
    xt, a, v16, v8, v4, v2, vmax = (w[n] for n in ("xt", "a", "v16", "v8", "v4", "v2",
                                                   "vmax"))
    np.add(x.reshape(g, 16, 4).transpose(2, 1, 0), x.dtype.type(0), out=xt)
    np.abs(xt, out=a)
    np.maximum(a[0], a[1], out=v16)                                            # step 1
    np.maximum(v16, a[2], out=v16)
    np.maximum(v16, a[3], out=v16)
    np.maximum(v16[0::2], v16[1::2], out=v8)
    np.maximum(v8[0::2], v8[1::2], out=v4)
    np.maximum(v4[0::2], v4[1::2], out=v2)
    np.maximum(v2[0], v2[1], out=vmax)
    code = np.searchsorted(_SCALE_THRESHOLDS, vmax, side="right")             # steps 2-3
    np.isfinite(vmax, out=w["bad"])
    np.logical_not(w["bad"], out=w["bad"])
    rec = np.take(HIF4_REC, code, out=w["rec"], mode="clip")                   # step 4
    b, t8 = w["b"], w["t8"]
    np.multiply(v8, rec, out=t8)
    np.greater_equal(t8, 4.0, out=b)                                           # step 5
    np.multiply(b, 2.0, out=t8)                                                # 2^(1+b)
    t8 += 2.0
    np.multiply(v16, rec, out=w["v16r"])
    c = w["c"]
    np.greater_equal(w["v16r"].reshape(8, 2, g), t8[:, None, :],
                     out=c.reshape(8, 2, g))                                   # step 6
    sh = w["sh"]
    np.add(c.view(np.int8).reshape(8, 2, g), b.view(np.int8)[:, None, :],
           out=sh.reshape(8, 2, g))
    idx = w["idx"]
    np.multiply(code, 3, out=idx)
    np.add(idx, sh, out=idx)
    k = w["k"]
    np.take(_M_TABLE, idx, out=w["m"], mode="clip")
    np.multiply(a, w["m"], out=k)                                              # step 7
    k += 0.5
    np.floor(k, out=k)
    np.minimum(k, 7.0, out=k)
    w["code"] = code
    return w


def _as_kernel_input(x):
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def fake_quantize_groups(x, out):
    """Write the dequantized HiF4 values of groups ``x`` (G, 64) into ``out`` (G, 64), any
    supported dtype, each exact value rounded once to ``out.dtype``."""
    x = _as_kernel_input(x)
    g = x.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        w = _kernel(x)
        vt = w["vt"]
        np.take(_D_TABLE, w["idx"], out=w["d"], mode="clip")
        np.multiply(w["k"], w["d"], out=vt, casting="same_kind")
        np.copysign(vt, w["xt"], out=vt)
    bad = w["bad"]
    if bad.any():
        vt[:, :, bad] = np.nan
    dst = out.reshape(g, 16, 4).transpose(2, 1, 0)
    if out.dtype == vt.dtype or out.dtype in (np.float16, np.float32, np.float64):
        np.copyto(dst, vt, casting="unsafe")          # exact value -> one RNE rounding
    else:                                             # bfloat16: ml_dtypes RNE from float32
        np.copyto(dst, vt.astype(out.dtype))


def quantize_groups(x):
    """Quantize groups ``x`` (G, 64) of any float dtype; returns the HiF4 fields."""
    x = _as_kernel_input(x)
    g = x.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        w = _kernel(x)
        xt, code, b, sh, bad = w["xt"], w["code"], w["b"], w["sh"], w["bad"].copy()
        k = np.where(bad, 0.0, w["k"]).astype(np.uint8)
    s = (xt < 0).view(np.uint8) << 3
    elem = np.ascontiguousarray((k | s).transpose(2, 1, 0)).reshape(g, 64)
    l2 = b.T.astype(np.uint8)
    l3 = (sh.T - np.repeat(l2, 2, axis=1)).astype(np.uint8)
    scale = code.astype(np.uint8)
    if bad.any():
        elem[bad] = 0
        l2[bad] = 0
        l3[bad] = 0
        scale[bad] = NAN_SCALE
    return {"elem": elem, "l3": l3, "l2": l2, "scale": scale}


def dequantize_groups(fields):
    """Exact float64 values (G, 64) of HiF4 fields (NaN for a NaN scale)."""
    elem, l3, l2, scale = fields["elem"], fields["l3"], fields["l2"], fields["scale"]
    g = elem.shape[0]
    s = E6M2_VALUES[scale]
    e = (np.repeat(l2, 2, axis=-1).astype(np.int32) + l3)                  # (G, 16)
    mg = np.ldexp(s[:, None], e)                                           # S * 2^(b+c)
    v = S1P2_VALUES[elem].reshape(g, 16, 4) * mg[:, :, None]
    return v.reshape(g, 64)
