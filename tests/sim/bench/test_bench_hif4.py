"""Verilator regression of the generated HiF4 units against ``sim.dot.run_steps``.

Per configuration (one build folder each under build/verilator/): a few thousand steps of
random K-loops (1..64 steps, some continuing without ``first``) with the named edge cases,
random stalls on valid and ready; then a stall-free run that pins the timing: every output
appears exactly ``latency`` cycles after its ``last`` step's input transfer, steps transfer
every ``ii`` cycles, so N steps finish within N * ii + latency cycles. The default suite's
short runs of every configuration class are in ``test_bench_coverage.py``; here it checks
the command line and that the cocotb bench reports wrong words, on one build.
"""

import numpy as np
import pytest

from sim.bench.runner import make_stream, run_job, verify
from sim.cli import main
from sim.stimulus import random_stream


def _regression(residual, stages, lanes, vectors, seed):
    result = verify("hif4", residual=residual, stages=stages, lanes=lanes, vectors=vectors,
                    seed=seed, valid_prob=0.7, ready_prob=0.6)
    assert not result["timeout"]
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["checked"] == result["outputs"] > vectors // 20
    assert result["transferred"] == vectors

    n = 300
    rng = np.random.default_rng(seed + 1)
    stream = random_stream("hif4", residual, n, rng)
    timed = verify("hif4", residual=residual, stages=stages, lanes=lanes, stream=stream,
                   valid_prob=1.0, ready_prob=1.0, seed=seed)
    manifest = timed["manifest"]
    latency, ii = manifest["latency"], manifest["ii"]
    assert timed["mismatches"] == 0, timed["first_mismatch"]
    assert timed["latency_min"] == timed["latency_max"] == latency
    assert timed["transfer_gaps_max"] == ii
    span = timed["last_output_cycle"] - timed["first_transfer_cycle"]
    assert span == (n - 1) * ii + latency <= n * ii + latency
    return result


def test_cli_verify():
    # The cocotb bench's run of a dot unit in the default suite (the fast engine runs the
    # others); test_bench_reports_a_wrong_word and test_fast_harness share its build.
    assert main(["verify", "--unit", "hif4", "--residual", "2:4", "--stages", "1",
                 "--lanes", "16", "--accum", "bounded", "--vectors", "300",
                 "--seed", "5", "--engine", "cocotb"]) == 0


def test_cli_verify_reports_a_mismatch(monkeypatch, capsys):
    # `hif4 verify` exits 1 on a mismatch and prints the step's inputs and both words.
    import sim.stimulus.payload as stimulus
    real = stimulus.expected_words

    def corrupted(*args, **kwargs):
        words, steps = real(*args, **kwargs)
        words = words.copy()
        words[3] ^= 0x80000000
        return words, steps

    monkeypatch.setattr(stimulus, "expected_words", corrupted)
    assert main(["verify", "--unit", "hif4", "--residual", "none", "--stages", "1",
                 "--lanes", "16", "--vectors", "200", "--seed", "4"]) == 1
    out = capsys.readouterr().out
    assert "1 mismatches" in out and "FAIL: first mismatch at output 3" in out
    assert "  a: {'elem': [" in out and "expected 0x" in out and "actual 0x" in out


def test_bench_reports_a_wrong_word(tmp_path):
    """The scoreboard is not blind: one corrupted expected word is reported as a mismatch."""
    from hwgen.units import module_name
    from sim.bench.runner import REPO, build, generate_cached
    from sim.stimulus import expected_words, pack_payloads
    params = {"residual": "2:4", "stages": 1, "lanes": 16, "accum": "bounded"}
    module = module_name("hif4", **params)
    verilog, manifest = generate_cached("hif4", params, REPO / "build" / "rtl" / module)
    build_dir = build(verilog, module)
    stream = make_stream("hif4", "2:4", 40, 3, named=False)
    expected, steps = expected_words("hif4", "2:4", stream)
    expected = expected.copy()
    expected[len(expected) // 2] ^= 1
    result = run_job(build_dir, module, pack_payloads(manifest, "hif4", "2:4", stream),
                     expected, steps, stop_on_mismatch=True)
    assert result["mismatches"] == 1
    bad = result["first_mismatch"]
    assert bad["output"] == len(expected) // 2 and bad["actual"] == expected[bad["output"]] ^ 1


@pytest.mark.slow
@pytest.mark.parametrize("residual, stages, lanes", [
    ("2:4", 3, 64), ("none", 1, 16), ("dense", 4, 32), ("2:4", 2, 32), ("none", 4, 64),
    ("2:4", 1, 16), ("dense", 3, 64)])
def test_more_configurations(residual, stages, lanes):
    _regression(residual, stages, lanes, 3000, seed=stages * 100 + lanes)


def test_missing_icarus_is_one_line_error(capsys, monkeypatch):
    import shutil
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name in ("iverilog", "vvp")
                        else real(name))
    assert main(["verify", "--unit", "hif4", "--sim", "icarus", "--vectors", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Icarus Verilog (iverilog, vvp) is not installed" in err[0]
