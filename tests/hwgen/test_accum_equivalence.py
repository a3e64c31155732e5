"""The bounded-vs-window equivalence run (``benchmarks/accum_equivalence.py``) and its
stimulus (:func:`sim.stimulus.accum.accum_steps`).

The default suite checks the stimulus itself, with the exact oracles of ``conftest``: the
fields stay in range, two-term steps respect ``max_exp_diff``, every class is drawn and
does what it claims (exact zeros, midpoints decided by the residual, cancelling residuals,
opposite signs, leading ones one place apart, specials, for MXFP4's independent pair
an accumulator cancelling the higher term and the steps a 50-bit pair window gets wrong,
and for its four terms with a residual the split's bypass word, midpoints, cluster edges,
cancellation and powers of two),
and the benchmark refuses bad
arguments in one line; 5,000 steps of NVFP4's adders cut as a ring of 8 cuts them run in
Verilator (one build). The Verilator run of 20,000 steps per unit is ``slow`` (a few
minutes for the seven builds, seconds once cached).
"""

import importlib.util
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import NAN_WORD, PINF, rne_f32, word_value

from sim.stimulus.accum import (CLASSES, PAIR_CLASSES, SPLIT_CLASSES, TWO_TERM_CLASSES,
                                accum_steps)

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "accum_equivalence.py"
_spec = importlib.util.spec_from_file_location("accum_equivalence", BENCH)
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)
#: ``{unit: () -> (terms, max_exp_diff)}``: every registered dot unit in each residual mode.
UNITS = _bench.accum_units()
TINY = Fraction(1, 1 << 400)            # below every step's lowest bit


def _steps(unit, n=20_000):
    terms, diff = UNITS[unit]()
    return terms, accum_steps(terms, n, seed=7, max_exp_diff=diff)


def _value(st, i, j):
    return Fraction(int(st.sig[i, j])) * Fraction(2) ** int(st.exp[i, j] - st.terms[j].bias)


def _decided_tie(v, lower):
    """Whether ``v`` lies halfway between two finite FP32 words and ``lower`` less than half
    their distance away."""
    down, up = rne_f32(v - TINY), rne_f32(v + TINY)
    if not v or down == up or (up & 0x7FFFFFFF) >= PINF:
        return False
    return abs(lower) < abs(word_value(up) - word_value(down)) / 2


