"""Interleaved streams of dot units with L > 1 accumulators (``sim.stimulus.interleave``):
their golden words against a reference that runs each accumulator on its own, their
payloads, and the mix of the interleaving."""

import numpy as np
import pytest

from hif4spec import ACC_FIELD, payload_fields, unit_spec
from sim import dot
from sim.bench.runner import _step_inputs, make_stream
from sim.stimulus import interleave as il
from sim.stimulus import multi
from sim.stimulus import pack_payloads as single_pack

UNITS = [("hif4", "none"), ("hif4", "2:4"), ("mxfp4", "none"), ("mxfp4", "2:4"),
         ("nvfp4", "none"), ("tc4_hif4_mxfp4_nvfp4", "none"), ("tc4_hif4_mxfp4_nvfp4", "2:4")]
CASES = [(u, r, L) for u, r in UNITS for L in (2, 4, 8)]
ACCUMS = ("window", "trunc")


def _steps_of(s, idx):
    """``{fmt: (single-format stream of base steps idx of fmt, their positions in idx)}``."""
    if "parts" not in s:
        sub = {k: None if s[k] is None else {f: v[idx] for f, v in s[k].items()}
               for k in ("a", "w", "r")}
        sub.update(first=s["first"][idx], last=s["last"][idx])
        return {None: (sub, np.arange(len(idx)))}
    out = {}
    for code, fmt in enumerate(s["formats"]):
        in_part = np.flatnonzero(s["fmt"] == code)
        rank = np.full(len(s["fmt"]), -1)
        rank[in_part] = np.arange(len(in_part))
        mine = np.flatnonzero(s["fmt"][idx] == code)
        if len(mine):
            part = s["parts"][fmt]
            k = rank[idx[mine]]
            sub = {key: None if part[key] is None else {f: v[k] for f, v in part[key].items()}
                   for key in ("a", "w", "r")}
            sub.update(first=part["first"][k], last=part["last"][k])
            out[fmt] = (sub, mine)
    return out


def _reference(unit, residual, s, accum):
    """``(words, positions)``: each accumulator's steps run on their own (per format, for a
    multi-format unit: a chain lies in one format and starts from +0), in stream order."""
    base, words, where = s["base"], [], []
    for a in range(s["interleave"]):
        pos = np.flatnonzero(s["acc_id"] == a)
        for fmt, (sub, mine) in _steps_of(base, s["order"][pos]).items():
            fmt = fmt or unit
            res = residual if fmt == unit else multi.part_residual(fmt, residual)
            acc = dot.run_steps(fmt, sub["a"], sub["w"], sub["first"], sub["last"],
                                r=sub["r"], residual=res, accum=accum)
            out = np.flatnonzero(sub["last"])
            words.append(acc[out])
            where.append(pos[mine[out]])
    words, where = np.concatenate(words), np.concatenate(where)
    pick = np.argsort(where)
    return words[pick], where[pick]


@pytest.mark.parametrize("unit, residual, L", CASES)
def test_words_are_each_accumulators_own(unit, residual, L):
    s = make_stream(unit, residual, 4000, 7, interleave=L)
    assert len(s["first"]) == 4000 and s["interleave"] == L
    assert sorted(s["order"].tolist()) == list(range(4000))
    assert (s["first"] == s["base"]["first"][s["order"]]).all()
    for accum in ACCUMS if not unit_spec(unit).formats else ACCUMS[:1]:
        words, steps = il.expected_words(unit, residual, s, accum=accum)
        want, where = _reference(unit, residual, s, accum)
        assert (steps == where).all() and s["last"][steps].all()
        assert (words == want).all(), accum
        assert len(steps) == int(s["last"].sum())


def _bits(rows, offset, width):
    value = np.unpackbits(rows, axis=1, bitorder="little")[:, offset:offset + width]
    return (value.astype(np.int64) << np.arange(width)).sum(axis=1)


