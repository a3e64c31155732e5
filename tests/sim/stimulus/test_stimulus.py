"""The stimulus library (``sim.stimulus``) without a simulator: field shapes and ranges from
``hif4spec``, payload words against the golden model's step packer, the hand-derived words
and how they travel through concatenation into a bench stream, and the adversarial K-loops
of the named cases checked against the situation each one names."""

from fractions import Fraction

import numpy as np
import pytest
from conftest import NZERO, PZERO, rne_f32, word_value

from hif4spec import STEP_LAYOUTS, payload_fields, residual_layout, units_of_kind
from sim import dot
from sim.bench.runner import make_stream
from sim.stimulus import (checked_cases, concat, expected_words, layouts, named_cases,
                          pack_payloads, payload_offsets, random_fields, random_steps, take)

UNITS = {u.name: u for u in units_of_kind("dot")}
PAIRS = [(u, r) for u in UNITS for r in UNITS[u].residuals]


@pytest.mark.parametrize("name", list(STEP_LAYOUTS))
def test_random_fields_follow_the_step_layout(name):
    lay = STEP_LAYOUTS[name]
    f = random_fields(lay, 400, np.random.default_rng(1), nan_prob=0.1)
    assert list(f) == list(lay.fields)
    for field, v in f.items():
        assert v.shape == (400, *lay.shape(field)) and v.dtype == np.uint8
        assert v.max() < 1 << lay.width(field)
        if field != "scale":                # uniform over the codes: every code occurs
            assert len(np.unique(v)) == 1 << lay.width(field)


