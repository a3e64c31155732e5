"""Named step streams per unit (edge cases the random stimulus rarely hits).

``named_cases(unit, residual)`` returns ``[(name, stream), ...]``; units without an entry in
``CASES`` get none. A stream is a ``sim.bench.stimulus`` dict.
"""

import numpy as np

from .streams import stream as _stream, loop as _loop, single as _single

__all__ = ["CASES", "named_cases", "hif4_cases"]


def _hif4_operand(n, *, elem=0, l3=0, l2=0, scale=48 << 2):
    return {"elem": np.full((n, 64), elem, dtype=np.uint8),
            "l3": np.full((n, 16), l3, dtype=np.uint8),
            "l2": np.full((n, 8), l2, dtype=np.uint8),
            "scale": np.full((n,), scale, dtype=np.uint8)}


def _hif4_residual(residual, n, *, elem=0, scale=48 << 2, l3=0, l2=0):
    if residual == "none":
        return None
    if residual == "dense":
        return _hif4_operand(n, elem=elem, l3=l3, l2=l2, scale=scale)
    return {"elem": np.full((n, 32), elem, dtype=np.uint8),
            "pos": np.tile(np.array([0, 3], dtype=np.uint8), (n, 16)),
            "l3": np.full((n, 16), l3, dtype=np.uint8),
            "l2": np.full((n, 8), l2, dtype=np.uint8),
            "scale": np.full((n,), scale, dtype=np.uint8)}


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


CASES = {"hif4": hif4_cases}

# MXFP4 / NVFP4 cases live beside this module (owned by the MX/NV units).
from .cases_mxnv import mxfp4_cases, nvfp4_cases  # noqa: E402

CASES.update(mxfp4=mxfp4_cases, nvfp4=nvfp4_cases)


def named_cases(unit, residual):
    """``[(name, stream)]`` for ``unit`` (empty when none are registered)."""
    fn = CASES.get(unit)
    return fn(residual) if fn else []
