"""Named step streams for the MXFP4 and NVFP4 units (edge cases random stimulus rarely hits).

``mxfp4_cases(residual)`` and ``nvfp4_cases(residual)`` return ``[(name, stream), ...]`` in
the ``sim.bench.stimulus`` stream format (``sim.dot`` step fields); they are registered in
``sim.bench.cases.CASES``. ``scale_pair_stream(unit)`` is the exhaustive stream of every
scale-code pair through the whole unit (65536 steps; used by the slow tests).
"""

import numpy as np

from .streams import stream as _stream, loop as _loop, single as _single

__all__ = ["mxfp4_cases", "nvfp4_cases", "scale_pair_stream", "element_pair_stream"]

_ONE = {"mxfp4": 127, "nvfp4": 7 << 3}          # scale code of 1.0
_NAN = {"mxfp4": 0xFF, "nvfp4": 0x7F}
_MAXC = {"mxfp4": 0xFE, "nvfp4": 0x7E}          # largest finite scale code
_NBLK = {"mxfp4": 2, "nvfp4": 4}


def _operand(unit, n, *, elem=0, scale=None):
    nb = _NBLK[unit]
    return {"elem": np.full((n, nb, 64 // nb), elem, dtype=np.uint8),
            "scale": np.full((n, nb), _ONE[unit] if scale is None else scale, dtype=np.uint8)}


def _residual(residual, n, *, elem=0, scale=127):
    if residual == "none":
        return None
    if residual == "dense":
        return _operand("mxfp4", n, elem=elem, scale=scale)
    return {"elem": np.full((n, 2, 16), elem, dtype=np.uint8),
            "pos": np.tile(np.array([0, 3], dtype=np.uint8), (n, 2, 8)),
            "scale": np.full((n, 2), scale, dtype=np.uint8)}


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
    big = dict(elem=7, scale=_MAXC[unit])
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
    a["scale"][:] = np.clip(_ONE[unit] + rng.integers(-6, 7, a["scale"].shape), 0, 126)
    cases.append(("alternating_signs", _stream(a, w, res(n, elem=3), *_loop(n))))

    # NaN codes in a, w (and r) on different steps and blocks; NaN sticks until first.
    n = 8
    a, w = _operand(unit, n, elem=3), _operand(unit, n, elem=2)
    r = res(n, elem=1)
    a["scale"][1, 0] = _NAN[unit]
    w["scale"][3, -1] = _NAN[unit]
    if unit == "nvfp4":
        a["scale"][4, 2] = 0xFF                  # bit 7 set: still NaN (low bits 0x7F)
        w["scale"][6, 1] = 0x80 | _ONE[unit]     # bit 7 set on a finite code: ignored
    if r is not None:
        r["scale"][6, 1] = 0xFF
    first = np.array([1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    cases.append(("nan_scale", _stream(a, w, r, first, np.ones(n, dtype=bool))))

    # Exact cancellation to +0 across two steps (v then -v).
    n = 2
    a = _operand(unit, n, elem=7, scale=_ONE[unit] + 9)
    w = _operand(unit, n, elem=5, scale=_ONE[unit] - 3)
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
    nb = _NBLK[unit]
    per = 64 // nb
    codes = np.arange(256)
    n = 256
    a, w = _operand(unit, n), _operand(unit, n)
    for b in range(nb):
        for i in range(per):
            shift = (b * per + i) * 37 % 256       # each position sees every pair once
            a["elem"][:, b, i] = (codes + shift) % 256 // 16
            w["elem"][:, b, i] = (codes + shift) % 16
    return _stream(a, w, None, *_single(n))
