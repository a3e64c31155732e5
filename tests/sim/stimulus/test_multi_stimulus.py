"""Streams, payloads and golden words of the multi-format units (``sim.stimulus.multi``)."""

import numpy as np
import pytest

from hif4spec import FORMAT_FIELD, UNITS, payload_fields
from sim import dot
from sim.bench.runner import _step_inputs, make_stream
from sim.stimulus import pack_payloads as single_pack
from sim.stimulus import multi

MULTI = [(u.name, r) for u in UNITS.values() if u.formats for r in u.residuals]


def _bits(rows, offset, width):
    """Bits ``[offset, offset + width)`` of each little-endian payload row, as Python ints."""
    out = []
    for row in rows:
        value = int.from_bytes(bytes(row), "little")
        out.append((value >> offset) & ((1 << width) - 1))
    return out


@pytest.mark.parametrize("unit, residual", MULTI)
def test_formats_switch_between_accumulations_only(unit, residual):
    s = make_stream(unit, residual, 5000, 3)
    formats = UNITS[unit].formats
    assert s["formats"] == formats and len(s["first"]) == 5000 and s["last"][-1]
    counts = np.bincount(s["fmt"], minlength=len(formats))
    assert (counts > 1000).all()
    switch = np.flatnonzero(np.diff(s["fmt"].astype(int)) != 0) + 1
    assert len(switch) > 50 and s["first"][switch].all() and s["last"][switch - 1].all()
    for code, f in enumerate(formats):
        part, idx = s["parts"][f], np.flatnonzero(s["fmt"] == code)
        assert len(part["first"]) == len(idx)
        assert (part["first"] == s["first"][idx]).all()
        assert (part["last"] == s["last"][idx]).all()
        assert (part["r"] is None) == (multi.part_residual(f, residual) == "none")


@pytest.mark.parametrize("unit, residual", MULTI)
def test_payload_holds_each_formats_step_and_its_code(unit, residual):
    s = make_stream(unit, residual, 600, 4)
    rows = multi.pack_payloads(None, unit, residual, s)
    fields = dict(payload_fields(unit, residual))
    at, offset = {}, 0
    for name, bits in payload_fields(unit, residual):
        at[name], offset = offset, offset + bits
    assert _bits(rows, at[FORMAT_FIELD], fields[FORMAT_FIELD]) == s["fmt"].tolist()
    for name in ("first", "last"):
        assert _bits(rows, at[name], 1) == s[name].astype(int).tolist()
    for code, f in enumerate(UNITS[unit].formats):
        idx = np.flatnonzero(s["fmt"] == code)
        res = multi.part_residual(f, residual)
        own = single_pack(None, multi.single_unit(f), res, s["parts"][f])
        own_fields = payload_fields(multi.single_unit(f), res)
        own_at, offset = {}, 0
        for name, bits in own_fields:
            own_at[name], offset = offset, offset + bits
        for name, bits in own_fields:
            if name in ("a", "w", "r"):
                # the format's step in the low bits of the field, zeros above it
                assert _bits(rows[idx], at[name], fields[name]) == _bits(own, own_at[name], bits)


@pytest.mark.parametrize("unit, residual", MULTI)
def test_golden_words_are_each_formats_own(unit, residual):
    s = make_stream(unit, residual, 3000, 5)
    words, steps = multi.expected_words(unit, residual, s, accum="window")
    assert (np.diff(steps) > 0).all() and (s["last"][steps]).all()
    assert len(steps) == s["last"].sum()
    got = dict(zip(steps.tolist(), words.tolist()))
    for code, f in enumerate(UNITS[unit].formats):
        idx = np.flatnonzero(s["fmt"] == code)
        p = s["parts"][f]
        acc = dot.run_steps(f, p["a"], p["w"], p["first"], p["last"], r=p["r"],
                            residual=multi.part_residual(f, residual))
        for k in np.flatnonzero(p["last"]):
            assert got[int(idx[k])] == int(acc[k])


def test_take_concat_and_the_mismatch_report():
    unit = "tc4_hif4_mxfp4_nvfp4"
    s = make_stream(unit, "2:4", 2000, 6)
    cut = multi.take(s, 777)
    assert len(cut["first"]) == 777 and cut["last"][-1]
    assert sum(len(p["first"]) for p in cut["parts"].values()) == 777
    both = multi.concat([cut, s])
    assert len(both["first"]) == 2777
    for f, p in both["parts"].items():
        assert len(p["first"]) == (both["fmt"] == both["formats"].index(f)).sum()
    k = int(np.flatnonzero(s["fmt"] == 2)[5])
    report = _step_inputs(s, k)
    assert report["format"] == "nvfp4"
    assert report["a"]["elem"] == np.asarray(s["parts"]["nvfp4"]["a"]["elem"][5]).tolist()
