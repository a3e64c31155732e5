"""The bit-true GEMM of :func:`sim.dot.gemm` on torch: the same FP32 words at BLAS speed.

:func:`gemm_torch` takes the arguments of :func:`sim.dot.gemm` (and a torch ``device``) and
returns the words of its exact path bit for bit (``tests/sim/rl/test_gemm_torch.py``
compares them with zero tolerance) by splitting the unit's arithmetic (``docs/formats.md``
section 7) in two:

Step values by batched matmuls
------------------------------
A step's value is a sum of block product sums. Every dequantized element is
``int * sig * 2**e`` (integer, scale significand and exponent: :func:`sim.dot.operand_terms`),
so every product, and every partial sum of one step, is a multiple of ``2**bot`` with
``bot`` the smallest ``e_a + e_w`` of the step's nonzero terms, and is bounded by the sum of
the absolute products, below ``2**top`` with ``top = max(top_a + top_w) + ceil(log2(n*T))``
(``top_a``: bit length of the block's largest ``|int * sig|`` plus ``e_a``; ``n`` elements
per block, ``T`` terms per step). If ``top - bot <= p`` every partial sum has at most ``p``
significant bits, so a matmul in a float type of precision ``p`` forms the step value
exactly, in any summation order and with or without FMA (absent underflow and overflow).
The window is bounded per row of A plus per column of W (each side's spread of ``top`` and
``bot`` over its nonzero blocks), so the test costs nothing per output:

- ``top - bot <= 24`` and the values, products and sums inside float32's normal range: the
  step value is an exact float32 (HiF4 without residual always: 8 + 8 + 6 = 22 bits;
  MXFP4 when the two blocks' scales differ by at most 10 binades in total). The
  accumulation ``acc = RNE_FP32(acc + v)`` is then one IEEE float32 addition, which *is*
  the single rounding of the exact sum.
- ``top - bot <= 53``: the step value is an exact float64 (HiF4 with residual, NVFP4's four
  blocks, MXFP4 with scales up to 2**+-127). The sum ``acc + v`` of two float64 values is
  split error-free (TwoSum: ``s + e == acc + v`` exactly; exponents stay far inside
  float64's range, so TwoSum is exact), ``s`` is rounded to odd at 53 bits (its last bit
  set towards ``e`` where ``e != 0`` and that bit is clear), and the float64 -> float32
  conversion rounds once to nearest even. Rounding to odd at ``53 >= 24 + 2`` bits followed
  by one RNE to 24 bits equals the direct RNE (Boldo and Melquiond, "When double rounding
  is odd"); FP32 subnormal results round on a coarser grid, where the argument holds a
  fortiori, and overflow goes to +-Inf by the same rounding.
- Outputs whose window exceeds 53 bits in a step (scales hundreds of binades apart inside
  one step) are finished for that step by :func:`sim.dot.accumulate` on exact integer
  terms, and the chain goes on in torch.

NaN scales make a whole output row or column NaN (a NaN step keeps the accumulator NaN to
the end); their blocks are zeroed and the words set to ``0x7FC00000`` at the end. Signed
zeros: an exact zero sum gives +0 in IEEE addition except ``-0 + -0``; the accumulator can
only be -0 after a nonzero sum rounded to zero, which needs a term below ``2**-149``, and
then step values are normalized (``v + 0``) so that ``-0 + v`` is ``+0`` for ``v == 0``,
as in the unit.

Matmuls run with float32 matmul precision "highest" (no TF32 or BF16 shortcuts; restored
afterwards). The accumulation runs over row chunks of at most ``_CPU_CELLS`` outputs on CPU
(one thread per elementwise op: torch splits larger ones across threads, which on a busy
machine costs more than it gains) and larger chunks on other devices.
"""

import contextlib
import functools
import math

import numpy as np
import torch

from hif4spec import FORMATS
from sim import dot
from sim.formats.registry import golden

__all__ = ["gemm_torch", "prepare"]