@pytest.mark.parametrize("unit, residual", PAIRS)
def test_payload_words_hold_the_golden_packed_steps(unit, residual):
    st = random_steps(unit, 60, np.random.default_rng(2), residual)
    words = pack_payloads(None, unit, residual, st)
    offsets = payload_offsets(unit, residual)
    assert [(k, v["width"]) for k, v in offsets.items()] == payload_fields(unit, residual)
    width = sum(bits for _, bits in payload_fields(unit, residual))
    assert words.shape == (60, (width + 7) // 8)
    ints = [int.from_bytes(w.tobytes(), "little") for w in words]
    op, res = layouts(unit, residual)
    for name, lay in [("a", op), ("w", op)] + ([("r", res)] if res else []):
        off, bits = offsets[name]["offset"], offsets[name]["width"]
        got = [(x >> off) & ((1 << bits) - 1) for x in ints]
        assert got == dot.pack_steps(lay.name, st[name]), name
    for name in ("first", "last"):
        assert [bool(x >> offsets[name]["offset"] & 1) for x in ints] == st[name].tolist()
    assert max(ints).bit_length() <= width


def test_payload_rejects_a_manifest_that_disagrees_with_the_layout():
    st = random_steps("nvfp4", 3, np.random.default_rng(0))
    manifest = {"payload": payload_offsets("nvfp4", "none")}
    manifest["payload"]["w"] = dict(manifest["payload"]["w"], width=280)
    with pytest.raises(ValueError, match="payload field 'w' has 280 bits, but a nvfp4 step"):
        pack_payloads(manifest, "nvfp4", "none", st)
    st["a"]["elem"][1, 2, 3] = 16
    with pytest.raises(ValueError, match="a field 'elem' holds values outside 0..15"):
        pack_payloads(None, "nvfp4", "none", st)


def test_residual_layouts_are_the_spec_ones():
    for unit, residual in PAIRS:
        assert layouts(unit, residual)[1] == residual_layout(UNITS[unit].fmt, residual)
    with pytest.raises(ValueError, match="Residual mode of nvfp4 must be one of none"):
        layouts("nvfp4", "2:4")


@pytest.mark.parametrize("unit, residual", PAIRS)
def test_named_cases_carry_the_hand_derived_words(unit, residual):
    checked = checked_cases(unit, residual)
    named = named_cases(unit, residual)
    assert [n for n, _ in named[:len(checked)]] == [n for n, _ in checked]
    assert len(named) > len(checked)
    for _, s in named:
        assert s["first"][0]
        assert all(s["last"][k] for k in s.get("expect", {}))
    whole = concat([s for _, s in named])
    assert len(whole.get("expect", {})) == sum(len(s.get("expect", {})) for _, s in named)
    # hand-derived words for every pair but MXFP4 2:4 (its own golden tests have them)
    assert bool(whole.get("expect")) == ((unit, residual) != ("mxfp4", "2:4"))
    words, steps = expected_words(unit, residual, whole)
    acc = dict(zip(steps.tolist(), words.tolist()))
    assert all(acc[k] == v for k, v in whole.get("expect", {}).items())
    # what the bench runs: the named cases first, their words included
    bench = make_stream(unit, residual, len(whole["first"]) + 100, seed=1)
    assert bench.get("expect", {}) == whole.get("expect", {})


def test_expected_words_catch_a_wrong_hand_word():
    name, s = checked_cases("hif4", "none")[0]
    k, word = next(iter(s["expect"].items()))
    s["expect"][k] = word ^ 1
    with pytest.raises(AssertionError, match=f"at step {k}, the hand-derived word is"):
        expected_words("hif4", "none", s)


def test_take_and_concat_keep_the_words_of_the_kept_steps():
    (_, s0), (_, s1) = checked_cases("nvfp4")[:2]
    n0 = len(s0["first"])
    both = concat([s0, s1])
    assert both["expect"] == {**s0["expect"], **{n0 + k: v for k, v in s1["expect"].items()}}
    cut = take(both, n0 + 1)
    assert cut["expect"] == {k: v for k, v in both["expect"].items() if k <= n0}
    assert cut["last"][-1]


#: The adversarial K-loops every dot unit's named cases hold; opposite_terms_far_below only
#: where a step has two or more terms (all but HiF4 without a residual).
LOOPS = ("cancel_to_zero_then_tiny", "tie_far_below", "opposite_terms_far_below",
         "cancel_but_rounding_error")
#: Binades from the half ulp of tie_far_below down to the contribution deciding it: 40 or
#: more, except where the format cannot: one HiF4 term spans 22 bits, NVFP4 steps lie
#: between 2**-20 and 2**29.
TIE_DEPTH = {("hif4", "none"): 21, ("nvfp4", "none"): 24}


def _ulp(word):
    """The ulp of a finite FP32 word."""
    return Fraction(2) ** (max((int(word) >> 23) & 0xFF, 1) - 150)


def _off_tie(x, u):
    """``(tie, x - tie)``: the odd multiple of u/2 nearest to ``x``."""
    tie = (Fraction(x) / u).__floor__() * u + u / 2
    return tie, x - tie


@pytest.mark.parametrize("unit, residual", PAIRS)
def test_adversarial_loops_hit_their_situation(unit, residual):
    """Each adversarial K-loop of the named cases takes the golden accumulator through the
    situation it is named for, so an edit of the cases cannot quietly lose it."""
    cases = dict(named_cases(unit, residual))
    names = [n for n in LOOPS if n != "opposite_terms_far_below" or
             (unit, residual) != ("hif4", "none")]
    assert [n for n in cases if n in LOOPS] == names
    for name in names:
        s = cases[name]
        n = len(s["first"])
        assert 2 <= n <= 4, name
        assert s["first"].tolist() == [True] + [False] * (n - 1)
        assert s["last"].tolist() == [False] * (n - 1) + [True]
        words = dot.run_steps(unit, s["a"], s["w"], s["first"], r=s["r"],
                              residual=residual).tolist()
        vals = dot.step_value(unit, s["a"], s["w"], s["r"], residual)
        acc = [word_value(x) for x in words]
        exact = [prev + v for prev, v in zip([Fraction(0)] + acc, vals)]
        assert words == [rne_f32(x) for x in exact], name      # one rounding per step

        if name == "cancel_to_zero_then_tiny":
            assert PZERO in words           # exact cancellation of a large sum: +0
            k = words.index(PZERO)
            assert k > 0 and sum(vals[:k + 1]) == 0 and abs(acc[k - 1]) > 2 ** 28
            tiny = vals[k + 1:]             # then steps 40+ binades below, not lost
            assert tiny and all(0 < abs(v) < abs(acc[k - 1]) * Fraction(2) ** -40
                                for v in tiny)
            assert acc[k + 1] != 0
            if unit == "mxfp4":             # a nonzero sum rounding to zero keeps its sign
                assert exact[-1] < 0 and words[-1] == NZERO
            else:
                assert acc[-1] == sum(tiny) != 0

        elif name == "tie_far_below":       # a tie in the large part, decided far below
            u, depth = _ulp(words[-2]), TIE_DEPTH.get((unit, residual), 40)
            tie, below = _off_tie(exact[-1], u)
            assert below != 0 and abs(below) <= u / 2 * Fraction(2) ** -depth
            assert rne_f32(tie) != words[-1]

        elif name == "opposite_terms_far_below":
            P, E, _ = dot.step_terms(unit, s["a"], s["w"], s["r"], residual)
            terms = [Fraction(int(p)) * Fraction(2) ** int(e) for p, e in zip(P[-1], E[-1])
                     if p]
            assert len(terms) == 2
            (t1, t2), a = terms, acc[-2]
            assert t1 * t2 < 0 and max(abs(t1), abs(t2)) < abs(a) * Fraction(2) ** -20
            # only their exact sum gives the word: not either alone, not one after the other
            others = [rne_f32(a + t1), rne_f32(a + t2),
                      rne_f32(word_value(rne_f32(a + t1)) + t2),
                      rne_f32(word_value(rne_f32(a + t2)) + t1)]
            assert words[-1] not in others, [hex(x) for x in others]
            u = _ulp(words[-2])             # and that sum is a tie but for 10+ binades below
            tie, below = _off_tie(exact[-1], u)
            assert below != 0 and abs(below) <= u / 2 * Fraction(2) ** -10
            assert rne_f32(tie) != words[-1]

        else:                               # cancel_but_rounding_error
            inexact = [i for i in range(n) if acc[i] != exact[i]]
            assert len(inexact) == 1 and inexact[0] < n - 1
            j = inexact[0]                  # acc = RNE(x), then -x exactly: the error is left
            assert sum(vals) == 0
            assert acc[-1] == acc[j] - exact[j] != 0
