"""Rollout-ResQ (spec section 6): residual, sparsifiers (with ties), corrected activation,
packed 2:4 HiF4 residual."""

from math import ceil

import ml_dtypes
import numpy as np
import pytest

from sim.formats import quantize
from sim.formats.codecs import round_to_dtype
from sim.formats.resq import (MODES, corrected, decode_24, keep_mask, pack_24, resq,
                              residual24_from_bytes, residual24_to_bytes, unpack_24)
from hif4spec.formats import RESIDUAL24

FMTS = ["hif4", "mxfp4", "nvfp4", "hif8", "bf16"]


# ------------------------------------------------------------------------------------------
# A plain-loop reading of the sparsifier rules (small arrays only)


def ref_keep(values, mode, axis):
    v = np.moveaxis(np.asarray(values, np.float64), axis, -1)
    shape = v.shape
    n = shape[-1]
    v2 = v.reshape(-1, n)
    rows = v2.shape[0]
    keep = np.zeros(v2.shape, bool)

    def mag(x):
        return float("inf") if np.isnan(x) else abs(x)

    if mode == "dense":
        keep[:] = True
    elif mode == "2:4":
        for r in range(rows):
            for g0 in range(0, n, 4):
                idx = list(range(g0, min(n, g0 + 4)))
                idx.sort(key=lambda i: (-mag(v2[r, i]), i))
                for i in idx[:2]:
                    keep[r, i] = True
    elif mode == "channel50":
        sums = []
        for c in range(n):
            s = 0.0
            for r in range(rows):
                s += v2[r, c] * v2[r, c]
            sums.append(float("inf") if np.isnan(s) else s)
        order = sorted(range(n), key=lambda c: (-sums[c], c))
        for c in order[:ceil(n / 2)]:
            keep[:, c] = True
    else:
        tiles = []
        for tr in range(0, rows, 32):
            for tc in range(0, n, 64):
                s = 0.0
                for r in range(tr, min(rows, tr + 32)):
                    for c in range(tc, min(n, tc + 64)):
                        s += v2[r, c] * v2[r, c]
                tiles.append((float("inf") if np.isnan(s) else s, tr, tc))
        order = sorted(range(len(tiles)), key=lambda t: (-tiles[t][0], t))
        for t in order[:ceil(len(tiles) / 2)]:
            _, tr, tc = tiles[t]
            keep[tr:tr + 32, tc:tc + 64] = True
    return np.moveaxis(keep.reshape(shape), -1, axis)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("mode", MODES)
def test_resq_matches_definition(fmt, mode):
    rng = np.random.default_rng(len(fmt) * 7 + MODES.index(mode))
    x = (rng.standard_normal((3, 37, 70)) * 2.0 ** rng.integers(-6, 6, (3, 37, 1)))
    x = x.astype(np.float32)
    axis = 2
    out = resq(x, fmt, mode, axis=axis)
    main = quantize(x, fmt, axis=axis)
    assert out.main == main
    dx = x.astype(np.float64) - main.decoded()
    r = quantize(dx, fmt, axis=axis)
    keep = ref_keep(r.decoded(), mode, axis)
    assert np.array_equal(out.keep, keep)
    # kept elements keep R's codes, dropped ones are 0; scales untouched
    rv, sv = r.decoded(), out.residual.decoded()
    assert np.array_equal(sv[keep], rv[keep])
    assert (sv[~keep] == 0).all()
    for k, v in r.fields.items():
        if k not in ("elem", "code"):
            assert np.array_equal(out.residual.fields[k], v)
    want = round_to_dtype(main.decoded() + sv, np.float32)
    got = out.corrected()
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert np.array_equal(corrected(x, fmt, mode, axis=axis), got)
    if mode == "dense":
        err_q = np.mean((main.dequantize().astype(np.float64) - x) ** 2)
        err_c = np.mean((got.astype(np.float64) - x) ** 2)
        assert err_c < err_q / 4


@pytest.mark.parametrize("mode", MODES)
def test_other_axes_equal_moved_axis(mode):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((70, 3, 5)).astype(np.float32)
    a = resq(x, "hif4", mode, axis=0)
    b = resq(np.moveaxis(x, 0, -1), "hif4", mode, axis=-1)
    assert np.array_equal(a.keep, np.moveaxis(b.keep, -1, 0))
    assert np.array_equal(a.corrected(), np.moveaxis(b.corrected(), -1, 0))


