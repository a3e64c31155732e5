"""GRPO with TRL's GRPOTrainer and QuantLinears (``hif4 rl --model smollm2``).

The CLI test runs the real SmolLM2-135M on ``--quick`` settings (the first run in a fresh
checkout also reads the GGUF file and keeps a float32 copy under ``build/rl``). The other
tests run the same trainer on a random two-layer Llama with SmolLM2's tokenizer: seconds
per run.
"""

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("gguf")

import torch.nn.functional as F                     # noqa: E402

from sim.cli import main                             # noqa: E402
from sim.formats import fake_quantize as golden_fq   # noqa: E402
from sim.rl import qlinear, smollm2, trl_grpo        # noqa: E402
from sim.rl.trl_config import QUICK, RunConfig, matrix, run_path  # noqa: E402
from sim.rl.trl_tasks import Task, reward            # noqa: E402

try:
    smollm2.gguf_path()
except FileNotFoundError as exc:            # the weights package is installed by the Makefile
    pytest.skip(str(exc), allow_module_level=True)

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tokenizer():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # two threads thrash on a shared 2-core machine
    tok, _ = trl_grpo.load_policy()
    yield tok
    torch.set_num_threads(threads)


def tiny_model(tokenizer):
    """A random two-layer Llama with SmolLM2's vocabulary, the same for every call."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, tie_word_embeddings=True,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return LlamaForCausalLM(cfg)


def test_reward_is_exact_match():
    assert reward(" 82\n\nWhich", 82) == 1.0
    assert reward("82", 82) == 1.0
    assert reward(" 821", 82) == 0.0
    assert reward(" 8", 82) == 0.0
    assert reward(" The answer is 82", 82) == 0.0
    task = Task("max-fewshot")
    held = task.heldout_pairs
    assert held == Task("max-fewshot").heldout_pairs and len(set(held)) == 48
    train = {(r["prompt"], r["answer"]) for r in task.train_rows(500, seed=3)}
    assert not train & {(r["prompt"], r["answer"]) for r in task.heldout()}
    chat = Task("max-zeroshot").heldout()[0]
    assert chat["prompt"][0]["role"] == "user" and "number only" in chat["prompt"][0]["content"]
    assert reward([{"role": "assistant", "content": f"{chat['answer']}"}], chat["answer"]) == 1.0


def test_chat_task_runs(tokenizer, tmp_path):
    """The chat-template task through TRL (conversational prompts) and the held-out
    evaluation (the chat template applied there too)."""
    import dataclasses

    settings = dataclasses.replace(QUICK, task="max-zeroshot")
    result = trl_grpo.run(RunConfig("fp32", "hif4-W16A4"), settings, 0, tmp_path / "run",
                          progress=False, loaded=(tokenizer, tiny_model(tokenizer)))
    assert [h["step"] for h in result["history"] if "reward" in h] == [1, 2]
    assert result["acc_step0"] == 0.0 and result["abs_log_ratio"] > 0


def test_matrix():
    names = [c.name for c in matrix(("hif4", "mxfp4"))]
    assert names[:6] == ["fp32/fp32", "hif4/hif4-W4A4", "hif4/hif4-W4A4+2:4",
                         "fp32/hif4-W4A4", "fp32/hif4-W4A4+2:4", "fp32/hif4-W16A4"]
    assert len(names) == 11 and len(set(names)) == 11
    assert [c.name for c in matrix(("hif4",), tis=(None, 2.0))][-1] == "fp32/hif4-W16A4 tis2"
    # a sweep runs the cheapest first: float, FP4 rollouts (W16A4, W4A4, + ResQ), then
    # FP4 training
    by_cost = [c.name for c in sorted(matrix(("hif4",)), key=lambda c: c.cost)]
    assert by_cost == ["fp32/fp32", "fp32/hif4-W16A4", "fp32/hif4-W4A4",
                       "fp32/hif4-W4A4+2:4", "hif4/hif4-W4A4", "hif4/hif4-W4A4+2:4"]


def _record(monkeypatch, trl_grpo_module):
    """Record, for every GEMM a QuantLinear runs, the layer, its mode, whether TRL was
    generating, its operands, and the layer's weight at that moment."""
    calls, current = [], {}
    state = {"generating": False}
    real_linear = F.linear

    class Recording:
        def __getattr__(self, name):
            return getattr(F, name)

        @staticmethod
        def linear(x, w, b=None):
            layer = current.get("layer")
            if layer is not None:
                calls.append({"layer": layer, "mode": layer.mode, "gen": state["generating"],
                              "x": current["x"], "xq": x.detach().clone(),
                              "wq": w.detach().clone(), "w": layer.weight.detach().clone()})
            return real_linear(x, w, b)

    monkeypatch.setattr(qlinear, "F", Recording())
    base = trl_grpo_module._trainer_class

    def patched():
        cls = base()

        class Recorded(cls):
            def _generate_single_turn(self, *args, **kwargs):
                state["generating"] = True
                try:
                    return super()._generate_single_turn(*args, **kwargs)
                finally:
                    state["generating"] = False
        return Recorded

    monkeypatch.setattr(trl_grpo_module, "_trainer_class", patched)

    def pre_hook(module, args):
        current["layer"], current["x"] = module, args[0].detach().clone()

    return calls, pre_hook


