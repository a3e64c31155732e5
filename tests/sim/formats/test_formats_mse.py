"""Gaussian MSE ratios NVFP4/HiF4 and MXFP4/HiF4 against the HiF4 paper (1.32 and 1.89).

Samples: 512 x 256 Gaussian values per sigma, groups along axis 0, sigma = 0.01 * 2^k for
k = 3..16, NVFP4 without tensor scale; the per-sigma ratios are averaged. This is a
correctness check of the quantizers (within 3% of the paper), not a timing.
"""

import pytest

from sim.formats.bench import gaussian_mse_ratios


def test_gaussian_mse_ratios_match_the_paper():
    nv, mx = gaussian_mse_ratios(seed=0)
    assert nv == pytest.approx(1.32, rel=0.03)
    assert mx == pytest.approx(1.89, rel=0.03)
