"""The multi-format dot units (``hwgen.multi``): registry entries, payload, term slots, and
one configuration switching among HiF4, MXFP4 and NVFP4 simulated against the golden model.
"""

import numpy as np
import pytest

from hif4spec import (FORMAT_FIELD, MULTI_FORMATS, UNITS, all_configs, module_name,
                      parse_module_name, payload_fields, resolve, standard_set, units_of_kind)
from hwgen.accum import AccumSpec
from hwgen.accum_bounded import WIDE
from hwgen.multi import _own_terms, slot_terms
from hwgen.units import build_unit

MULTI = [u.name for u in UNITS.values() if u.formats]


def test_every_set_of_two_or_more_formats_is_a_unit():
    sets = {UNITS[u].formats for u in MULTI}
    assert sets == {("hif4", "mxfp4", "nvfp4"), ("hif4", "mxfp4"), ("hif4", "nvfp4"),
                    ("mxfp4", "nvfp4")}
    for u in MULTI:
        spec = UNITS[u]
        assert u == "_".join(("tc4", *spec.formats))
        assert spec.residuals == ("none", "2:4")
        assert set(spec.formats) <= set(MULTI_FORMATS)
        # outside the synthesized grids, reached by name
        assert u not in {x.name for x in units_of_kind("dot")}
        assert u not in {c[0] for c in all_configs()} | {n for n, _ in standard_set()}
        assert u in {x.name for x in units_of_kind("dot", grid=False)}
        for cfg in all_configs("dot", grid=False):
            if cfg[0] == u:
                assert parse_module_name(module_name(*cfg)) == (*cfg, "bounded", 1)


def test_bad_parameters_are_refused_with_one_line():
    with pytest.raises(ValueError, match=r"^Lane count must be one of 16, 32, 64, not 8$"):
        resolve("tc4_hif4_nvfp4", lanes=8)
    with pytest.raises(ValueError, match=r"^Residual mode of tc4_mxfp4_nvfp4 must be one of "
                                         r"none, 2:4, not 'dense'$"):
        resolve("tc4_mxfp4_nvfp4", residual="dense")
    with pytest.raises(ValueError, match="Accumulator back end"):
        resolve("tc4_mxfp4_nvfp4", accum="trunc")


def test_payload_is_the_widest_step_and_a_format_field():
    assert payload_fields("tc4_hif4_mxfp4_nvfp4", "2:4") == [
        ("a", 288), ("w", 288), ("r", 224), (FORMAT_FIELD, 2), ("first", 1), ("last", 1)]
    assert payload_fields("tc4_mxfp4_nvfp4", "2:4") == [
        ("a", 288), ("w", 288), ("r", 208), (FORMAT_FIELD, 1), ("first", 1), ("last", 1)]
    assert payload_fields("tc4_hif4_mxfp4", "none") == [
        ("a", 288), ("w", 288), (FORMAT_FIELD, 1), ("first", 1), ("last", 1)]


@pytest.mark.parametrize("unit", MULTI)
@pytest.mark.parametrize("residual", ["none", "2:4"])
def test_term_slots_hold_every_formats_terms(unit, residual):
    """Each format's term ``k`` fits slot ``k``: as wide a significand, and its exponent
    field range shifted onto the slot's bias within the slot's field; the slots share one
    bias and field width (what the bounded back end's pair and split take), and the
    bounded back end builds for them."""
    formats = UNITS[unit].formats
    terms, offsets = slot_terms(formats, residual)
    slots = [t for t in terms if t.name != WIDE]
    assert len({(t.bias, t.exp_bits) for t in slots}) == 1
    for f in formats:
        own = _own_terms(f, residual, formats)
        assert len(own) == len(offsets[f]) <= len(terms)
        for (k, offset), (sig, _, bias, top) in zip(offsets[f].items(), own):
            assert sig <= terms[k].sig_bits
            assert offset == terms[k].bias - bias >= 0
            assert top + offset <= terms[k].exp_max
    if len(slots) > 1:
        assert max(t.sig_bits for t in slots) <= 24
    # NVFP4's 50-bit sum goes as one term wherever fewer than four slots exist: beside two
    # slots as the wide term (last, offset 0), never split into block terms
    if "nvfp4" in formats and len(slots) == 2:
        assert terms[-1].name == WIDE and offsets["nvfp4"] == {2: 0}
    if "nvfp4" in formats and len(slots) < 4:
        assert len(offsets["nvfp4"]) == 1
    AccumSpec(terms)
    unit_obj = build_unit(unit, residual=residual)
    assert [t.name for t in unit_obj.terms] == [t.name for t in terms]
    if len(slots) == 2:
        blocks = {e["block"] for e in build_unit(unit, residual=residual,
                                                  accum="bounded").structure}
        assert "accum.pair" in blocks and "accum.split" not in blocks


def test_manifest_lists_the_format_field(tmp_path):
    from sim.bench.runner import generate_cached

    params = resolve("tc4_hif4_mxfp4_nvfp4", residual="2:4")
    _, manifest = generate_cached("tc4_hif4_mxfp4_nvfp4", params, tmp_path / "rtl")
    assert manifest["unit"] == "tc4_hif4_mxfp4_nvfp4"
    assert manifest["formats"] == list(MULTI_FORMATS)
    assert manifest["payload"][FORMAT_FIELD] == {"offset": 800, "width": 2}
    assert manifest["ii"] == 1 and manifest["structure"]


@pytest.mark.parametrize("residual,lanes,ways", [("2:4", 64, 1), ("none", 16, 2)])
def test_three_format_unit_matches_the_golden_model_across_switches(residual, lanes, ways):
    """The default suite's simulation of a multi-format unit: HiF4, MXFP4 and NVFP4 steps,
    every format's named cases then random, cancelling and NaN/Inf-rich K-loops of the
    three formats interleaved, with random stalls, on the compiled harness (its build is
    cached under ``build/fast``): with the 2:4 residual at 64 lanes (one step a cycle; the
    bounded back end splits four term slots) and without it at 16 (four slices a step, the
    block sums in partial-sum registers; the back end pairs two slots and adds NVFP4's
    wide term alone), there with two interleaved accumulators, the chains dealt to them
    at random (:mod:`sim.stimulus.interleave`)."""
    from sim.bench.runner import make_stream, verify

    unit, params = "tc4_hif4_mxfp4_nvfp4", {"residual": residual, "stages": 2, "lanes": lanes,
                                             "accum": "bounded"}
    extra = {"interleave": ways} if ways > 1 else {}
    res = verify(unit, **params, vectors=6000, seed=11, engine="fast", **extra)
    assert res["engine"] == "fast" and res["steps"] == 6000
    assert res["module"].endswith("_i2" if ways > 1 else "_bnd")
    assert res["mismatches"] == 0 and not res["timeout"] and res["checked"] > 500
    s = make_stream(unit, params["residual"], 6000, 11)
    counts = np.bincount(s["fmt"], minlength=3)
    assert (counts > 1000).all()
    switches = np.flatnonzero(np.diff(s["fmt"].astype(int)) != 0) + 1
    assert len(switches) > 100 and s["first"][switches].all()