def test_24_ties_keep_lower_positions():
    v = np.array([[1.0, 1.0, 1.0, 1.0, 0.0, -0.0, 0.0, 0.0, 2.0, -3.0, 3.0, 2.0, 5.0, 5.0]])
    k = keep_mask(v, "2:4", axis=1)
    assert k.tolist() == [[1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1]]
    v = np.array([[0.0, np.nan, 1.0, 2.0]])                 # NaN ranks as +Inf
    assert keep_mask(v, "2:4", axis=1).tolist() == [[0, 1, 0, 1]]
    v = np.array([[0.0, 0.0, 0.0]])                        # a partial group: padding never
    assert keep_mask(v, "2:4", axis=1).tolist() == [[1, 1, 0]]


def test_channel50_ties_and_odd_counts():
    v = np.array([[1.0, -1.0, 1.0, 0.5, 1.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0]])
    # sums 1, 1, 1, 0.25, 1 -> keep ceil(5/2) = 3 lowest-index ties: 0, 1, 2
    assert keep_mask(v, "channel50", axis=1)[0].tolist() == [1, 1, 1, 0, 0]
    assert keep_mask(v.T, "channel50", axis=0)[:, 0].tolist() == [1, 1, 1, 0, 0]
    # a 3-D view: rows are all other axes flattened in C order
    v3 = np.zeros((2, 3, 4))
    v3[1, 2, 3] = 1.0
    v3[0, 0, 1] = -1.0
    k = keep_mask(v3, "channel50", axis=2)
    assert k[0, 0].tolist() == [0, 1, 0, 1]


def test_channel50_sums_are_sequential_not_pairwise():
    # one large and many small squares: the order of additions matters; the rule is the
    # sequential sum in increasing row order (as np.cumsum), not numpy's pairwise sum
    rng = np.random.default_rng(8)
    rows = 2000
    col = np.concatenate([[1.0], 2.0 ** -27 * (1 + rng.random(rows - 1))])
    seq = np.cumsum(col * col)[-1]
    pair = np.sum(col * col)
    assert seq != pair                                      # the case is discriminating
    # column 1 holds exactly the value whose square is between the two sums
    target = (seq + pair) / 2
    v = np.zeros((rows, 2))
    v[:, 0] = col
    v[0, 1] = np.sqrt(target)
    assert (v[0, 1] ** 2 > seq) == (target > seq)
    k = keep_mask(v, "channel50", axis=1)[0]
    want_col0 = seq >= v[0, 1] ** 2
    assert k.tolist() == ([True, False] if want_col0 else [False, True])


def test_block32x64_ties_keep_earlier_tiles():
    v = np.ones((64 + 5, 130))                       # tiles 3 x 3, edge tiles partial
    v[32:64, 64:128] = 2.0                           # tile (1, 1) largest
    k = keep_mask(v, "block32x64", axis=1)
    tiles = k[::32, ::64]
    # keep ceil(9/2) = 5: the four full tiles, then (2, 0) and (2, 1) tie at 5 x 64 = 320
    # (above the 32 x 2 = 64 of the right edge tiles): the earlier one in row-major order
    assert tiles.tolist() == [[1, 1, 0], [1, 1, 0], [1, 0, 0]]
    v = np.ones((10, 10))                            # one tile: kept
    assert keep_mask(v, "block32x64", axis=1).all()


def test_nan_and_inf_inputs():
    x = np.ones((2, 64), np.float32)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    for fmt in ("hif4", "mxfp4", "nvfp4"):
        out = resq(x, fmt, "2:4", axis=1)
        c = out.corrected()
        blk = {"hif4": 64, "mxfp4": 32, "nvfp4": 16}[fmt]
        assert np.isnan(c[0, :blk]).all() and np.isnan(c[1, :blk]).all()
        assert np.isfinite(c[:, blk:]).all()
    out = resq(x, "hif8", "dense", axis=1)
    c = out.corrected()
    assert np.isnan(c[0, 3]) and np.isnan(c[1, 5])  # Inf - Inf = NaN in dX, NaN in R
    assert np.isfinite(np.delete(c.ravel(), [3, 64 + 5])).all()


def test_nvfp4_residual_has_its_own_tensor_scale():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 48)).astype(np.float32) * 100
    out = resq(x, "nvfp4", "dense", axis=1)
    dx = x.astype(np.float64) - out.main.decoded()
    t = np.float32(np.abs(dx).max() / 2688)
    assert out.residual.fields["tensor_scale"] == t
    assert out.main.fields["tensor_scale"] != t
    off = resq(x, "nvfp4", "dense", axis=1, tensor_scale=False)
    assert off.residual.fields["tensor_scale"] == 1.0


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_corrected_rounds_once_to_input_dtype(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 64)) * 3).astype(dtype)
    out = resq(x, "hif4", "dense", axis=1)
    c = out.corrected()
    assert c.dtype == np.dtype(dtype)
    exact = out.main.decoded() + out.residual.decoded()
    if np.dtype(dtype).name == "bfloat16":
        from sim.formats.codecs import encode_bf16
        assert np.array_equal(c.view(np.uint16), encode_bf16(exact))
    else:
        assert np.array_equal(c, exact.astype(dtype))


