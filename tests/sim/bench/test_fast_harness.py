"""The fast engine (compiled Verilator harness), the soak and its replay files.

The harness must see what the cocotb bench sees (same words, cycles and latencies on the same
module and stream), must report a wrong word and a late output, and a unit with a planted
fault must be found by ``hif4 soak``, shrunk to a short K-loop and replayed by
``hif4 verify --replay`` (failing on the faulty RTL, passing on the generated one).
"""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim.bench.runner import REPO, generate_cached, make_stream, unit_vectors, verify
from sim.cli import main

#: The CI configuration whose cocotb build test_bench_hif4 makes (the comparison reuses it).
UNIT, PARAMS = "hif4", {"residual": "2:4", "stages": 1, "lanes": 16, "accum": "bounded"}


def _module():
    from hif4spec import module_name
    module = module_name(UNIT, **PARAMS)
    return generate_cached(UNIT, PARAMS, REPO / "build" / "rtl" / module)


def test_fast_and_cocotb_agree_cycle_for_cycle():
    stream = make_stream(UNIT, PARAMS["residual"], 400, 5)
    runs = {engine: verify(UNIT, **PARAMS, stream=stream, valid_prob=1.0, ready_prob=1.0,
                           engine=engine)
            for engine in ("fast", "cocotb")}
    keys = ("steps", "transferred", "outputs", "checked", "mismatches", "cycles",
            "first_transfer_cycle", "last_output_cycle", "latency_min", "latency_max",
            "transfer_gaps_max")
    fast, slow = runs["fast"], runs["cocotb"]
    assert {k: fast[k] for k in keys} == {k: slow[k] for k in keys}
    assert fast["mismatches"] == 0 and fast["checked"] > 20
    # with stalls (each engine its own random pattern), both still check every word
    for engine in ("fast", "cocotb"):
        r = verify(UNIT, **PARAMS, stream=stream, valid_prob=0.6, ready_prob=0.5,
                   engine=engine, seed=3)
        assert r["mismatches"] == 0 and r["checked"] == fast["checked"], engine
        assert r["transfer_gaps_max"] > fast["transfer_gaps_max"]


def test_harness_reports_wrong_words_and_early_outputs():
    from sim.bench.fast import build_harness, run_fast, stall_pattern

    verilog, manifest = _module()
    binary = build_harness(verilog, manifest)
    stream = make_stream(UNIT, PARAMS["residual"], 300, 2, named=False)
    payload, expected, steps = unit_vectors(UNIT, PARAMS["residual"], manifest, stream)
    gaps, ready = stall_pattern(len(payload), 1, 0.7, 0.7)
    ok = run_fast(binary, manifest, payload, expected, steps, gaps, ready)
    assert ok["mismatches"] == 0 and ok["early_output"] is None
    assert ok["checked"] == len(expected) and not ok["timeout"]

    bad = expected.copy()
    k = len(bad) // 3
    bad[k] ^= 1 << 7
    r = run_fast(binary, manifest, payload, bad, steps, gaps, ready, stop_on_mismatch=False)
    assert r["mismatches"] == 1 and r["checked"] == len(bad)
    assert r["first_mismatch"] == {"output": k, "step": int(steps[k]),
                                   "expected": int(bad[k]), "actual": int(expected[k])}

    late = dict(manifest, latency=manifest["latency"] + 1)   # a rule the unit breaks
    r = run_fast(binary, late, payload, expected, steps, gaps, ready)
    assert r["mismatches"] == 0 and r["early_output"] is not None


