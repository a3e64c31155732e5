"""``benchmarks/rl_gpu.py --tiny``: the GPU script's code path on the CPU (compiled and
eager quantizers compared bit for bit on small shapes, two tiny ``hif4 rl --model smollm2``
runs, eager and ``--compile``). Slow on a 2-core machine: torch.compile builds C++ kernels
for every format."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "rl_gpu.py"


@pytest.mark.slow
def test_tiny_mode_runs_the_gpu_code_path(tmp_path):
    out = tmp_path / "gpu.json"
    subprocess.run([sys.executable, "-P", str(SCRIPT), "--tiny", "--json", str(out)],
                   cwd=REPO, check=True, timeout=3600)
    doc = json.loads(out.read_text())
    assert doc["device"] == "CPU"
    assert {q["case"] for q in doc["quantizers"]} == {"hif4", "mxfp4", "nvfp4", "hif4+2:4"}
    assert all(q["equal"] for q in doc["quantizers"])
    (rl,) = doc["rl"]
    assert rl["config"] == "fp32/hif4" and rl["eager"]["step_s"] > 0
    # compiled or eager, the same quantizers: the same rollouts and mismatch
    assert rl["eager"]["abs_log_ratio"] == rl["compiled"]["abs_log_ratio"]