def _of(st, name):
    return np.flatnonzero(st.kind == CLASSES.index(name))


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_fields_and_classes(unit):
    terms, st = _steps(unit)
    two = len(terms) == 2
    pair = two and UNITS[unit]()[1] is None
    split = len(terms) > 2
    for j, t in enumerate(terms):
        assert ((st.exp[:, j] >= 0) & (st.exp[:, j] <= t.top_exp)).all()
        half = 1 << (t.sig_bits - 1)
        assert ((st.sig[:, j] >= -half) & (st.sig[:, j] < half)).all()
    if two and not pair:
        assert (np.abs(st.exp[:, 0] - st.exp[:, 1]) <= UNITS[unit]()[1]).all()
    drawn = set(st.counts())
    assert drawn == {c for c in CLASSES if (two or c not in TWO_TERM_CLASSES)
                     and (pair or c not in PAIR_CLASSES)
                     and (split or c not in SPLIT_CLASSES)}
    assert min(st.counts().values()) > 200
    again = accum_steps(terms, 20_000, seed=7, max_exp_diff=UNITS[unit]()[1])
    assert (again.acc == st.acc).all() and (again.sig == st.sig).all()
    g = st.golden()
    assert (g == NAN_WORD).any() and ((g & 0x7FFFFFFF) == PINF).any() and (g == 0).any()


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_adversarial_classes_hit(unit):
    """Each class builds what it names (sampled, exact arithmetic)."""
    terms, st = _steps(unit)
    g = st.golden()
    # zero_tiny: a cancellation to +0 exactly, then tiny nonzero words on acc = +-0.
    zt = _of(st, "zero_tiny")
    on_zero = (st.acc[zt] & 0x7FFFFFFF) == 0
    assert (g[zt[~on_zero]] == 0).all() and (~on_zero).sum() > 100
    if min(t.bias for t in terms) > 150 + 24:       # MXFP4: its lowest units underflow
        assert (g[zt[on_zero]] == 0x80000000).sum() > 100   # a nonzero sum keeps its sign
    else:
        assert ((g[zt[on_zero]] & 0x7FFFFFFF) != 0).sum() > 100
    # tie: acc + main exactly halfway between two words, a residual or main's lowest bit
    # deciding; or main halfway itself, a smaller acc deciding.
    mids = decided = 0
    for i in _of(st, "tie")[:200]:
        a, t = word_value(st.acc[i]), _value(st, i, 0)
        bit = Fraction(2) ** int(st.exp[i, 0] - terms[0].bias)
        res = sum(_value(st, i, j) for j in range(1, len(terms)))
        for v, lower in ((a + t, res), (a + t - bit, bit), (a + t + bit, -bit), (t, a)):
            if _decided_tie(v, lower):
                mids += 1
                if lower:
                    assert g[i] == rne_f32(v + (TINY if lower > 0 else -TINY))
                    decided += 1
                break
    assert mids >= 150 and (unit == "hif4" or decided >= 50)
    # d1: opposite signs, |acc| above |main|, leading ones one place apart.
    for i in _of(st, "d1")[:200]:
        a, t = word_value(st.acc[i]), _value(st, i, 0)
        assert a * t < 0 and abs(t) < abs(a) < 4 * abs(t)
    # zero: exact zero sums.
    assert (g[_of(st, "zero")] == 0).sum() > 100
    if len(terms) > 2:
        _split_classes_hit(st, terms, g)
    if len(terms) != 2:
        return
    # res_cancel: the residual exactly -main in some steps, within 3 units in others.
    exact = near = 0
    for i in _of(st, "res_cancel")[:300]:
        s = _value(st, i, 0) + _value(st, i, 1)
        unit_ = Fraction(2) ** int(st.exp[i, 1] - terms[1].bias)
        exact += s == 0
        near += 0 < abs(s) <= 3 * unit_
    assert exact > 50 and near > 50
    # res_far: exponent fields exactly max_exp_diff apart (independent terms: the whole
    # field), either way round.
    far = _of(st, "res_far")
    d = st.exp[far, 0] - st.exp[far, 1]
    D = UNITS[unit]()[1] or max(t.top_exp for t in terms)
    assert (np.abs(d) == D).all() and (d < 0).any() and (d > 0).any()
    # opposite: terms of opposite signs, some far below the accumulator.
    opp = _of(st, "opposite")
    s1, s2 = st.sig[opp, 0], st.sig[opp, 1]
    assert (np.sign(s1) != np.sign(s2))[s2 != 0].all()
    below = sum(abs(_value(st, i, 0) + _value(st, i, 1))
                < Fraction(2) ** (int(st.acc[i] >> 23 & 0xFF) - 150) for i in opp[:200])
    assert below > 50
    if UNITS[unit]()[1] is not None:
        return
    # pair_edge: acc exactly -hi in some steps (the sum is lo), lo up to 80 places below.
    edge = _of(st, "pair_edge")
    cancel = 0
    for i in edge[:300]:
        t0, t1 = _value(st, i, 0), _value(st, i, 1)
        hi, lo = (t0, t1) if abs(t0) >= abs(t1) else (t1, t0)
        cancel += word_value(st.acc[i]) + hi == 0 and lo != 0
        assert abs(lo) <= abs(hi)
    assert cancel > 50
    # pair_tight: jamming lo at 2**(ph - 49) (a 50-bit pair window) lands on a midpoint
    # and rounds differently from the exact sum.
    for i in _of(st, "pair_tight")[:200]:
        t0, t1 = _value(st, i, 0), _value(st, i, 1)
        hi, lo = (t0, t1) if abs(t0) >= abs(t1) else (t1, t0)
        u = abs(hi) / 2 ** 49
        assert abs(lo) % u and (abs(lo) // (2 * u)) * 2 * u + u > abs(lo) - 2 * u
        jam = (abs(lo) // (2 * u) * 2 + 1) * u * (1 if lo > 0 else -1)
        a = word_value(st.acc[i])
        assert rne_f32(a + hi + lo) == g[i] != rne_f32(a + hi + jam)


def _split_of(t):
    """``(s, q, N, E, Xe)`` of a nonzero exact sum (``hwgen.accum_split``): ``N`` the nearest
    multiple of ``2**(q - 24)``, ``Xe`` the even one of floor(|T|) and the next, in those
    units."""
    m = abs(t)
    q = max(m.numerator.bit_length() - m.denominator.bit_length(), -126)
    while Fraction(2) ** q > m and q > -126:
        q -= 1
    while Fraction(2) ** (q + 1) <= m:
        q += 1
    g = Fraction(2) ** (q - 24)
    f = m // g
    n = f + (m - f * g >= g / 2)
    s = 1 if t > 0 else -1
    return s, q, s * n * g, t - s * n * g, (f + f % 2) * g


def _split_classes_hit(st, terms, g):
    """Each split class builds what it names (three or four independent terms)."""
    n = len(terms)
    vals = {name: [[_value(st, i, j) for j in range(n)] for i in _of(st, name)[:300]]
            for name in SPLIT_CLASSES}
    accs = {name: [word_value(st.acc[i]) if (st.acc[i] >> 23) & 0xFF != 0xFF else None
                   for i in _of(st, name)[:300]] for name in SPLIT_CLASSES}
    # split_bypass: acc exactly -s * Xe (the word the split's term cannot serve).
    hit = 0
    for v, a in zip(vals["split_bypass"], accs["split_bypass"]):
        s, q, N, E, xe = _split_of(sum(v))
        hit += a == -s * xe
    assert hit > 100
    # split_mid: N a midpoint (an odd multiple of 2**(q - 24)) with E != 0 deciding.
    mid = 0
    for v in vals["split_mid"]:
        s, q, N, E, xe = _split_of(sum(v))
        mid += (abs(N) / Fraction(2) ** (q - 24)) % 2 == 1 and E != 0
    assert mid > 150
    # split_chain: both sides of the cluster edge (29 empty places) drawn.
    gaps = []
    for v in vals["split_chain"]:
        tops = sorted((abs(x).numerator.bit_length() - abs(x).denominator.bit_length(), x)
                      for x in v if x)
        for (t1, _), (t2, _) in zip(tops, tops[1:]):
            gaps.append(t2 - t1)
    assert min(gaps) < 29 + 14 < max(gaps)
    # split_cancel: two terms cancelling exactly in most steps.
    assert sum(any(v[a] + v[b] == 0 and v[a] for a in range(n) for b in range(a + 1, n))
               for v in vals["split_cancel"]) > 150
    # split_pow2: a power of two with a term of the other sign below it.
    pow2 = 0
    for v in vals["split_pow2"]:
        for x in v:
            m = abs(x)
            if x and all(k & (k - 1) == 0 for k in (m.numerator, m.denominator)):
                pow2 += any(y and (y > 0) != (x > 0) and abs(y) < m for y in v)
                break
    assert pow2 > 150


def test_bad_arguments_one_line():
    for args in (["--unit", "mxfp4_x"], ["--steps", "0"], ["--steps", "x"],
                 ["--interleave", "3"], ["--interleave", "2,x"]):
        proc = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True,
                              text=True, cwd=REPO)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout, proc.stderr


@pytest.mark.slow
def test_equivalence_run():
    """20,000 steps per unit through both back ends in Verilator."""
    proc = subprocess.run([sys.executable, str(BENCH), "--steps", "20000", "--seed", "3"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in UNITS}
    assert sorted(rows) == sorted(UNITS)
    for unit, row in rows.items():
        assert row[1:5] == ["20,000", "0", "0", "0"], row


def test_equivalence_run_of_cut_adders():
    """Both back ends cut as a ring of 8 accumulators cuts them (NVFP4: the window sums in
    halves a stage apart), words compared P + L - 1 cycles after their step."""
    proc = subprocess.run([sys.executable, str(BENCH), "--steps", "5000", "--seed", "3",
                           "--unit", "nvfp4", "--interleave", "8"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()
            if line.split()[:1] and line.split()[0].rsplit("_i", 1)[0] in UNITS}
    assert sorted(rows) == ["nvfp4_i8"]
    assert rows["nvfp4_i8"][1:5] == ["5,000", "0", "0", "0"], rows