def test_precision_switching_and_shared_weights(tokenizer, tmp_path, monkeypatch):
    """Rollout GEMMs run the rollout format (weights and inputs as the golden model
    quantizes them), training GEMMs the training format, both on the current weights of
    the same Parameters, which the optimizer moves."""
    calls, pre_hook = _record(monkeypatch, trl_grpo)
    # a random model never answers right: a reward that tells completions apart instead,
    # so that the advantages, and the update, are not zero
    monkeypatch.setattr(Task, "rewards", lambda self, completions, answers: [
        (sum(map(ord, c)) % 97) / 97 for c in completions])
    model = tiny_model(tokenizer)
    config = RunConfig(train="nvfp4", rollout="hif4")
    original = trl_grpo.convert_policy

    def convert(m, c, gemm="fake"):
        names = original(m, c, gemm)
        for layer in trl_grpo._quant_layers(m):
            layer.register_forward_pre_hook(pre_hook)
        return names
    monkeypatch.setattr(trl_grpo, "convert_policy", convert)
    params = {id(p) for p in model.parameters()}
    result = trl_grpo.run(config, QUICK, 0, tmp_path / "run", progress=False,
                          loaded=(tokenizer, model))
    layers = trl_grpo._quant_layers(model)
    assert len(layers) == 14                       # 2 layers x q, k, v, o, gate, up, down
    assert {id(layer.weight) for layer in layers} <= params    # the model's own Parameters
    rollout = [c for c in calls if c["gen"]]
    train = [c for c in calls if not c["gen"] and c["mode"] == "train"]
    assert rollout and train
    assert all(c["mode"] == "rollout" for c in rollout)
    for c in rollout:
        x = c["x"].reshape(-1, c["x"].shape[-1])
        assert torch.equal(c["xq"].reshape(x.shape),
                           torch.from_numpy(golden_fq(x.numpy(), "hif4", axis=1)))
        assert torch.equal(c["wq"], torch.from_numpy(golden_fq(c["w"].numpy(), "hif4", axis=1)))
    opts = {"tensor_scale": True}
    for c in train:
        x = c["x"].reshape(-1, c["x"].shape[-1])
        assert torch.equal(c["xq"], torch.from_numpy(golden_fq(x.numpy(), "nvfp4", axis=1,
                                                               **opts)))
        assert torch.equal(c["wq"], torch.from_numpy(golden_fq(c["w"].numpy(), "nvfp4", axis=1,
                                                               **opts)))
    # the second step's rollouts saw the weights the first step's update wrote
    first = layers[0]
    seen = [c["w"] for c in rollout if c["layer"] is first]
    assert not torch.equal(seen[0], seen[-1])
    assert result["abs_log_ratio"] > 0 and 0 < result["underflow"] < 1


def test_resume_gives_the_same_final_state(tokenizer, tmp_path):
    config = RunConfig(train="fp32", rollout="hif4+2:4", tis=2.0)
    whole = trl_grpo.run(config, QUICK, 1, tmp_path / "whole", progress=False,
                         loaded=(tokenizer, tiny_model(tokenizer)))
    part = tmp_path / "part"
    with pytest.raises(trl_grpo._Stopped):
        trl_grpo.run(config, QUICK, 1, part, progress=False, stop_after=1,
                     loaded=(tokenizer, tiny_model(tokenizer)))
    assert [p.name for p in part.glob("checkpoint-*")] == ["checkpoint-1"]
    resumed = trl_grpo.run(config, QUICK, 1, part, progress=False,
                           loaded=(tokenizer, tiny_model(tokenizer)))
    assert resumed["resumed_from"] == "checkpoint-1"
    assert resumed["state_sha256"] == whole["state_sha256"]
    assert resumed["history"] == whole["history"] or all(
        {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items()
                                                           if k != "seconds"}
        for a, b in zip(resumed["history"], whole["history"]))
    assert all("tis_truncated" in h for h in whole["history"] if "reward" in h)
    assert not list(part.glob("checkpoint-*"))     # a finished run drops its checkpoints
    # a finished run is read back, not run again
    again = trl_grpo.run(config, QUICK, 1, part, progress=False, loaded=(tokenizer, None))
    assert again == resumed
    with pytest.raises(ValueError, match="other settings"):
        trl_grpo.run(RunConfig("fp32", "hif4"), QUICK, 1, part, progress=False)


