"""The soak's fast paths give exactly what the plain ones give: the same random draws and
generator state, the same 2:4 residual dot products, the same NVFP4 encoder fields."""

import numpy as np
import pytest

from hif4spec import operand_layout, residual_layout


def test_uniform_bits_is_rng_integers():
    """Same values and same generator state as ``rng.integers(0, 2**w, shape, uint8)``,
    whatever the draws around them (the generator keeps half a 64-bit word between calls)."""
    from sim.stimulus.draw import uniform_bits

    for trial in range(60):
        g1, g2 = np.random.default_rng([trial, 3]), np.random.default_rng([trial, 3])
        pick = np.random.default_rng(trial + 1000)
        for _ in range(10):
            kind = int(pick.integers(0, 4))
            if kind == 0:
                w = int(pick.integers(1, 9))
                shape = (int(pick.integers(0, 40)), int(pick.integers(1, 5)))
                a = g1.integers(0, 1 << w, shape, dtype=np.uint8)
                b = uniform_bits(g2, shape, w)
                assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            elif kind == 1:
                assert g1.random() == g2.random()
            elif kind == 2:
                assert g1.integers(1, 5) == g2.integers(1, 5)
            else:
                assert np.array_equal(g1.integers(-12, 13, (3, 5)), g2.integers(-12, 13, (3, 5)))
        assert g1.bit_generator.state == g2.bit_generator.state
    with pytest.raises(ValueError):
        uniform_bits(np.random.default_rng(0), (2,), 9)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4"])
def test_kept_dot_is_scatter_then_dot(fmt):
    from sim import dot
    from sim.stimulus.draw import random_fields

    rng = np.random.default_rng(7)
    lay = residual_layout(fmt, "2:4")
    r = random_fields(lay, 3000, rng)
    w = random_fields(operand_layout(fmt), 3000, rng)
    wv, _ = dot._operand(operand_layout(fmt), w)
    dense, scale = dot._operand(lay, r)
    got, got_scale = dot._kept_dot(lay, r, wv)
    assert np.array_equal(got, dot._dot_last(dense, wv)) and np.array_equal(got_scale, scale)


def test_nvfp4_per_block_tensor_scale():
    """Quantizing with one T per block equals quantizing each block with its own T."""
    from sim.formats import nvfp4

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((400, 16)) * np.exp2(rng.integers(-30, 30, (400, 1)))) \
        .astype(np.float32)
    x[5, 3], x[9, 0] = np.inf, np.nan
    t = np.exp2(rng.integers(-20, 20, 400)).astype(np.float64) * rng.choice([1, 1.5], 400)
    got = nvfp4.quantize_groups(x, t)
    for i in range(0, 400, 37):
        one = nvfp4.quantize_groups(x[i:i + 1], float(t[i]))
        for k in one:
            assert np.array_equal(got[k][i:i + 1], one[k]), (i, k)
