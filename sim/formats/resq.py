"""Rollout-ResQ: residual quantization on the rollout path (``docs/formats.md`` section 6).

For an activation tensor X quantized along the reduction axis with format Q:

- dX = X - deq(Q(X)), one float64 subtraction per element;
- R = Q(dX) in the same format (NVFP4: with its own per-tensor scale T);
- a sparsifier S keeps half of R (``mode``): "2:4", "dense", "channel50", "block32x64";
  dropped elements get code 0;
- corrected activation deq(Q(X)) + deq(S(R)): one float64 addition, rounded once to X's
  dtype.

>>> out = resq(x, "hif4", "2:4", axis=-1)            # doctest: +SKIP
>>> out.main, out.residual, out.keep, out.corrected()  # doctest: +SKIP

The packed 2:4 HiF4 residual (224 bits per 64 positions) is built by :func:`pack_24` and
read back by :func:`unpack_24` / :func:`decode_24`; :func:`residual24_to_bytes` and
:func:`residual24_from_bytes` serialize it (28 bytes per block, blocks in C order).

Details the spec leaves open: a NaN magnitude or NaN sum of squares ranks as +Inf (kept
first). Squares are float64 products of the decoded residual values: exact for every format
except NVFP4, whose values e * s * T can carry up to 30 significant bits (T is a float32),
so there a square is rounded RNE to float64 before the sequential sum.
"""

from math import ceil

import numpy as np

from .codecs import E6M2_VALUES, S1P2_VALUES, round_to_dtype
from hif4spec.formats import FORMATS, RESIDUAL24, RESQ_MODES
from . import packing
from .tensor import QuantizedTensor, quantize

__all__ = [
    "MODES",
    "ResQ",
    "resq",
    "corrected",
    "keep_mask",
    "pack_24",
    "unpack_24",
    "decode_24",
    "residual24_to_bytes",
    "residual24_from_bytes",
]

#: Sparsifier modes, in the order the CLI shows them.
MODES = RESQ_MODES


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"ResQ mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


class ResQ:
    """Result of :func:`resq`.

    Attributes
    ----------
    fmt, mode : str
    main : QuantizedTensor
        Q(X), with X's dtype.
    residual : QuantizedTensor
        S(R): R = Q(dX) with the dropped elements' codes zeroed (dtype float64, the dtype of
        dX). For NVFP4 it has its own ``tensor_scale``.
    keep : bool ndarray, X's shape
        Elements whose residual code is kept.
    """

    def __init__(self, fmt, mode, main, residual, keep, dtype):
        self.fmt = fmt
        self.mode = mode
        self.main = main
        self.residual = residual
        self.keep = keep
        self.dtype = np.dtype(dtype)

    def decoded(self):
        """deq(Q(X)) + deq(S(R)) as float64 (one float64 addition, before the dtype)."""
        with np.errstate(invalid="ignore", over="ignore"):
            return self.main.decoded() + self.residual.decoded()

    def corrected(self):
        """The corrected activation, rounded once (RNE) to X's dtype."""
        return np.ascontiguousarray(round_to_dtype(self.decoded(), self.dtype))

    def __repr__(self):
        return (f"ResQ(fmt={self.fmt!r}, mode={self.mode!r}, shape={self.main.shape}, "
                f"axis={self.main.axis}, kept={int(self.keep.sum())}/{self.keep.size})")


def _rank_top(key, k, axis=-1):
    """Boolean mask of the k largest ``key`` along ``axis`` (ties: lower index first)."""
    key = np.where(np.isnan(key), np.inf, key)
    order = np.argsort(-key, axis=axis, kind="stable")
    mask = np.zeros(key.shape, dtype=bool)
    idx = np.take(order, np.arange(k), axis=axis)
    np.put_along_axis(mask, idx, True, axis=axis)
    return mask


