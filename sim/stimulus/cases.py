"""Named edge-case streams per unit, and the exhaustive scale and element pair streams.

:func:`named_cases` is what the RTL benches run before their random steps: the hand-checked
streams of :mod:`sim.stimulus.checked` (with their expected words) followed by the edge cases
here, which random stimulus rarely hits (every scale code with zero elements, the largest
magnitudes, alternating signs, NaN scales until the next ``first``, cancellation to +0, the
smallest results, blocks far apart); these carry no hand-derived words, the golden model
gives them. :func:`scale_pair_stream` and :func:`element_pair_stream` are exhaustive (slow
tests).
"""

import numpy as np

from hif4spec import operand_layout, step_layout

from .checked import checked_cases
from .streams import fields, layouts, loop as _loop, scale_code, single as _single, \
    stream as _stream

__all__ = ["named_cases", "edge_cases", "scale_pair_stream", "element_pair_stream"]


def _hif4_operand(n, *, elem=0, l3=0, l2=0, scale=None):
    return fields(operand_layout("hif4"), n, elem=elem, l3=l3, l2=l2,
                  scale=scale_code("hif4", "one") if scale is None else scale)


def _hif4_residual(residual, n, *, elem=0, scale=None, l3=0, l2=0):
    if residual == "none":
        return None
    if residual == "dense":
        return _hif4_operand(n, elem=elem, l3=l3, l2=l2, scale=scale)
    return fields(step_layout("hif4-2:4"), n, elem=elem, pos=[0, 3] * 16, l3=l3, l2=l2,
                  scale=scale_code("hif4", "one") if scale is None else scale)


