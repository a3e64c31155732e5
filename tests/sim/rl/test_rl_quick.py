"""`hif4 rl --quick`: the whole precision matrix end to end (CLI, table, JSON, PNG)."""

import json

import pytest

pytest.importorskip("torch")

from sim.cli import main                  # noqa: E402
from sim.rl.grpo import LAYER_TYPES, build_configs  # noqa: E402


def test_rl_quick(tmp_path, capsys):
    out_json, out_png = tmp_path / "rl.json", tmp_path / "rl.png"
    assert main(["rl", "--quick", "--quiet", "--json", str(out_json), "--plot", str(out_png)]) == 0
    table = capsys.readouterr().out
    results = json.loads(out_json.read_text())
    names = [c.name for c in build_configs()]
    assert len(names) == 30 and len(set(names)) == 30
    assert [row["config"] for row in results["summary"]] == names
    for name in names:
        assert name in table
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for row in results["summary"]:
        assert 0.0 <= row["acc"] <= 1.0 and 0.0 <= row["acc_bf16"] <= 1.0
        assert row["kl"] >= -1e-6 and row["abs_log_ratio"] >= 0.0
        quantized_acts = "A4" in row["rollout"]
        for t in LAYER_TYPES:
            share = row["underflow"][t]
            # 4-bit activations of a small transformer lose some nonzero inputs to zero;
            # BF16 activations of this model never underflow
            assert (share > 0.0) if quantized_acts else (share == 0.0), (row["config"], t)
            if "+" in row["rollout"]:
                assert row["underflow_final"][t] < share        # ResQ recovers some
    base = results["summary"][0]
    assert base["config"] == "bf16/bf16" and base["gap"] == 0.0
    # bf16 training, bf16 rollouts: the two policies agree up to matmul reordering
    assert base["abs_log_ratio"] < 1e-3
    runs = results["runs"]
    assert all(r["curve"]["step"] == [0, 3] for r in runs)
    # all configurations of a seed start from the same warm-up checkpoint
    bf16_step0 = {r["curve"]["acc_bf16"][0] for r in runs}
    assert len(bf16_step0) == 1


def test_rl_bad_input(capsys):
    assert main(["rl", "--quick", "--formats", "fp4"]) == 2
    assert "unknown format 'fp4'" in capsys.readouterr().err
    assert main(["rl", "--quick", "--seeds", "a"]) == 2
    assert main(["rl", "--quick", "--plot", "x.svg"]) == 2