def test_bad_arguments():
    x = np.ones((2, 64), np.float32)
    with pytest.raises(ValueError, match="ResQ mode must be one of"):
        resq(x, "hif4", "3:4")
    with pytest.raises(ValueError, match="Format must be one of"):
        resq(x, "fp8", "2:4")
    with pytest.raises(ValueError, match="out of range"):
        resq(x, "hif4", "2:4", axis=2)
    with pytest.raises(ValueError, match="at least one axis"):
        resq(np.float32(1.0), "hif8", "2:4")


# ------------------------------------------------------------------------------------------
# Packed 2:4 HiF4 residual


def test_pack_24_round_trip_and_bytes():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 150)).astype(np.float32)
    out = resq(x, "hif4", "2:4", axis=2)
    p = pack_24(out)
    assert p["elem"].shape == (3, 4, 3, 32) and p["pos"].shape == (3, 4, 3, 32)
    pos = p["pos"].reshape(3, 4, 3, 16, 2)
    assert (pos[..., 0] < pos[..., 1]).all()                 # distinct, ascending
    # the packed positions are the sparsifier's kept positions (where their codes differ
    # from 0; a kept code 0 may be swapped for another position of value 0)
    u = unpack_24(p)
    assert all(np.array_equal(u[k], out.residual.fields[k]) for k in u)
    assert np.array_equal(decode_24(p).reshape(3, 4, -1)[..., :150], out.residual.decoded())
    data = residual24_to_bytes(p)
    assert len(data) == 3 * 4 * 3 * RESIDUAL24.block_bytes == 3 * 4 * 3 * 28
    back = residual24_from_bytes(data, (3, 4, 3))
    assert all(np.array_equal(back[k], p[k]) for k in p)
    with pytest.raises(ValueError, match="must be 1008 bytes long"):
        residual24_from_bytes(data[:-1], (3, 4, 3))


def test_pack_24_bit_layout():
    # one block, every field distinct: check bit positions against the spec table
    f = {"elem": np.arange(32, dtype=np.uint8)[None] % 16,
         "pos": (np.arange(32, dtype=np.uint8)[None] * 3) % 4,
         "l3": (np.arange(16)[None] % 3 == 0).astype(np.uint8),
         "l2": (np.arange(8)[None] % 2).astype(np.uint8),
         "scale": np.array([0xA5], np.uint8)}
    word = int.from_bytes(residual24_to_bytes(f), "little")
    for j in range(32):
        assert (word >> (4 * j)) & 15 == f["elem"][0, j]
        assert (word >> (128 + 2 * j)) & 3 == f["pos"][0, j]
    for j in range(16):
        assert (word >> (192 + j)) & 1 == f["l3"][0, j]
    for g in range(8):
        assert (word >> (208 + g)) & 1 == f["l2"][0, g]
    assert word >> 216 == 0xA5


def test_pack_24_rejects_dense_and_unpack_clashes():
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    dense = resq(x, "hif4", "dense", axis=1)
    with pytest.raises(ValueError, match="more than 2 nonzero codes"):
        pack_24(dense.residual)
    with pytest.raises(ValueError, match="not 'mxfp4'"):
        pack_24(resq(x, "mxfp4", "2:4", axis=1).residual)
    p = pack_24(resq(x, "hif4", "2:4", axis=1))
    p["pos"][0, 0, 0:2] = [1, 1]
    p["elem"][0, 0, 0:2] = [3, 5]
    with pytest.raises(ValueError, match="share a position"):
        unpack_24(p)
    d = decode_24(p)                               # both add at position 1
    from sim.formats.codecs import E6M2_VALUES
    mult = 2.0 ** (int(p["l3"][0, 0, 0]) + int(p["l2"][0, 0, 0])) * E6M2_VALUES[p["scale"][0, 0]]
    assert d[0, 0, 1] == (3 / 4 + 5 / 4) * mult and d[0, 0, 0] == 0
    p["elem"][0, 0, 0] = 0                        # a zero partner on the same spot is fine
    assert unpack_24(p)["elem"][0, 0, 1] == 5