def test_cli_quick(tmp_path, capsys):
    """``hif4 rl --model smollm2 --quick`` on the real model: FP4 rollouts, float training."""
    out = tmp_path / "r.json"
    argv = ["rl", "--model", "smollm2", "--quick", "--quiet", "--rollout", "hif4",
            "--run-dir", str(tmp_path / "runs"), "--json", str(out), "--plot",
            str(tmp_path / "r.png")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "SMOKE RUN" in text and "fp32/hif4-W4A4" in text
    doc = json.loads(out.read_text())
    (run,) = doc["runs"]
    steps = [h for h in run["history"] if "reward" in h]
    assert [h["step"] for h in steps] == [1, 2]
    for h in steps:
        assert 0.0 <= h["reward"] <= 1.0
        assert h["abs_log_ratio"] > 0.0 and h["kl"] >= 0.0      # FP4 rollouts, fp32 training
        assert 0.0 < h["underflow"] < 1.0
    assert [h["step"] for h in run["history"] if "acc" in h] == [0, 2]
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    folder = run_path(tmp_path / "runs", RunConfig("fp32", "hif4"), QUICK, 0)
    assert json.loads((folder / "result.json").read_text()) == run


@pytest.mark.parametrize("argv,words", [
    (["rl", "--rollout", "hif4"], "--rollout applies to --model smollm2"),
    (["rl", "--model", "smollm2", "--rollout", "fp8"], "rollout 'fp8'"),
    (["rl", "--model", "smollm2", "--rollout", "hif4+4:8"], "ResQ mode"),
    (["rl", "--model", "smollm2", "--train", "hif4+2:4"], "train 'hif4+2:4'"),
    (["rl", "--model", "smollm2", "--formats", "hif4"], "--formats applies to --model toy"),
    (["rl", "--model", "smollm2", "--tis", "0.5"], "TIS cap"),
    (["rl", "--model", "smollm2", "--group", "1"], "group must be >= 2"),
    (["rl", "--model", "smollm2", "--task", "sum"], "task must be one of"),
    (["rl", "--model", "smollm2", "--seeds", "x"], "seeds"),
])
def test_cli_bad_options(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_adapters_on_a_causal_lm(tokenizer, tmp_path):
    """The recipe of docs/rl_smollm2_grpo.md for any Hugging Face causal LM: convert its
    Linears, train with QuantGRPOTrainer and TRL's own config (here a random Llama)."""
    from datasets import Dataset
    from trl import GRPOConfig

    from sim.rl.qlinear import Precision, QuantLinear, convert_linears
    from sim.rl.trl_grpo import QuantGRPOTrainer

    model = tiny_model(tokenizer)
    convert_linears(model, train=Precision(),
                    rollout=Precision(weight="mxfp4", act="mxfp4", resq="2:4"),
                    skip=lambda name, module: name == "lm_head")
    data = Dataset.from_list([{"prompt": f"{a} + {a} =", "answer": 2 * a} for a in range(8)])

    def reward(completions, answer, **kwargs):
        return [float(c.strip().startswith(str(a))) + len(c) / 100
                for c, a in zip(completions, answer)]

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=4, report_to=[],
                      use_cpu=True, bf16=False, gradient_checkpointing=False,
                      save_strategy="no", disable_tqdm=True)
    trainer = QuantGRPOTrainer(model=model, reward_funcs=reward, args=args,
                               train_dataset=data, processing_class=tokenizer, tis_cap=2.0)
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["mismatch/abs_log_ratio"] > 0 and 0 < logged["rollout/underflow"] < 1
    assert "tis/truncated" in logged
    assert sum(isinstance(m, QuantLinear) for m in model.modules()) == 14
    assert all(m.mode == "train" for m in model.modules() if isinstance(m, QuantLinear))


def test_bit_true_rollouts(tokenizer, tmp_path):
    """``gemm="bit-true"``: the rollout GEMMs come from the HiF4 dot-product unit; on this
    model (K = 64 and 128) its results equal the fake-quantized GEMM's, so the run ends
    with the same weights."""
    import dataclasses

    config = RunConfig(train="fp32", rollout="hif4")
    runs = {}
    for gemm in ("fake", "bit-true"):
        model = tiny_model(tokenizer)
        runs[gemm] = trl_grpo.run(config, dataclasses.replace(QUICK, gemm=gemm), 0,
                                  tmp_path / gemm, progress=False, loaded=(tokenizer, model))
        assert {m.gemm for m in trl_grpo._quant_layers(model)} == {gemm}
    assert runs["bit-true"]["state_sha256"] == runs["fake"]["state_sha256"]
    assert runs["bit-true"]["abs_log_ratio"] == runs["fake"]["abs_log_ratio"]
