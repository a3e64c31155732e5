"""``hif4 sweep rl --model smollm2``: option errors (fast) and the quick matrix run twice, the
second time from its results file (slow: six SmolLM2 runs of about a minute each)."""

import json

import pytest

from sim.cli import main


@pytest.mark.parametrize("extra,words", [
    (["--tis", "0.5"], "--tis caps must be >= 1"),
    (["--tis", "x"], "--tis takes caps"),
    (["--tis", "2,2"], "--tis repeats"),
    (["--formats", "fp8"], "unknown format 'fp8'"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--seeds", "a"], "seeds"),
])
def test_bad_options(extra, words, tmp_path, capsys):
    argv = ["sweep", "rl", "--model", "smollm2", "--json", str(tmp_path / "r.json")] + extra
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("extra,flag", [(["--plot", "p.png"], "--plot"),
                                        (["--steps", "3"], "--steps"),
                                        (["--tis", "2"], "--tis")])
def test_smollm2_options_need_the_model(extra, flag, tmp_path, capsys):
    assert main(["sweep", "rl", "--json", str(tmp_path / "r.json")] + extra) == 2
    assert f"{flag} applies to sweep rl --model smollm2" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_matrix_then_resume(tmp_path, capsys):
    pytest.importorskip("trl")
    out = tmp_path / "m.json"
    argv = ["sweep", "rl", "--model", "smollm2", "--quick", "--quiet", "--json", str(out),
            "--plot", str(tmp_path / "m.png")]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["complete"] and len(doc["runs"]) == 6
    assert [row["config"] for row in doc["summary"]] == doc["configs"]
    table = capsys.readouterr().out
    for name in doc["configs"]:
        assert name in table
    # everything is in the file: the same command runs nothing and writes the same runs
    assert main(argv) == 0
    assert json.loads(out.read_text())["runs"] == doc["runs"]