_F32_BITS = 24
_F64_BITS = 53
_F32_MIN_EXP = -126             # smallest normal float32 exponent
_F32_MAX_EXP = 127              # values below 2**127 (sums below 2**128 cannot overflow)
_F32_SUB_EXP = -149             # below this a nonzero sum can round to a signed zero
_CPU_CELLS = 1 << 15            # outputs per chunk on CPU (torch's grain size)
_DEV_CELLS = 1 << 22
_NONE = np.iinfo(np.int64).min // 4     # "no nonzero block" for maxima
_ALL = np.iinfo(np.int64).max // 4      # ... and for minima


class Operand:
    """One GEMM operand prepared for :func:`gemm_torch`: (rows, K) as per-step terms.

    Built by :func:`prepare`; holds the exact values on the device and, per block, the
    exponent bounds the path choice needs.

    Members
    -------
    fmt : str
    rows, steps, terms, n : int
        Rows, steps, terms per step (blocks; twice that with a residual) and elements per
        block.
    sig, exp : int64 ndarray (rows, steps, terms)
        Scale significand and the exponent of the elements' unit (value = int * sig *
        2**exp, :func:`sim.dot.operand_terms`).
    ints : float32 ndarray (rows, steps, terms, n)
        Integer element values (:func:`sim.dot.operand_terms`), zero in NaN blocks.
    top : int64 ndarray (rows, steps, terms)
        ``|int * sig| * 2**exp < 2**top`` for every int of the format; ``_NONE`` for a zero
        or NaN block.
    bot : int64 ndarray (rows, steps, terms)
        ``exp``; ``_ALL`` for a zero or NaN block.
    nan : bool ndarray (rows,)
        The row holds a NaN scale.
    tensor_scale : float32 ndarray or None
        NVFP4's per-tensor scale T (for ``scaled``).
    """

    def __init__(self, fmt, terms, device):
        self.fmt = fmt
        self.device = device
        ints, nz, sig, exp, nan = terms
        self.ints = np.where(nan[..., None], np.float32(0), ints)    # (rows, steps, T, n)
        self.rows, self.steps, self.terms, self.n = ints.shape
        self.sig, self.exp = sig, exp
        nz &= ~nan
        big = (np.float64(_int_bound(fmt)) * sig).astype(np.int64)      # >= |int * sig|
        blen = np.frexp(big.astype(np.float64))[1].astype(np.int64)
        self.top = np.where(nz, blen + exp, _NONE)
        self.bot = np.where(nz, exp, _ALL)
        self.nan = nan.any(axis=(1, 2))
        self._scale = torch.from_numpy(np.where(nan, 0.0, np.ldexp(sig.astype(np.float64),
                                                                  exp))).to(device)
        self._ints = torch.from_numpy(self.ints).to(device)
        self._values = {}

    def values(self, dtype, transposed=False):
        """Exact values as ``dtype``: a (steps, rows, terms * n) view, or (steps,
        terms * n, rows) when ``transposed`` (cached; float32 is exact wherever the float32
        path is taken)."""
        if dtype not in self._values:
            v = torch.mul(self._ints, self._scale.to(dtype)[..., None])
            self._values[dtype] = v.reshape(self.rows, self.steps, -1)
        v = self._values[dtype]
        return v.permute(1, 2, 0) if transposed else v.permute(1, 0, 2)


@functools.lru_cache(maxsize=None)
def _int_bound(fmt):
    """The largest ``|int|`` of format ``fmt``'s elements as :func:`sim.dot.operand_terms`
    decodes them (``GoldenFormat.decode_elements``): every element code, with the block's
    other fields (HiF4's micro-exponents) at their largest values."""
    spec = FORMATS[fmt]
    codes, n = 1 << spec.fields["elem"].width, spec.fields["elem"].count
    f = {k: np.full((codes, fd.count), (1 << fd.width) - 1, dtype=np.int64)
         for k, fd in spec.fields.items()}
    f["elem"] = np.repeat(np.arange(codes)[:, None], n, axis=1)
    return int(np.abs(golden(fmt).decode_elements(f, spec)).max())


