"""Shared test oracles: exact values of the spec's codes and FP32 rounding.

Written from ``docs/formats.md`` (section 1 tables, section 7 accumulation) with
``fractions.Fraction`` and the standard library only, so they stay independent of the code
under test (``sim``, ``hwgen``, ``hif4spec``). Test modules import them by name
(``from conftest import rne_f32, word_value``); pytest puts ``tests/`` on the import path.
Codes may be Python or NumPy integers.

- element and scale codes -> exact ``Fraction`` (None for a NaN code): :func:`s1p2`,
  :func:`e2m1`, :func:`e6m2`, :func:`e8m0`, :func:`ue4m3`;
- FP32 words: :func:`word_value` (finite word -> ``Fraction``) and :func:`rne_f32`
  (``Fraction`` -> word, round to nearest even, gradual underflow, overflow to +-Inf).

One hook besides: :func:`pytest_configure` loads matplotlib first in every test process.
"""

from fractions import Fraction

from hif4spec import resolve, units_of_kind

PZERO, NZERO, PINF, NINF, NAN_WORD = 0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000

_E2M1 = [Fraction(v) for v in ("0", "1/2", "1", "3/2", "2", "3", "4", "6")]


def s1p2(code):
    """S1P2 (HiF4 element): bit 3 sign, bits 0..2 k, value k/4."""
    code = int(code)
    k = Fraction(code & 7, 4)
    return -k if code & 8 else k


def e2m1(code):
    """E2M1: bit 3 sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    code = int(code)
    mag = _E2M1[code & 7]
    return -mag if code & 8 else mag


def e6m2(code):
    """E6M2 (HiF4 scale): 2**(e - 48) * (1 + m/4); 0xFF is NaN (None)."""
    code = int(code)
    if code == 0xFF:
        return None
    return Fraction(2) ** ((code >> 2) - 48) * Fraction(4 + (code & 3), 4)


def e8m0(code):
    """E8M0 (MXFP4 scale): 2**(code - 127); 0xFF is NaN (None)."""
    code = int(code)
    return None if code == 0xFF else Fraction(2) ** (code - 127)


def ue4m3(code):
    """UE4M3 (NVFP4 scale): E4M3 without sign, bit 7 ignored; 0x7F is NaN (None)."""
    code = int(code) & 0x7F
    if code == 0x7F:
        return None
    e, m = code >> 3, code & 7
    if e == 0:
        return Fraction(m, 8) * Fraction(2) ** -6
    return Fraction(8 + m, 8) * Fraction(2) ** (e - 7)


def word_value(word):
    """Exact value of a finite FP32 word (``ValueError`` for Inf and NaN)."""
    word = int(word)
    e, f = (word >> 23) & 0xFF, word & 0x7FFFFF
    if e == 0xFF:
        raise ValueError(f"{word:#010x} is not a finite FP32 word")
    v = Fraction(f, 1 << 149) if e == 0 else Fraction((1 << 23) | f) * Fraction(2) ** (e - 150)
    return -v if word >> 31 else v


def rne_f32(v, negative_zero=False):
    """FP32 word of the exact value ``v``: round to nearest, ties to even, gradual underflow,
    overflow to +-Inf. A nonzero ``v`` that rounds to zero keeps its sign; ``v == 0`` gives
    -0 if ``negative_zero`` else +0."""
    v = Fraction(v)
    if v == 0:
        return NZERO if negative_zero else PZERO
    sign = NZERO if v < 0 else 0
    m = abs(v)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    ulp = Fraction(2) ** max(e - 23, -149)
    n, rem = divmod(m, ulp)
    n = int(n)
    if rem > ulp / 2 or (rem == ulp / 2 and n & 1):
        n += 1
    if n * ulp >= Fraction(2) ** 128:
        return sign | PINF
    if n < 1 << 23:                         # subnormal (or zero): the field is n
        return sign | n
    while n >= 1 << 24:                     # rounding carried into the next binade
        n //= 2
        ulp *= 2
    exp = ulp.numerator.bit_length() - 1 + 23 + 127 if ulp >= 1 else \
        23 + 127 - (ulp.denominator.bit_length() - 1)
    return sign | exp << 23 | (n - (1 << 23))


#: The configurations the default suite simulates in Verilator, each once
#: (``tests/sim/bench/test_bench_coverage.py``), as ``(unit, residual, stages, lanes,
#: accum)``: every (unit, residual) pair, every stage count 1-4, every accumulator back end
#: of every unit, 16 lanes except two 32-lane units and one 64-lane unit. The full grid is
#: marked slow.
CI_CONFIGS = [
    ("hif4", "none", 3, 16, "window"),      # also built by test_bench_hif4 and test_sweep_ray
    ("hif4", "2:4", 1, 16, "bounded"),     # also built by test_bench_hif4's test_cli_verify
    ("hif4", "dense", 4, 16, "trunc"),
    ("mxfp4", "none", 2, 16, "bounded"),
    ("mxfp4", "2:4", 3, 32, "window"),
    ("mxfp4", "2:4", 2, 16, "bounded"),
    ("mxfp4", "dense", 4, 16, "trunc"),
    ("nvfp4", "none", 3, 16, "window"),     # also built by test_sweep_ray
    ("nvfp4", "none", 2, 64, "bounded"),
    ("nvfp4", "none", 1, 32, "trunc"),
]
# Every registered dot unit gets a configuration: one missing from the hand-picked list
# above runs at its defaults with 16 lanes.
CI_CONFIGS += [(u.name, p["residual"], p["stages"], p["lanes"], p["accum"])
               for u in units_of_kind("dot") if u.name not in {c[0] for c in CI_CONFIGS}
               for p in [resolve(u.name, lanes=16)]]
CI_IDS = [f"{u}-{r}-s{s}-l{n}-{a}" for u, r, s, n, a in CI_CONFIGS]


def pytest_configure(config):
    """Load matplotlib and its compiled (pybind11) modules once per test process, with the
    Agg backend, before any test has loaded other native libraries. Many tests plot in
    process; a CI worker that first imported ``matplotlib.pyplot`` late, after hundreds of
    other tests, failed inside ``matplotlib.ft2font``'s import (a pybind11 ``SystemError``:
    ``__getattr__`` returned NULL without setting an exception), which the same test alone
    or after its own module never does. Loading it first takes test order out of it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