def hif4_cases(residual):
    """Named HiF4 streams (see the names)."""
    cases = []
    rng = np.random.default_rng(12345)

    # All-zero blocks (every scale code, including the NaN code 0xFF last).
    n = 256
    scales = np.arange(256, dtype=np.uint8)
    a = _hif4_operand(n)
    a["scale"] = scales
    w = _hif4_operand(n)
    w["scale"] = scales[::-1].copy()
    cases.append(("all_zero", _stream(a, w, _hif4_residual(residual, n), *_single(n))))

    # Maximum magnitude: k = 7, all micro-exponents 1, largest finite scale, 64-step loop.
    n = 64
    big = dict(elem=7, l3=1, l2=1, scale=0xFE)
    cases.append(("max_magnitude", _stream(_hif4_operand(n, **big), _hif4_operand(n, **big),
                                           _hif4_residual(residual, n, **big), *_loop(n))))
    neg = _hif4_operand(n, **big)
    neg["elem"][:] = 15
    cases.append(("max_magnitude_negative",
                  _stream(_hif4_operand(n, **big), neg, _hif4_residual(residual, n, **big),
                          *_loop(n))))

    # Alternating signs within blocks and between steps.
    n = 64
    a = _hif4_operand(n, elem=5)
    a["elem"][:, 1::2] |= 8
    w = _hif4_operand(n, elem=6)
    w["elem"][1::2] ^= 8
    a["scale"][:] = rng.integers(150, 230, n)
    cases.append(("alternating_signs", _stream(a, w, _hif4_residual(residual, n, elem=3),
                                               *_loop(n))))

    # NaN scale codes in a, w and r; the NaN sticks until the next first step.
    n = 8
    a, w = _hif4_operand(n, elem=3), _hif4_operand(n, elem=2)
    r = _hif4_residual(residual, n, elem=1)
    a["scale"][1] = 0xFF
    w["scale"][3] = 0xFF
    if r is not None:
        r["scale"][6] = 0xFF
    first = np.array([1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    last = np.ones(n, dtype=bool)
    cases.append(("nan_scale", _stream(a, w, r, first, last)))

    # Cancellation to +0: v then -v in one loop (an exact zero sum gives +0).
    n = 2
    a = _hif4_operand(n, elem=7, scale=0xC7)
    w = _hif4_operand(n, elem=5, scale=0x33)
    w["elem"][1] |= 8
    r = _hif4_residual(residual, n, elem=2, scale=0x40)
    if r is not None:
        r["elem"][1] |= 8
    cases.append(("cancel_to_zero", _stream(a, w, r, [1, 0], [0, 1])))

    # Smallest results: smallest scales and one k=1 product (2**-100), and a huge value
    # cancelled exactly leaving the smallest residual (main/residual scales far apart).
    n = 3
    a = _hif4_operand(n, scale=0)
    w = _hif4_operand(n, scale=0)
    a["elem"][:, 0] = 1
    w["elem"][:, 0] = 1
    w["elem"][1, 0] = 9
    r = _hif4_residual(residual, n, scale=0)
    cases.append(("smallest", _stream(a, w, r, [1, 1, 1], [1, 1, 1])))
    if residual != "none":
        n = 2
        a = _hif4_operand(n, elem=4, scale=0xFE)
        w = _hif4_operand(n, elem=4, scale=0xFE)
        w["elem"][1] |= 8
        r = _hif4_residual(residual, n, scale=0)
        r["elem"][1, 0] = 1
        cases.append(("cancel_keeps_tiny_residual", _stream(a, w, r, [1, 0], [0, 1])))
    return cases


def _operand(unit, n, *, elem=0, scale=None):
    return fields(operand_layout(unit), n, elem=elem,
                  scale=scale_code(unit, "one") if scale is None else scale)


def _residual(residual, n, *, elem=0, scale=127):
    if residual == "none":
        return None
    if residual == "dense":
        return _operand("mxfp4", n, elem=elem, scale=scale)
    return fields(step_layout("mxfp4-2:4"), n, elem=elem, pos=[0, 3] * 8, scale=scale)


def _common_cases(unit, residual):
    """Cases that read the same for both formats (E2M1 elements, a scale per block)."""
    cases = []
    rng = np.random.default_rng(4242)
    res = (lambda n, **kw: _residual(residual, n, **kw)) if unit == "mxfp4" else (
        lambda n, **kw: None)

    # All-zero elements under every scale code (NaN codes included): +0 or NaN.
    n = 256
    a, w = _operand(unit, n), _operand(unit, n)
    a["scale"][:] = np.arange(256, dtype=np.uint8)[:, None]
    w["scale"][:] = np.arange(256, dtype=np.uint8)[::-1, None]
    cases.append(("all_zero", _stream(a, w, res(n), *_single(n))))

    # Largest magnitudes: 6 x 6 everywhere, largest finite scales, one 64-step loop (and
    # negative); for MXFP4 this overflows to Inf, which then stays.
    n = 64
    big = dict(elem=7, scale=scale_code(unit, "max"))
    r = res(n, elem=7, scale=0xFE)
    cases.append(("max_magnitude", _stream(_operand(unit, n, **big), _operand(unit, n, **big),
                                           r, *_loop(n))))
    neg = _operand(unit, n, **big)
    neg["elem"][:] = 15
    cases.append(("max_magnitude_negative", _stream(_operand(unit, n, **big), neg, r,
                                                    *_loop(n))))

    # Alternating signs inside blocks and between steps, random scales near 1.
    n = 64
    a = _operand(unit, n, elem=5)
    a["elem"][:, :, 1::2] |= 8
    w = _operand(unit, n, elem=6)
    w["elem"][1::2] ^= 8
    a["scale"][:] = np.clip(scale_code(unit, "one") + rng.integers(-6, 7, a["scale"].shape), 0, 126)
    cases.append(("alternating_signs", _stream(a, w, res(n, elem=3), *_loop(n))))

    # NaN codes in a, w (and r) on different steps and blocks; NaN sticks until first.
    n = 8
    a, w = _operand(unit, n, elem=3), _operand(unit, n, elem=2)
    r = res(n, elem=1)
    a["scale"][1, 0] = scale_code(unit, "nan")
    w["scale"][3, -1] = scale_code(unit, "nan")
    if unit == "nvfp4":
        a["scale"][4, 2] = 0xFF                  # bit 7 set: still NaN (low bits 0x7F)
        w["scale"][6, 1] = 0x80 | scale_code(unit, "one")     # bit 7 set on a finite code: ignored
    if r is not None:
        r["scale"][6, 1] = 0xFF
    first = np.array([1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    cases.append(("nan_scale", _stream(a, w, r, first, np.ones(n, dtype=bool))))

    # Exact cancellation to +0 across two steps (v then -v).
    n = 2
    a = _operand(unit, n, elem=7, scale=scale_code(unit, "one") + 9)
    w = _operand(unit, n, elem=5, scale=scale_code(unit, "one") - 3)
    w["elem"][1] |= 8
    r = res(n, elem=2, scale=90)
    if r is not None:
        r["elem"][1] |= 8
    cases.append(("cancel_to_zero", _stream(a, w, r, [1, 0], [0, 1])))
    return cases


def mxfp4_cases(residual):
    """Named MXFP4 streams (see the names)."""
    cases = _common_cases("mxfp4", residual)

    # Blocks far apart: 2**252 (overflow to Inf), -2**-256 alone (rounds to -0), 2**-16 with
    # a 2**-256 sticky, and 2**-150 (a tie between 0 and 2**-149) broken upward by 2**-256.
    n = 4
    a, w = _operand("mxfp4", n), _operand("mxfp4", n)
    a["elem"][:, :, 0] = w["elem"][:, :, 0] = 1           # 0.5 * 0.5 in each block
    a["scale"][:, 0] = w["scale"][:, 0] = [254, 0, 120, 0]
    a["scale"][:, 1] = w["scale"][:, 1] = [0, 0, 0, 53]
    w["elem"][1, 0, 0] = 9                                 # -0.5
    a["elem"][1, 1, 0] = 0
    cases.append(("far_apart_blocks", _stream(a, w, _residual(residual, n, scale=0),
                                              *_single(n))))

    # Two huge block sums (36 * 2**254 and its negative) cancel exactly: +0, or with a
    # residual exactly the residual's 3 * 2**0 (2**-127 * 2**127 scales).
    n = 2
    a, w = _operand("mxfp4", n, scale=0xFE), _operand("mxfp4", n, scale=0xFE)
    a["elem"][:, 0, 0] = w["elem"][:, 0, 0] = 7
    a["elem"][:, 1, 0] = 15
    w["elem"][:, 1, 0] = 7
    r = _residual(residual, n, scale=0)
    if r is not None:
        r["elem"][:, 0, 0] = 1                              # position 0 (2:4 pos 0 too)
    cases.append(("huge_cancel", _stream(a, w, r, [1, 1], [1, 1])))

    # Duplicate residual positions (both kept elements of a micro-group on one position).
    if residual == "2:4":
        n = 16
        rng = np.random.default_rng(99)
        a, w = _operand("mxfp4", n, elem=2), _operand("mxfp4", n, elem=3)
        r = _residual(residual, n, elem=5, scale=125)
        r["pos"][:] = rng.integers(0, 4, (n, 2, 1), dtype=np.uint8)  # all on one position
        w["elem"][:] = rng.integers(0, 16, w["elem"].shape, dtype=np.uint8)
        cases.append(("duplicate_positions", _stream(a, w, r, *_loop(n))))
    return cases


def nvfp4_cases(residual):
    """Named NVFP4 streams (see the names)."""
    cases = _common_cases("nvfp4", residual)

    # Subnormal and zero UE4M3 scales: every code 0..7 on both sides, one product each.
    n = 64
    a, w = _operand("nvfp4", n), _operand("nvfp4", n)
    codes = np.arange(64)
    a["scale"][:] = (codes % 8)[:, None]
    w["scale"][:] = (codes // 8)[:, None]
    a["elem"][:, :, 0] = 1
    w["elem"][:, :, 0] = 1
    cases.append(("subnormal_scales", _stream(a, w, None, *_single(n))))

    # Block terms at the extreme shifts (0 and 28) in one step, and their cancellation.
    n = 3
    a, w = _operand("nvfp4", n, elem=7), _operand("nvfp4", n, elem=7)
    a["scale"][:] = [[1, 0x7E, 1, 0x7E]] * n
    w["scale"][:] = [[1, 0x7E, 1, 0x7E]] * n
    a["elem"][1, 3] |= 8
    a["elem"][2, 1] |= 8
    cases.append(("extreme_block_shifts", _stream(a, w, None, *_single(n))))
    return cases


def scale_pair_stream(unit):
    """Every scale-code pair (65536 steps), one per step, through the whole datapath.

    Step ``k`` has activation code ``k // 256`` and weight code ``k % 256`` on every block,
    one 1 x 1 product in block 0 and a random product in the last block; every step is
    its own loop.
    """
    n = 65536
    rng = np.random.default_rng(65536)
    a, w = _operand(unit, n), _operand(unit, n)
    k = np.arange(n)
    a["scale"][:] = (k // 256)[:, None]
    w["scale"][:] = (k % 256)[:, None]
    a["elem"][:, 0, 0] = w["elem"][:, 0, 0] = 2
    a["elem"][:, -1, 1] = rng.integers(0, 16, n)
    w["elem"][:, -1, 1] = rng.integers(0, 16, n)
    return _stream(a, w, None, *_single(n))


def element_pair_stream(unit):
    """Every E2M1 pair in every element position (a 16 x 16 table per position)."""
    lay = operand_layout(unit)
    nb, per = lay.shape("elem")
    codes = np.arange(256)
    n = 256
    a, w = _operand(unit, n), _operand(unit, n)
    for b in range(nb):
        for i in range(per):
            shift = (b * per + i) * 37 % 256       # each position sees every pair once
            a["elem"][:, b, i] = (codes + shift) % 256 // 16
            w["elem"][:, b, i] = (codes + shift) % 16
    return _stream(a, w, None, *_single(n))


_EDGE = {"hif4": hif4_cases, "mxfp4": mxfp4_cases, "nvfp4": nvfp4_cases}


def edge_cases(unit, residual="none"):
    """``[(name, stream), ...]``: the edge cases of ``unit`` (no hand-derived words)."""
    layouts(unit, residual)
    return _EDGE[unit](residual)


def named_cases(unit, residual="none"):
    """``[(name, stream), ...]``: :func:`sim.stimulus.checked_cases` then :func:`edge_cases`."""
    return checked_cases(unit, residual) + edge_cases(unit, residual)
