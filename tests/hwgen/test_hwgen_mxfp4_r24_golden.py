"""Golden model of the packed MXFP4 2:4 residual (docs/mxfp4_residual.md), checked exactly.

The packing is checked field by field against the documented bit offsets, and the step
arithmetic (``sim.dot.run_steps("mxfp4", ..., residual="2:4")``) against an independent
Fraction evaluation with its own RNE-to-FP32 rounding.
"""

from fractions import Fraction

import numpy as np
import pytest

from conftest import e2m1, e8m0, rne_f32, word_value
from hif4spec import step_layout
from sim import dot
from sim.formats import quantize
from sim.formats.resq_mxfp4 import (
    RESIDUAL24_MXFP4_LAYOUT,
    decode_24_mxfp4,
    pack_24_mxfp4,
    pack_step_r24_mxfp4,
    residual24_mxfp4_from_bytes,
    residual24_mxfp4_to_bytes,
    unpack_24_mxfp4,
    unpack_step_r24_mxfp4,
)
from sim.stimulus import random_fields, random_steps

def step_fraction(a, w, r, s):
    """Exact step value from decoded elements (None for NaN)."""
    scales = list(a["scale"][s]) + list(w["scale"][s]) + list(r["scale"][s])
    if 255 in [int(x) for x in scales]:
        return None
    v = Fraction(0)
    for b in range(2):
        sab, swb, srb = e8m0(a["scale"][s, b]), e8m0(w["scale"][s, b]), e8m0(r["scale"][s, b])
        for i in range(32):
            v += e2m1(a["elem"][s, b, i]) * sab * e2m1(w["elem"][s, b, i]) * swb
        for j in range(16):
            pos = 4 * (j // 2) + int(r["pos"][s, b, j])
            v += e2m1(r["elem"][s, b, j]) * srb * e2m1(w["elem"][s, b, pos]) * swb
    return v


def reference_chain(a, w, r, first):
    out, acc, nan = [], 0, False
    for s in range(len(first)):
        if first[s]:
            acc, nan = 0, False
        v = step_fraction(a, w, r, s)
        if v is None or nan:
            nan = True
            out.append(dot.NAN_WORD)
            continue
        if acc & 0x7FFFFFFF == 0x7F800000:      # +-Inf stays for finite steps
            out.append(acc)
            continue
        acc = rne_f32(word_value(acc) + v)
        out.append(acc)
    return np.array(out, dtype=np.uint32)


@pytest.mark.parametrize("scales", ["narrow", "uniform"])
def test_run_steps_matches_fraction_reference(scales):
    rng = np.random.default_rng(7)
    st = random_steps("mxfp4", 300, rng, residual="2:4", scales=scales)
    got = dot.run_steps("mxfp4", st["a"], st["w"], st["first"], st["last"], r=st["r"],
                        residual="2:4")
    np.testing.assert_array_equal(got, reference_chain(st["a"], st["w"], st["r"], st["first"]))


def test_residual_far_below_main_and_cancellation():
    # main terms cancel exactly; the residual 100 binades lower is the whole result
    a = {"elem": np.zeros((1, 2, 32), np.uint8), "scale": np.array([[127, 127]], np.uint8)}
    w = {"elem": np.zeros((1, 2, 32), np.uint8), "scale": np.array([[127, 127]], np.uint8)}
    a["elem"][0, 0, 0], w["elem"][0, 0, 0] = 0x2, 0x2      # 1 * 1
    a["elem"][0, 1, 0], w["elem"][0, 1, 0] = 0xA, 0x2      # -1 * 1
    r = {"elem": np.zeros((1, 2, 16), np.uint8), "pos": np.zeros((1, 2, 16), np.uint8),
         "scale": np.array([[27, 127]], np.uint8)}
    r["elem"][0, 0, 3], r["pos"][0, 0, 3] = 0x1, 2          # 0.5 * 2**-100 * w[4 + 2]
    w["elem"][0, 0, 6] = 0x4                                # 2
    got = dot.run_steps("mxfp4", a, w, [True], r=r, residual="2:4")
    assert got[0] == rne_f32(Fraction(2) ** -100) == 0x0D800000


def test_layout_bits_match_doc():
    assert [(f.name, f.offset, f.width, f.count) for f in RESIDUAL24_MXFP4_LAYOUT] == [
        ("elem", 0, 4, 16), ("pos", 64, 2, 16), ("scale", 96, 8, 1)]
    rng = np.random.default_rng(3)
    st = random_fields(step_layout("mxfp4-2:4"), 20, rng)
    for s in range(20):
        word = pack_step_r24_mxfp4({k: v[s] for k, v in st.items()})
        for b in range(2):
            blk = word >> (104 * b)
            for j in range(16):
                assert (blk >> (4 * j)) & 15 == st["elem"][s, b, j]
                assert (blk >> (64 + 2 * j)) & 3 == st["pos"][s, b, j]
            assert (blk >> 96) & 255 == st["scale"][s, b]
        back = unpack_step_r24_mxfp4(word)
        for k in st:
            np.testing.assert_array_equal(back[k], st[k][s])
        assert word >> 208 == 0
    assert dot.pack_steps("mxfp4-2:4", st) == [
        pack_step_r24_mxfp4({k: v[s] for k, v in st.items()}) for s in range(20)]


def _sparsified_mxfp4(rng, shape):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
    qt = quantize(x, "mxfp4", axis=-1)
    elem = qt.fields["elem"].copy()
    groups = elem.reshape(*elem.shape[:-1], 8, 4)
    # keep the two largest magnitudes per micro-group (ties: lower position), zero the rest
    mag = np.abs(x.reshape(*x.shape[:-1], -1, 8, 4)) if shape[-1] % 32 == 0 else None
    order = np.argsort(-mag, axis=-1, kind="stable")
    drop = order[..., 2:]
    np.put_along_axis(groups, drop, 0, axis=-1)
    return {"elem": groups.reshape(elem.shape), "scale": qt.fields["scale"].copy()}


def test_pack_unpack_round_trip_from_quantized_residual():
    rng = np.random.default_rng(11)
    fields = _sparsified_mxfp4(rng, (3, 5, 96))
    packed = pack_24_mxfp4(fields)
    assert packed["elem"].shape == (3, 5, 3, 16) and packed["scale"].shape == (3, 5, 3)
    pairs = packed["pos"].reshape(3, 5, 3, 8, 2)
    assert (pairs[..., 0] < pairs[..., 1]).all()          # distinct, ascending
    back = unpack_24_mxfp4(packed)
    np.testing.assert_array_equal(back["elem"], fields["elem"])
    np.testing.assert_array_equal(back["scale"], fields["scale"])
    data = residual24_mxfp4_to_bytes(packed)
    assert len(data) == 3 * 5 * 3 * 13
    again = residual24_mxfp4_from_bytes(data, (3, 5, 3))
    for k in packed:
        np.testing.assert_array_equal(again[k], packed[k])
    vals = decode_24_mxfp4(packed)
    ref = np.array([float(e2m1(c)) for c in range(16)])[fields["elem"]] * np.ldexp(
        1.0, fields["scale"].astype(int) - 127)[..., None]
    np.testing.assert_array_equal(vals, ref)


def test_pack_picks_nonzero_then_lowest_positions():
    fields = {"elem": np.zeros((1, 32), np.uint8), "scale": np.array([120], np.uint8)}
    fields["elem"][0, 3] = 5           # group 0: only position 3 nonzero -> keep (0, 3)
    fields["elem"][0, 5:7] = [8, 1]    # group 1: -0 and 0.5 at positions 1, 2 -> (1, 2)
    packed = pack_24_mxfp4(fields)
    assert packed["pos"][0, :4].tolist() == [0, 3, 1, 2]
    assert packed["elem"][0, :4].tolist() == [0, 5, 8, 1]
    assert packed["pos"][0, 4:].tolist() == [0, 1] * 6


def test_errors_are_clear():
    fields = {"elem": np.ones((1, 32), np.uint8), "scale": np.zeros(1, np.uint8)}
    with pytest.raises(ValueError, match="more than 2 nonzero codes"):
        pack_24_mxfp4(fields)
    with pytest.raises(ValueError, match="takes 26 bytes"):
        residual24_mxfp4_from_bytes(b"\0" * 25, (2,))
    dup = {"elem": np.ones((1, 16), np.uint8), "pos": np.zeros((1, 16), np.uint8),
           "scale": np.full(1, 127, np.uint8)}
    with pytest.raises(ValueError, match="share a position"):
        unpack_24_mxfp4(dup)
    vals = decode_24_mxfp4(dup)                            # duplicates add: 0.5 + 0.5
    assert vals[0, 0::4].tolist() == [1.0] * 8 and vals[0, 1::4].tolist() == [0.0] * 8
    with pytest.raises(ValueError, match="Residual for nvfp4"):
        dot.run_steps("nvfp4", {}, {}, [True], residual="2:4")


def test_pack_resq_residual_round_trip():
    from sim.formats.resq import resq

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 200)) * np.exp2(rng.integers(-30, 30, (4, 1)))).astype(
        np.float32)
    res = resq(x, "mxfp4", "2:4")
    packed = pack_24_mxfp4(res.residual)
    back = unpack_24_mxfp4(packed)
    np.testing.assert_array_equal(back["elem"], res.residual.fields["elem"])
    np.testing.assert_array_equal(back["scale"], res.residual.fields["scale"])
    values = decode_24_mxfp4(packed).reshape(4, -1)[:, :200]
    np.testing.assert_array_equal(values, res.residual.dequantize().astype(np.float64))
