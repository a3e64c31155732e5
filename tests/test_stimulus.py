"""The stimulus library (``sim.stimulus``) without a simulator: field shapes and ranges from
``hif4spec``, payload words against the golden model's step packer, the hand-derived words
and how they travel through concatenation into a bench stream."""

import numpy as np
import pytest

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