def prepare(qt, r=None, *, repeat=1, device=None):
    """A QuantizedTensor (rows, K) quantized along K (and A's residual ``r``, as
    :func:`sim.dot.gemm` takes it) -> :class:`Operand` on ``device``. ``repeat=2`` lists
    W's blocks twice (once against A's main blocks, once against the residual's)."""
    device = torch.device("cpu" if device is None else device)
    ints, sig, exp, nan = dot.operand_terms(qt, r)
    if repeat > 1:
        ints, sig, exp, nan = (np.concatenate([x] * repeat, axis=2)
                               for x in (ints, sig, exp, nan))
    op = Operand(qt.fmt, (ints, (ints != 0).any(axis=-1), sig, exp, nan), device)
    op.tensor_scale = qt.fields.get("tensor_scale")
    return op


def _spread(op, rows):
    """Per row and step: (max top - min bot, min bot, max top) over nonzero blocks."""
    top = op.top[rows].max(axis=2)
    bot = op.bot[rows].min(axis=2)
    return np.where(top > _NONE, top - bot, _NONE), bot, top


@contextlib.contextmanager
def _ieee_matmul():
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def gemm_torch(a_qt, w_qt, r=None, *, scaled=False, device=None, row_chunk=None,
               as_tensor=False):
    """:func:`sim.dot.gemm` computed with torch: the same words, bit for bit.

    Parameters
    ----------
    a_qt, w_qt, r, scaled
        As :func:`sim.dot.gemm` (``a_qt`` may also be a prepared :class:`Operand` of A and
        its residual, ``w_qt`` one of W; see :func:`prepare`).
    device : torch.device or str, optional
        Where the matmuls and the accumulation run (default CPU).
    row_chunk : int, optional
        Rows of A per pass (default: about ``_CPU_CELLS`` outputs on CPU).
    as_tensor : bool
        Return a float32 torch tensor (M, N) on ``device`` instead of uint32 words.

    Returns
    -------
    uint32 ndarray (M, N), or float32 tensor (M, N) with ``as_tensor``.
    """
    device = torch.device("cpu" if device is None else device)
    fmt = a_qt.fmt
    if fmt not in dot.FORMATS_DOT or w_qt.fmt != fmt:
        raise ValueError(f"gemm needs two tensors of one of {', '.join(dot.FORMATS_DOT)}, "
                         f"not {a_qt.fmt!r} and {w_qt.fmt!r}")
    if isinstance(a_qt, Operand):
        A, W = a_qt, w_qt
    else:
        if a_qt.shape[1:] != w_qt.shape[1:]:
            raise ValueError(f"A {a_qt.shape} and W {w_qt.shape} must have the same K")
        A = prepare(a_qt, r, device=device)
        W = prepare(w_qt, repeat=2 if r is not None else 1, device=device)
    if A.terms != W.terms or A.steps != W.steps:
        raise ValueError("A (with its residual) and W must have the same steps and blocks")
    M, N = A.rows, W.rows
    cells = _CPU_CELLS if device.type == "cpu" else _DEV_CELLS
    if row_chunk is None:
        row_chunk = max(1, cells // max(N, 1))
    const = math.ceil(math.log2(A.n * A.terms))
    wspan, wbot, wtop = _spread(W, slice(None))         # (N, steps)
    out = torch.empty((M, N), dtype=torch.float32, device=device)
    with _ieee_matmul():
        for m0 in range(0, M, row_chunk):
            rows = slice(m0, min(M, m0 + row_chunk))
            out[rows] = _chunk(A, W, rows, (wspan, wbot, wtop), const, device)
    if A.nan.any() or W.nan.any():
        nan = torch.from_numpy(A.nan[:, None] | W.nan[None, :]).to(device)
        out.masked_fill_(nan, float("nan"))
    if scaled and golden(fmt).has_tensor_scale:
        words = dot.scale_result(_words(out), A.tensor_scale, W.tensor_scale)
        return torch.from_numpy(words.view(np.float32)).to(device) if as_tensor else words
    return out if as_tensor else _words(out)


def _words(t):
    return dot.f32_bits(t.cpu().numpy())


def _chunk(A, W, rows, wstats, const, device):
    """Accumulate the outputs of A's rows ``rows`` against all of W: float32 (rows, N)."""
    wspan, wbot, wtop = wstats
    aspan, abot, atop = _spread(A, rows)                # (mc, steps)
    has_a, has_w = aspan > _NONE, wspan > _NONE
    live = has_a.any(axis=0) & has_w.any(axis=0)        # steps with a nonzero term
    window = aspan.max(axis=0) + wspan.max(axis=0) + const   # >= top - bot of every output
    abmin, wbmin = abot.min(axis=0), wbot.min(axis=0)
    atmax, wtmax = atop.max(axis=0), wtop.max(axis=0)
    in32 = ((abmin >= _F32_MIN_EXP) & (wbmin >= _F32_MIN_EXP) & (abmin + wbmin >= _F32_MIN_EXP)
            & (atmax + wtmax + const <= _F32_MAX_EXP))
    f32 = live & (window <= _F32_BITS) & in32
    f64 = live & ~f32
    wide = f64 & (window > _F64_BITS)                    # some outputs need the exact path
    signed_zero = bool((live & (abmin + wbmin < _F32_SUB_EXP)).any())
    mc = len(range(A.rows)[rows])
    acc = torch.zeros((mc, W.rows), dtype=torch.float32, device=device)
    v32 = _step_values(A, W, rows, f32, torch.float32, device)
    v64 = _step_values(A, W, rows, f64, torch.float64, device)
    if signed_zero:                                     # -0 + 0 must give +0 (see above)
        for v in (v32, v64):
            if v is not None:
                v.add_(0.0)
    slot = np.where(f32, np.cumsum(f32) - 1, np.cumsum(f64) - 1)     # index among its path's steps
    cpu = device.type == "cpu"
    for k in range(A.steps):
        if f32[k]:
            acc.add_(v32[slot[k]])
        elif f64[k]:
            if wide[k]:
                mi, ni = np.nonzero((aspan[:, k, None] + wspan[None, :, k] + const > _F64_BITS)
                                    & has_a[:, k, None] & has_w[None, :, k])
                before = dot.f32_bits(acc[mi, ni].cpu().numpy())
            acc = _add_rounded(acc, v64[slot[k]], cpu)
            if wide[k]:
                words = _exact_step(before, A, W, np.arange(A.rows)[rows][mi], ni, k)
                acc[mi, ni] = torch.from_numpy(words.view(np.float32)).to(device)
        elif signed_zero:
            acc.add_(0.0)
    return acc


def _step_values(A, W, rows, which, dtype, device):
    """Step values (len(which), mc, N) of the steps selected by ``which`` as ``dtype``."""
    ks = np.flatnonzero(which)
    if not len(ks):
        return None
    a = A.values(dtype)[:, rows]
    w = W.values(dtype, transposed=True)
    if len(ks) != A.steps:
        idx = torch.from_numpy(ks).to(device)
        a, w = a.index_select(0, idx), w.index_select(0, idx)
    return torch.bmm(a, w)


def _add_rounded(acc, v, cpu):
    """RNE_FP32(acc + v) for float32 ``acc`` and exact float64 ``v``: TwoSum, round to odd
    at 53 bits, one RNE to float32 (see the module docstring)."""
    a = acc.double()
    s = a + v
    bb = s - a
    e = (a - (s - bb)).add_(v - bb)
    flag = e != 0                               # also NaN: acc was +-Inf (s stays +-Inf)
    if not cpu or bool(flag.any()):
        bits = s.view(torch.int64)
        need = flag & (e == e) & ((bits & 1) == 0)
        toward = ((e > 0) == (s > 0)).to(torch.int64) * 2 - 1     # +1: away from zero
        s = (bits + need.to(torch.int64) * toward).view(torch.float64)
    return s.float()


def _exact_step(before, A, W, mi, ni, k):
    """Step ``k`` of outputs (mi, ni) on exact integer terms (:func:`sim.dot.accumulate`)
    from the words ``before``."""
    P, E = [], []
    for t in range(A.terms):
        s = np.einsum("fn,fn->f", A.ints[mi, k, t], W.ints[ni, k, t]).astype(np.int64)
        P.append(s * A.sig[mi, k, t] * W.sig[ni, k, t])
        E.append(A.exp[mi, k, t] + W.exp[ni, k, t])
    return dot.accumulate(before, P, E, np.zeros(len(mi), dtype=bool))