def _plant_rounding_fault(folder):
    """Copy the unit into ``folder`` with its accumulator's round-to-nearest increment
    tied to 0 (it truncates): returns the copy's manifest path."""
    verilog, manifest = _module()
    module = manifest["module"]
    text = verilog.read_text()
    start = text.index(f"{module}.acc.add.round (")
    end = text.index("endmodule", start)
    body = text[start:end]
    found = re.findall(r"assign rounded = (\S+ \[\d+:\d+\]) \+ (\\\$\d+) ;", body)
    assert len(found) == 1
    body = body.replace(f"assign rounded = {found[0][0]} + {found[0][1]} ;",
                        f"assign rounded = {found[0][0]} + 1'h0 ;")
    folder.mkdir()
    (folder / verilog.name).write_text(text[:start] + body + text[end:])
    shutil.copy(verilog.with_suffix(".json"), folder)
    return folder / f"{module}.json"


def test_planted_fault_is_found_shrunk_and_replayed(tmp_path, capsys):
    mutant = _plant_rounding_fault(tmp_path / "mutant")
    build = tmp_path / "build"
    build.mkdir()
    argv = ["soak", "--manifest", str(mutant), "--steps", "60000", "--chunk-steps", "30000",
            "--jobs", "2", "--build-dir", str(build), "--quiet"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "mismatches in 2 chunks" in out
    cases = sorted((build / "soak" / "cases").glob("*.npz"))
    assert len(cases) == 2
    from sim.bench.soak import load_case
    meta, stream, pattern = load_case(cases[0])
    # shrunk from a 30,000-step chunk to one step (its main and residual terms round) or two
    assert meta["length"] == len(stream["first"]) <= 2 and pattern is None
    assert stream["first"][0] and stream["last"][-1] and meta["why"] == "mismatch"
    assert int(meta["expected"], 16) == int(meta["actual"], 16) + 1

    # the replay fails on the faulty RTL, with the saved words, and passes on the real unit
    assert main(["verify", "--replay", str(cases[0]), "--manifest", str(mutant),
                 "--build-dir", str(build)]) == 1
    out = capsys.readouterr().out
    assert f"expected 0x{meta['expected']}  actual 0x{meta['actual']}" in out
    assert main(["verify", "--replay", str(cases[0])]) == 0
    assert f"{meta['length']} steps checked (1 outputs), 0 mismatches" in capsys.readouterr().out
    # options that name another unit than the case's are refused
    assert main(["verify", "--replay", str(cases[0]), "--lanes", "64"]) == 2
    assert "--lanes 64 disagrees with --replay" in capsys.readouterr().err


def test_soak_resumes_and_extends(tmp_path, capsys):
    argv = ["soak", "--unit", UNIT, "--residual", PARAMS["residual"], "--stages", "1",
            "--lanes", "16", "--accum", "bounded", "--chunk-steps", "1500", "--jobs", "2",
            "--build-dir", str(tmp_path), "--quiet"]
    (tmp_path / "rtl").symlink_to(REPO / "build" / "rtl")
    assert main([*argv, "--steps", "3000"]) == 0
    first = capsys.readouterr().out
    assert "3,000 of 3,000 steps in 2 chunks" in first and "0 mismatches in 0 chunks" in first
    assert "2 chunks done, 0 already in the table" in first
    assert main([*argv, "--steps", "4000"]) == 0
    again = capsys.readouterr().out
    assert "4,000 of 4,000 steps in 3 chunks" in again
    assert "1 chunks done, 2 already in the table" in again
    state = json.loads(next((tmp_path / "soak").glob("*.json")).read_text())
    # full passed chunks are ranges and totals; the shorter last chunk keeps its record
    assert state["passed"]["chunks"] == [[0, 1]] and state["passed"]["steps"] == 3000
    assert sorted(state["chunks"]) == ["2"] and state["chunks"]["2"]["steps"] == 1000


def test_soak_state_stays_small_and_resumes_from_any_format():
    from sim.sweep import _add_to_ranges, _in_ranges, load_soak_state, soak_chunk_done, \
        soak_totals

    ranges = []
    for i in (5, 0, 2, 1, 7, 6, 3):
        _add_to_ranges(ranges, i)
    assert ranges == [[0, 3], [5, 7]]
    assert [i for i in range(9) if _in_ranges(ranges, i)] == [0, 1, 2, 3, 5, 6, 7]

    def rec(i, steps=100, mismatches=0):
        return {"index": i, "steps": steps, "outputs": 10, "cycles": 120, "seconds": 0.5,
                "mismatches": mismatches, "timeout": False, "late": False}

    settings = {"chunk": 100, "module": "m", "unit": "hif4"}
    # a state written with one record per chunk is compacted when loaded
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.json"
        path.write_text(json.dumps({"settings": settings, "chunks": {
            str(i): rec(i, 60 if i == 4 else 100, 2 if i == 2 else 0) for i in range(5)}}))
        state = load_soak_state(path, settings)
    assert state["passed"]["chunks"] == [[0, 1], [3, 3]]
    assert state["passed"]["steps"] == 300 and state["passed"]["outputs"] == 30
    assert sorted(state["chunks"]) == ["2", "4"]
    assert soak_chunk_done(state, 3, 100) and soak_chunk_done(state, 4, 60)
    assert not soak_chunk_done(state, 4, 100) and not soak_chunk_done(state, 5, 100)
    t = soak_totals(state, 5)
    assert (t["chunks"], t["steps"], t["mismatches"]) == (5, 460, 2)
    assert [r["index"] for r in t["failed"]] == [2]
    assert soak_totals(state, 2)["steps"] == 200


def test_encoder_soak(tmp_path, capsys):
    assert main(["soak", "--unit", "nvfp4_quant", "--stages", "2", "--lanes", "16",
                 "--steps", "2400", "--chunk-steps", "1200", "--jobs", "2",
                 "--build-dir", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "2,400 of 2,400 groups in 2 chunks, 2,400 outputs checked, 0 mismatches" in out


def test_soak_streams_hold_what_the_mix_says():
    from sim.bench.soak import chunk_steps
    from sim.stimulus import expected_words

    s = chunk_steps("mxfp4", "none", 20000, 4, 0)
    words, _ = expected_words("mxfp4", "none", s)
    v = words.view(np.float32)
    assert np.isnan(v).any() and np.isinf(v).any() and (v == 0).any()
    again = chunk_steps("mxfp4", "none", 20000, 4, 0)
    assert all(np.array_equal(s["a"][f], again["a"][f]) for f in s["a"])
    other = chunk_steps("mxfp4", "none", 20000, 4, 1)
    assert not np.array_equal(s["a"]["elem"], other["a"]["elem"])
    # a cancel-only stream: its pairs of steps sum to exactly zero
    from sim.stimulus.draw import cancel_stream
    c = cancel_stream("nvfp4", "none", 400, np.random.default_rng(0))
    c["first"][:] = np.arange(400) % 2 == 0
    c["last"][:] = np.arange(400) % 2 == 1
    words, _ = expected_words("nvfp4", "none", c)
    scales_equal = c["a"]["scale"][::2] == c["a"]["scale"][1::2]
    exact = words.view(np.float32)[scales_equal.all(axis=1)]
    assert len(exact) > 100 and np.all((exact == 0) | np.isnan(exact))


@pytest.mark.parametrize("argv, message", [
    (["soak", "--steps", "0"], "--steps must be a whole number of at least 1"),
    (["soak", "--steps", "1e3", "--mix", "random=1,odd=2"], "--mix: unknown kind 'odd'"),
    (["soak", "--steps", "10", "--jobs", "0"], "--jobs must be at least 1"),
    (["verify", "--replay", "/nonexistent.npz"], "--replay '/nonexistent.npz': no such file"),
    (["verify", "--engine", "fast", "--waves"], "the fast engine runs Verilator without"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_a_replay_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.npz"
    np.savez(bad, a=np.zeros(3))
    assert main(["verify", "--replay", str(bad)]) == 2
    assert "is not a replay file" in capsys.readouterr().err