@pytest.mark.parametrize("unit, residual, L", [CASES[0], CASES[-2]])
def test_payload_is_the_base_rows_with_the_accumulator(unit, residual, L):
    s = make_stream(unit, residual, 700, 8, interleave=L)
    rows = il.pack_payloads(None, unit, residual, s)
    at, offset = {}, 0
    for name, bits in payload_fields(unit, residual, interleave=L):
        at[name], offset = (offset, bits), offset + bits
    assert rows.shape[1] == -(-offset // 8)
    assert (_bits(rows, *at[ACC_FIELD]) == s["acc_id"]).all()
    for name in ("first", "last"):
        assert (_bits(rows, *at[name]) == s[name]).all()
    pack = multi.pack_payloads if "parts" in s["base"] else single_pack
    base = pack(None, unit, residual, s["base"])[s["order"]]
    head = at[ACC_FIELD][0]                     # a, w, r (and fmt) lie below acc_id
    for lo in range(0, head, 57):
        n = min(57, head - lo)
        assert (_bits(rows, lo, n) == _bits(base, lo, n)).all()
    manifest = {"payload": {name: {"offset": o, "width": w} for name, (o, w) in at.items()}}
    assert (il.pack_payloads(manifest, unit, residual, s) == rows).all()
    del manifest["payload"][ACC_FIELD]
    with pytest.raises(ValueError, match=ACC_FIELD):
        il.pack_payloads(manifest, unit, residual, s)


def _chain_spans(s):
    """``[(acc, first position, last position, steps)]`` of every chain of ``s``."""
    where = np.empty(len(s["order"]), dtype=np.intp)
    where[s["order"]] = np.arange(len(s["order"]))
    out = []
    for start, stop in il.chains(s["base"]):
        pos = where[start:stop]
        accs = set(s["acc_id"][pos].tolist())
        assert len(accs) == 1, "a chain split over accumulators"
        assert (np.diff(pos) > 0).all(), "a chain's steps out of order"
        out.append((accs.pop(), int(pos[0]), int(pos[-1]), stop - start))
    return out


@pytest.mark.parametrize("L", [2, 4, 8])
def test_interleaving_mix(L):
    """One open chain per accumulator; the mix has all L busy, idle accumulators while
    others run, chains of different lengths ending at different times, and bursts."""
    s = make_stream("hif4", "none", 30000, 11, interleave=L)
    spans = _chain_spans(s)
    open_count = np.zeros(len(s["order"]) + 1, dtype=int)
    for a in range(L):
        mine = sorted((lo, hi) for acc, lo, hi, _ in spans if acc == a)
        assert all(hi < lo2 for (_, hi), (lo2, _) in zip(mine, mine[1:])), \
            f"accumulator {a} has two chains open at once"
        for lo, hi in mine:
            open_count[lo] += 1
            open_count[hi + 1] -= 1
    busy = np.cumsum(open_count)[:-1]
    assert (busy == L).sum() > len(busy) // 10, "all accumulators busy"
    acc = s["acc_id"].astype(int)
    for a in range(L):                  # each idle for a long stretch while others run
        gaps = np.diff(np.flatnonzero(acc == a))
        assert gaps.max() > 20 * L, f"accumulator {a} never idle"
    overlapping = [(p, q) for p, q in zip(spans, spans[1:])
                   if p[0] != q[0] and q[1] < p[2] and p[3] != q[3] and p[2] != q[2]]
    assert len(overlapping) > 100, "chains of different lengths ending at different times"
    change = np.flatnonzero(np.diff(acc) != 0)
    runs = np.diff(np.concatenate([[-1], change, [len(acc) - 1]]))
    run_start = np.concatenate([[0], change + 1])
    burst = [k for k, n in zip(run_start, runs) if n >= 4 and busy[k] >= 2]
    assert len(burst) > 100, "bursts of one accumulator while another has a chain open"
    assert (runs == 1).sum() > len(acc) // 10, "steps of different accumulators back to back"


def test_deterministic_by_seed_and_the_base_kept():
    a = make_stream("mxfp4", "2:4", 3000, 5, interleave=4)
    b = make_stream("mxfp4", "2:4", 3000, 5, interleave=4)
    c = make_stream("mxfp4", "2:4", 3000, 6, interleave=4)
    assert (a["order"] == b["order"]).all() and (a["acc_id"] == b["acc_id"]).all()
    assert (a["order"] != c["order"]).any()
    base = make_stream("mxfp4", "2:4", 3000, 5)
    assert (a["base"]["last"] == base["last"]).all()
    for key in ("a", "w", "r"):
        for f, v in base[key].items():
            assert (a["base"][key][f] == v).all()
    same = il.interleave(base, 4, np.random.default_rng(1))
    assert (same["order"] == il.interleave(base, 4, np.random.default_rng(1))["order"]).all()


def test_first_step_forced_and_report_names_the_accumulator():
    base = make_stream("tc4_hif4_mxfp4_nvfp4", "none", 400, 2)
    base = multi.take(base, 400)
    base["first"][0] = False
    fmt = base["formats"][int(base["fmt"][0])]
    base["parts"][fmt]["first"][0] = False
    s = il.interleave(base, 2, np.random.default_rng(3))
    assert s["base"]["first"][0] and s["base"]["parts"][fmt]["first"][0]
    assert not base["first"][0], "the given stream is left as it was"
    k = int(np.flatnonzero(s["last"])[5])
    report = _step_inputs(s, k)
    assert report["accumulator"] == int(s["acc_id"][k])
    assert report["base step"] == int(s["order"][k]) and report["last"]
    one = il.single(make_stream("nvfp4", "none", 50, 1), 4, acc=3)
    assert (one["acc_id"] == 3).all() and (one["order"] == np.arange(50)).all()