def keep_mask(values, mode, axis=-1):
    """The sparsifier's keep mask over ``values`` (the decoded residual R, float64).

    Parameters
    ----------
    values : ndarray
        deq(R) in the original shape.
    mode : {"2:4", "dense", "channel50", "block32x64"}
    axis : int
        The reduction axis.
    """
    _check_mode(mode)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0:
        raise ValueError("ResQ needs an array with at least one axis")
    axis = axis % values.ndim
    if mode == "dense":
        return np.ones(values.shape, dtype=bool)
    vm = np.moveaxis(values, axis, -1)
    n = vm.shape[-1]
    if mode == "2:4":
        n4 = -(-n // 4) * 4
        mag = np.full(vm.shape[:-1] + (n4,), -1.0)          # padding ranks last
        mag[..., :n] = np.abs(vm)
        mag = mag.reshape(vm.shape[:-1] + (n4 // 4, 4))
        keep = _rank_top(mag, 2).reshape(vm.shape[:-1] + (n4,))[..., :n]
        return np.moveaxis(keep, -1, axis)
    v2 = vm.reshape(-1, n)
    rows = v2.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        sq = v2 * v2
    if mode == "channel50":
        sums = np.cumsum(sq, axis=0)[-1] if rows else np.zeros(n)
        keep_cols = _rank_top(sums, ceil(n / 2))
        keep = np.broadcast_to(keep_cols, v2.shape)
    else:
        tr, tc = ceil(rows / 32), ceil(n / 64)
        pad = np.zeros((tr * 32, tc * 64))
        pad[:rows, :n] = sq
        tiles = pad.reshape(tr, 32, tc, 64).transpose(0, 2, 1, 3).reshape(tr * tc, 32 * 64)
        sums = np.cumsum(tiles, axis=1)[:, -1] if tiles.size else np.zeros(tr * tc)
        keep_tiles = _rank_top(sums, ceil(tr * tc / 2)).reshape(tr, tc)
        keep = np.repeat(np.repeat(keep_tiles, 32, axis=0), 64, axis=1)[:rows, :n]
    return np.moveaxis(np.ascontiguousarray(keep).reshape(vm.shape), -1, axis)


def _zero_dropped(qt, keep):
    """Copy of ``qt`` with the element codes where ``keep`` is False set to 0."""
    fields = {k: np.array(v, copy=True) for k, v in qt.fields.items()}
    block = FORMATS[qt.fmt].block
    if block == 1:                                      # element-wise: one code per value
        fields["code"] = np.where(keep, fields["code"], 0).astype(fields["code"].dtype)
    else:
        km = np.moveaxis(keep, qt.axis, -1)
        n = km.shape[-1]
        nb = ceil(n / block)
        kp = np.zeros(km.shape[:-1] + (nb * block,), dtype=bool)
        kp[..., :n] = km
        kp = kp.reshape(km.shape[:-1] + (nb, block))
        fields["elem"] = np.where(kp, fields["elem"], 0).astype(np.uint8)
    return QuantizedTensor(qt.fmt, qt.shape, qt.axis, qt.dtype, fields, qt.options)


def resq(x, fmt, mode, axis=-1, **options):
    """Rollout-ResQ of ``x`` along ``axis``: main quantization, sparsified residual.

    Parameters
    ----------
    x : array_like
        float16, bfloat16, float32 or float64, at least one axis.
    fmt : str
        Any format of :data:`sim.formats.FORMATS`.
    mode : {"2:4", "dense", "channel50", "block32x64"}
    axis : int
        The reduction axis (quantization axis of both X and R).
    **options
        Format options (nvfp4 ``tensor_scale``), used for both X and R.

    Returns
    -------
    ResQ
    """
    _check_mode(mode)
    x = np.asarray(x)
    main = quantize(x, fmt, axis, **options)
    if x.ndim == 0:
        raise ValueError("ResQ needs an array with at least one axis, not a 0-d array")
    with np.errstate(invalid="ignore", over="ignore"):
        dx = x.astype(np.float64) - main.decoded()
    r = quantize(dx, fmt, main.axis, **options)
    keep = keep_mask(r.decoded(), mode, main.axis)
    residual = _zero_dropped(r, keep) if mode != "dense" else r
    return ResQ(fmt, mode, main, residual, keep, x.dtype)


def corrected(x, fmt, mode, axis=-1, **options):
    """``resq(x, fmt, mode, axis, **options).corrected()``."""
    return resq(x, fmt, mode, axis, **options).corrected()


# ------------------------------------------------------------------------------------------
# Packed 2:4 HiF4 residual


def _hif4_fields(residual):
    if isinstance(residual, ResQ):
        residual = residual.residual
    fmt = getattr(residual, "fmt", RESIDUAL24.fmt)
    if fmt != RESIDUAL24.fmt:
        raise ValueError(f"pack_24 packs a HiF4 residual, not {fmt!r} "
                         "(MXFP4: sim.formats.resq_mxfp4.pack_24_mxfp4)")
    fields = getattr(residual, "fields", residual)
    try:
        f = {k: np.asarray(fields[k]) for k in ("elem", "l3", "l2", "scale")}
    except (KeyError, TypeError):
        raise ValueError("expected HiF4 fields elem, l3, l2, scale") from None
    if f["elem"].shape[-1:] != (64,) or f["elem"].shape[:-1] != f["scale"].shape:
        raise ValueError(f"HiF4 fields must be elem (*lead, nb, 64) and scale (*lead, nb), "
                         f"not {f['elem'].shape} and {f['scale'].shape}")
    return f


def pack_24(residual):
    """Pack a 2:4-sparse HiF4 residual into the 224-bit layout's fields.

    Parameters
    ----------
    residual : QuantizedTensor, ResQ or dict
        HiF4 residual with dropped codes zeroed (``resq(x, "hif4", "2:4").residual``).

    Returns
    -------
    dict
        ``elem`` (*lead, nb, 32) kept S1P2 codes, ``pos`` (*lead, nb, 32) positions 0..3,
        ``l3`` (*lead, nb, 16), ``l2`` (*lead, nb, 8), ``scale`` (*lead, nb). In each
        micro-group the kept positions are those with a nonzero code, completed by the
        lowest zero-code positions, written distinct and ascending. For a residual made by
        :func:`resq` these are exactly the positions the sparsifier kept (or, where a kept
        element has code 0, positions of equal value 0).

    Raises
    ------
    ValueError
        When a micro-group holds more than two nonzero codes.
    """
    f = _hif4_fields(residual)
    elem = f["elem"].astype(np.uint8)
    groups = elem.reshape(elem.shape[:-1] + (16, 4))
    nonzero = groups != 0
    if (nonzero.sum(axis=-1) > 2).any():
        raise ValueError("a micro-group of 4 positions holds more than 2 nonzero codes; "
                         "pack only a 2:4-sparsified residual (resq(..., '2:4').residual)")
    key = np.where(nonzero, 0, 4) + np.arange(4)
    pick = np.sort(np.argsort(key, axis=-1, kind="stable")[..., :2], axis=-1)
    kept = np.take_along_axis(groups, pick, axis=-1)
    lead = elem.shape[:-1]
    return {"elem": kept.reshape(lead + (32,)).astype(np.uint8),
            "pos": pick.reshape(lead + (32,)).astype(np.uint8),
            "l3": f["l3"].astype(np.uint8).copy(), "l2": f["l2"].astype(np.uint8).copy(),
            "scale": f["scale"].astype(np.uint8).copy()}


def _packed(fields):
    layout = RESIDUAL24.fields
    try:
        f = {k: np.asarray(fields[k]) for k in layout}
    except (KeyError, TypeError):
        raise ValueError(f"expected packed 2:4 fields {', '.join(layout)}") from None
    lead = f["scale"].shape
    for k, fl in layout.items():
        if fl.count > 1 and f[k].shape != lead + (fl.count,):
            raise ValueError(f"packed 2:4 field {k!r} must have shape (*lead, nb, {fl.count}) "
                             f"with (*lead, nb) = {lead}, not {f[k].shape}")
    if any((f[k] >= 1 << fl.width).any() for k, fl in layout.items() if k != "scale"):
        raise ValueError("packed 2:4 fields out of range (elem 0..15, pos 0..3, l3/l2 0..1)")
    return f


def _where(pos):
    return 4 * (np.arange(32) // 2) + pos.astype(np.int64)


def unpack_24(fields):
    """Scatter a packed 2:4 residual back into HiF4 fields (elem (*lead, nb, 64), ...).

    Raises ValueError when two kept elements with nonzero codes share a position (their sum
    is not one S1P2 code; :func:`decode_24` gives the values).
    """
    f = _packed(fields)
    where = _where(f["pos"])
    pairs = where.reshape(where.shape[:-1] + (16, 2))
    codes = f["elem"].reshape(pairs.shape)
    clash = (pairs[..., 0] == pairs[..., 1])
    if (clash & (codes[..., 0] != 0) & (codes[..., 1] != 0)).any():
        raise ValueError("two kept elements with nonzero codes share a position; "
                         "unpack_24 cannot merge them (decode_24 gives their summed values)")
    # write the zero code first so a nonzero partner on the same position wins
    order = np.argsort(codes != 0, axis=-1, kind="stable")
    w_sorted = np.take_along_axis(pairs, order, axis=-1).reshape(where.shape)
    c_sorted = np.take_along_axis(codes, order, axis=-1).reshape(where.shape)
    elem = np.zeros(where.shape[:-1] + (64,), dtype=np.uint8)
    for t in range(2):          # put the two picks of each micro-group in two passes
        np.put_along_axis(elem, w_sorted[..., t::2], c_sorted[..., t::2], axis=-1)
    return {"elem": elem, "l3": f["l3"].astype(np.uint8).copy(),
            "l2": f["l2"].astype(np.uint8).copy(), "scale": f["scale"].astype(np.uint8).copy()}


def decode_24(fields):
    """Exact float64 values (*lead, nb, 64) of a packed 2:4 residual (two kept elements on
    one position add; a NaN scale makes the whole block NaN)."""
    f = _packed(fields)
    mg = np.arange(32) // 2
    sh = f["l3"][..., mg].astype(np.int64) + f["l2"][..., mg // 2]
    val = np.ldexp(S1P2_VALUES[f["elem"]], sh) * E6M2_VALUES[f["scale"]][..., None]
    out = np.zeros(f["scale"].shape + (64,))
    pos = f["pos"].astype(np.int64)
    for p in range(4):
        contrib = np.where(pos == p, val, 0.0)
        out[..., p::4] += contrib[..., 0::2] + contrib[..., 1::2]
    out[f["scale"] == 0xFF] = np.nan
    return out


def residual24_to_bytes(fields):
    """Serialize packed 2:4 fields: 28 bytes per block, blocks in C order, little-endian."""
    f = _packed(fields)
    g = f["scale"].size
    flat = {k: v.reshape(g, -1) if v.ndim > f["scale"].ndim else v.reshape(g)
            for k, v in f.items()}
    return packing.pack(RESIDUAL24, flat).tobytes()


def residual24_from_bytes(data, blocks_shape):
    """Parse :func:`residual24_to_bytes` output; ``blocks_shape`` = (*lead, nb)."""
    blocks_shape = tuple(int(s) for s in np.atleast_1d(blocks_shape))
    g = int(np.prod(blocks_shape, dtype=np.int64))
    data = np.frombuffer(bytes(data), dtype=np.uint8)
    size = g * RESIDUAL24.block_bytes
    if data.size != size:
        raise ValueError(f"packed 2:4 residual bytes for {g} blocks must be {size} bytes "
                         f"long ({RESIDUAL24.block_bytes} per block), not {data.size}")
    f = packing.unpack(RESIDUAL24, data.reshape(g, RESIDUAL24.block_bytes))
    return {k: v.reshape(blocks_shape + v.shape[1:]) for k, v in f.items()}
