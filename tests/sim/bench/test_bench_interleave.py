"""A unit with L > 1 accumulators (issue 45) on both engines: the interleaved streams of
``sim.stimulus.interleave`` pass, outputs come no sooner than the manifest's latency, and a
step sent to the wrong accumulator is caught, the report naming the accumulator."""

from sim.bench.runner import make_stream, verify

UNIT, PARAMS = "hif4", {"residual": "2:4", "stages": 1, "lanes": 16, "accum": "bounded"}


def test_interleaved_unit_on_both_engines():
    stream = make_stream(UNIT, PARAMS["residual"], 600, 4, interleave=2)
    runs = {engine: verify(UNIT, **PARAMS, interleave=2, stream=stream, valid_prob=1.0,
                           ready_prob=1.0, engine=engine)
            for engine in ("fast", "cocotb")}
    fast, slow = runs["fast"], runs["cocotb"]
    for r in runs.values():
        assert r["module"].endswith("_i2") and r["manifest"]["parameters"]["interleave"] == 2
        assert r["mismatches"] == 0 and not r["timeout"]
        assert r["checked"] == int(stream["last"].sum()) > 50
    assert fast["early_output"] is None
    assert fast["latency_min"] >= fast["manifest"]["latency"]
    assert fast["cycles"] == slow["cycles"]
    r = verify(UNIT, **PARAMS, interleave=4, vectors=4000, valid_prob=0.7, ready_prob=0.6,
               engine="fast", seed=5)
    assert r["mismatches"] == 0 and not r["timeout"] and r["early_output"] is None


def test_a_step_in_the_wrong_accumulator_is_caught():
    stream = make_stream(UNIT, PARAMS["residual"], 1500, 6, named=False, interleave=2)
    wrong = dict(stream)
    wrong["acc_id"] = stream["acc_id"].copy()
    # a random chain of accumulator 1 sends a step after its first to accumulator 0
    moved = next(k for k in range(100, len(stream["first"]))
                 if stream["acc_id"][k] == 1 and not stream["first"][k])
    wrong["acc_id"][moved] = 0
    r = verify(UNIT, **PARAMS, interleave=2, stream=wrong, engine="fast")
    assert r["mismatches"] == 1            # it stops at the first
    bad = r["first_mismatch"]
    assert bad["step"] >= moved and stream["last"][bad["step"]]
    assert bad["inputs"]["accumulator"] == int(wrong["acc_id"][bad["step"]])
    assert bad["inputs"]["base step"] == int(stream["order"][bad["step"]])


def test_split_adder_cut_at_every_block():
    """MXFP4 with the 2:4 residual at L = 8: the split's blocks, its bypass rounding ahead of
    the join and its compares with the accumulator (``versus``) each cut into stages of their
    own; every output word is the golden model's."""
    r = verify("mxfp4", residual="2:4", stages=2, lanes=16, accum="bounded", interleave=8,
               vectors=3000, valid_prob=0.8, ready_prob=0.7, engine="fast", seed=3)
    stages = r["manifest"]["timing"]["pipeline"][-1]["loop_stages"]
    assert ["versus"] in stages and r["manifest"]["timing"]["pipeline"][-1]["prep"] >= 8
    assert r["mismatches"] == 0 and not r["timeout"] and r["early_output"] is None
    assert r["checked"] > 50
