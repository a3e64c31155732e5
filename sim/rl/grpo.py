"""GRPO with quantized rollouts and quantized training: the precision-matrix experiment.

One run per seed: a tiny decoder (:mod:`sim.rl.model`) learns fixed-width addition
(:mod:`sim.rl.task`) by a supervised warm-up in float32 (shared by every configuration of
that seed), then each configuration continues from that checkpoint with GRPO:

- per step, ``prompts`` prompts, each sampled ``group`` times (temperature 1) by the rollout
  policy (the model in its rollout precision, optionally with Rollout-ResQ);
- reward 1 for an exact answer; advantages normalised within each group
  ``(r - mean) / (std + 1e-4)``;
- the training policy (the model in its training precision) scores the same tokens: the
  old log-probabilities, the rollout-train mismatch (mean |log ratio| on the sampled tokens,
  exact KL(rollout || train) over the vocabulary per token);
- loss per token ``-min(w, C) * min(rho A, clip(rho, 1-eps, 1+eps) A)`` with
  ``rho = pi_theta / pi_old`` and the truncated importance weight ``w = pi_old / pi_rollout``
  (``C = 5``), averaged over all tokens; Adam.

Every configuration of one seed sees the same prompts and the same random stream, so the
differences come from the numerics. Evaluation is greedy exact-match accuracy on a fixed
held-out set, both in the configuration's rollout precision and in BF16.
"""

import copy
import dataclasses
import math
import time

import torch
import torch.nn.functional as F

from hif4spec import RESQ_MODES

from .model import TinyConfig, TinyDecoder
from .qlinear import (RESQ_EXTRA, Precision, convert_linears, gather_stats, reset_stats,
                      set_collect_stats, set_gemm, set_mode)
from .task import VOCAB, AdditionTask

__all__ = ["Settings", "QUICK", "FULL", "RunConfig", "build_configs", "run_experiment",
           "summarize", "format_table", "plot_curves", "LAYER_TYPES", "eval_set_for"]

FP4 = ("hif4", "mxfp4", "nvfp4")
#: The reference precision: training and rollouts in it are the baseline configuration.
BASELINE = "bf16"
LAYER_TYPES = ("attn.qkv", "attn.out", "mlp.up", "mlp.down", "lm_head")


@dataclasses.dataclass
class Settings:
    digits: int = 2
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    warmup_steps: int = 250
    warmup_batch: int = 128
    warmup_lr: float = 3e-3
    steps: int = 20
    prompts: int = 16
    group: int = 8
    lr: float = 1e-4
    epochs: int = 1
    minibatches: int = 2
    clip_eps: float = 0.2
    tis_cap: float = 5.0
    eval_n: int = 256
    eval_every: int = 10
    gemm: str = "fake"          # forward GEMM of FP4 layers: "fake" or "bit-true" (qlinear)


QUICK = Settings(warmup_steps=250, steps=3, prompts=8, group=4, epochs=1, minibatches=1,
                 eval_n=64, eval_every=3)
FULL = Settings()
#: Progress units of one GRPO step (a warm-up step is one unit): rough relative cost.
_GRPO_UNITS = 10


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One cell of the precision matrix."""

    train: str          # training format of every GEMM operand: bf16 or an FP4 format
    weight: str         # rollout weight format
    act: str            # rollout activation format
    resq: str | None = None

    @property
    def family(self):
        """The FP4 format this configuration is about (``bf16`` for the baseline)."""
        for fmt in (self.train, self.weight, self.act):
            if fmt in FP4:
                return fmt
        return BASELINE

    @property
    def rollout_label(self):
        if self.weight == BASELINE and self.act == BASELINE:
            return BASELINE
        w = "4" if self.weight in FP4 else "16"
        a = "4" if self.act in FP4 else "16"
        label = f"{self.family}-W{w}A{a}"
        return label + (f"+{self.resq}" if self.resq else "")

    @property
    def name(self):
        return f"{self.train}/{self.rollout_label}"

    def train_precision(self):
        return Precision.uniform(self.train)

    def rollout_precision(self):
        return Precision(weight=self.weight, act=self.act, resq=self.resq)


def build_configs(formats=FP4, resq_modes=("dense", "2:4"), extra=RESQ_EXTRA):
    """The precision matrix: BF16 baseline; per format BF16 or FP4 training x rollout BF16,
    W4A16, W16A4, W4A4; FP4 training with W4A4 + ResQ in ``resq_modes`` and the format's
    ``extra`` sparsifiers (by format; default :data:`sim.rl.qlinear.RESQ_EXTRA`)."""
    configs = [RunConfig(BASELINE, BASELINE, BASELINE)]
    for fmt in formats:
        rollouts = [(fmt, BASELINE), (BASELINE, fmt), (fmt, fmt)]
        configs += [RunConfig(BASELINE, w, a) for w, a in rollouts]
        configs += [RunConfig(fmt, BASELINE, BASELINE)]
        configs += [RunConfig(fmt, w, a) for w, a in rollouts]
        modes = list(resq_modes) + list(extra.get(fmt, ()))
        configs += [RunConfig(fmt, fmt, fmt, mode) for mode in modes]
    return configs


class _Progress:
    """``update(what, n)``: ``n`` more progress units done, now at ``what``; drawn with
    :func:`sim.progress.progress` (a bar on a terminal, plain lines in a log)."""

    def __init__(self, total, enabled=True, stream=None):
        from sim.progress import progress

        self.bar = progress(total, "hif4 rl", enabled=enabled, stream=stream)

    def update(self, what, n=1):
        self.bar.set_postfix_str(what, refresh=False)
        self.bar.update(n)

    def close(self):
        self.bar.close()


def _answer_logits(model, seq, prompt_len):
    """Log-softmax (b, A, V) of the answer tokens of full sequences ``seq``."""
    logits = model(seq[:, :-1])[:, prompt_len - 1:]
    return F.log_softmax(logits.float(), dim=-1)


@torch.no_grad()
def generate(model, prompts, answer_len, generator=None, greedy=False):
    """Sample ``answer_len`` tokens; the prefix is recomputed at every step (no KV cache).

    Returns the answer tokens (b, A) and the sampling distributions' log-probs (b, A, V).
    """
    seq = prompts
    dists = []
    for _ in range(answer_len):
        logp = F.log_softmax(model(seq)[:, -1].float(), dim=-1)
        if greedy:
            tok = logp.argmax(dim=-1)
        else:
            tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        dists.append(logp)
        seq = torch.cat([seq, tok[:, None]], dim=1)
    return seq[:, prompts.shape[1]:], torch.stack(dists, dim=1)


@torch.no_grad()
def evaluate(model, task, eval_set, rollout=None):
    """Greedy exact-match accuracy; ``rollout`` temporarily replaces the rollout precision."""
    a, b = eval_set
    layers = [m for m in model.modules() if hasattr(m, "rollout_precision")]
    saved = [m.rollout_precision for m in layers]
    if rollout is not None:
        for m in layers:
            m.rollout_precision = rollout
    set_mode(model, "rollout")
    try:
        gen, _ = generate(model, task.prompts(a, b), task.answer_len, greedy=True)
    finally:
        for m, p in zip(layers, saved):
            m.rollout_precision = p
    return float(task.reward(a, b, gen).mean())


def warmup(settings, seed, progress=None):
    """Supervised float32 warm-up on the answer tokens; returns the model."""
    task = AdditionTask(settings.digits)
    torch.manual_seed(seed)
    cfg = TinyConfig(VOCAB, task.seq_len, settings.d_model, settings.n_layers,
                     settings.n_heads, settings.d_ff)
    model = TinyDecoder(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.warmup_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(10_000 + seed)
    for step in range(settings.warmup_steps):
        lr = settings.warmup_lr * min(1.0, (step + 1) / 50)
        for group in opt.param_groups:
            group["lr"] = lr
        a, b = task.sample(settings.warmup_batch, gen)
        seq = torch.cat([task.prompts(a, b), task.answers(a, b)], dim=1)
        logp = _answer_logits(model, seq, task.prompt_len)
        loss = -logp.gather(-1, seq[:, task.prompt_len:, None]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if progress and step % 25 == 24:
            progress.update(f"seed {seed} warm-up {step + 1}/{settings.warmup_steps}", 25)
    if progress:
        progress.update(f"seed {seed} warm-up done", settings.warmup_steps % 25)
    return model


def grpo_run(base, config, settings, seed, eval_set, progress=None):
    """GRPO from a copy of ``base`` in one configuration; returns a result dict."""
    task = AdditionTask(settings.digits)
    model = copy.deepcopy(base)
    convert_linears(model, train=config.train_precision(), rollout=config.rollout_precision())
    set_gemm(model, settings.gemm)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(20_000 + seed)
    bf16_roll = Precision(weight=BASELINE, act=BASELINE)
    curve = {"step": [], "acc": [], "acc_bf16": []}
    history = {"reward": [], "abs_log_ratio": [], "kl": [], "clip_frac": [], "tis_trunc": []}

    def do_eval(step):
        curve["step"].append(step)
        curve["acc"].append(evaluate(model, task, eval_set))
        curve["acc_bf16"].append(evaluate(model, task, eval_set, rollout=bf16_roll))

    do_eval(0)
    P = task.prompt_len
    for step in range(1, settings.steps + 1):
        a, b = task.sample(settings.prompts, gen)
        a, b = a.repeat_interleave(settings.group), b.repeat_interleave(settings.group)
        prompts = task.prompts(a, b)
        # rollout policy
        set_mode(model, "rollout")
        set_collect_stats(model, True)
        answer, roll_dist = generate(model, prompts, task.answer_len, gen)
        set_collect_stats(model, False)
        seq = torch.cat([prompts, answer], dim=1)
        reward = task.reward(a, b, answer)
        r = reward.view(settings.prompts, settings.group)
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=False, keepdim=True) + 1e-4))
        adv = adv.reshape(-1, 1)
        # training policy, before the update
        set_mode(model, "train")
        with torch.no_grad():
            old_dist = _answer_logits(model, seq, P)
        idx = answer[:, :, None]
        logp_roll = roll_dist.gather(-1, idx).squeeze(-1)
        logp_old = old_dist.gather(-1, idx).squeeze(-1)
        log_ratio = logp_old - logp_roll
        kl = (roll_dist.exp() * (roll_dist - old_dist)).sum(-1)
        tis = log_ratio.exp().clamp(max=settings.tis_cap)
        history["reward"].append(float(reward.mean()))
        history["abs_log_ratio"].append(float(log_ratio.abs().mean()))
        history["kl"].append(float(kl.mean()))
        history["tis_trunc"].append(float((log_ratio.exp() > settings.tis_cap).float().mean()))
        clipped = []
        if bool((adv != 0).any()):
            n = seq.shape[0]
            for _ in range(settings.epochs):
                perm = torch.randperm(n, generator=gen)
                for mb in perm.chunk(settings.minibatches):
                    logp_new = _answer_logits(model, seq[mb], P).gather(-1, idx[mb]).squeeze(-1)
                    ratio = (logp_new - logp_old[mb]).exp()
                    s1 = ratio * adv[mb]
                    s2 = ratio.clamp(1 - settings.clip_eps, 1 + settings.clip_eps) * adv[mb]
                    loss = -(tis[mb] * torch.minimum(s1, s2)).mean()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    clipped.append(float(((ratio - 1).abs() > settings.clip_eps).float().mean()))
        history["clip_frac"].append(sum(clipped) / len(clipped) if clipped else 0.0)
        if step % settings.eval_every == 0 or step == settings.steps:
            do_eval(step)
        if progress:
            progress.update(f"seed {seed} {config.name} step {step}", _GRPO_UNITS)
    stats = gather_stats(model)
    reset_stats(model)
    return {
        "config": config.name, "seed": seed, "curve": curve, "history": history,
        "acc": curve["acc"][-1], "acc_bf16": curve["acc_bf16"][-1],
        "abs_log_ratio": sum(history["abs_log_ratio"]) / len(history["abs_log_ratio"]),
        "kl": sum(history["kl"]) / len(history["kl"]),
        "underflow": {k: v["underflow"] for k, v in stats.items()},
        "underflow_final": {k: v["underflow_final"] for k, v in stats.items()},
    }


def _warmup_job(settings, seed, threads):
    torch.set_num_threads(threads)
    return warmup(settings, seed).state_dict()


def _grpo_job(settings, state, config, seed, eval_set, threads):
    torch.set_num_threads(threads)
    task = AdditionTask(settings.digits)
    base = TinyDecoder(TinyConfig(VOCAB, task.seq_len, settings.d_model, settings.n_layers,
                                  settings.n_heads, settings.d_ff))
    base.load_state_dict(state)
    return grpo_run(base, config, settings, seed, eval_set)


def eval_set_for(settings, seed):
    """The fixed held-out problems of one seed."""
    return AdditionTask(settings.digits).sample(settings.eval_n,
                                                torch.Generator().manual_seed(30_000 + seed))


def run_experiment(settings, configs, seeds, progress=True, threads=1, run_tasks=None,
                   previous=None):
    """Warm-up once per seed, then GRPO for every configuration; returns the results dict.

    Without ``run_tasks`` everything runs in this process with ``threads`` torch threads.
    ``run_tasks(tasks, on_result)`` runs the warm-ups, then the GRPO runs, elsewhere (the
    CLI passes one built on :func:`sim.sweep.run_tasks`): ``tasks`` is a list of ``(name,
    fn, args)`` with ``fn`` a module-level function of this module and ``args`` plain data,
    and ``on_result(args, value)`` is to be called here as each finishes; a task that fails
    for good raises. Every run is seeded on its own, so the results do not depend on where
    it ran. ``previous``: the results of an earlier call with the same settings, whose runs
    are kept instead of run again.
    """
    torch.set_num_threads(threads)
    kept = {}
    if previous and previous.get("settings") == dataclasses.asdict(settings):
        kept = {(r["seed"], r["config"]): r for r in previous["runs"]}
    work = [(seed, config) for seed in seeds for config in configs]
    todo = [(seed, config) for seed, config in work if (seed, config.name) not in kept]
    todo_seeds = [seed for seed in seeds if any(s == seed for s, _ in todo)]
    bar = _Progress((settings.warmup_steps * len(todo_seeds)
                     + len(todo) * settings.steps * _GRPO_UNITS), enabled=progress)
    t0 = time.monotonic()
    done = dict(kept)
    if run_tasks is None:
        for seed in todo_seeds:
            base = warmup(settings, seed, bar)
            for s, config in todo:
                if s == seed:
                    done[(seed, config.name)] = grpo_run(base, config, settings, seed,
                                                         eval_set_for(settings, seed), bar)
    else:
        states = {}

        def warm(args, state):
            states[args[1]] = state
            bar.update(f"seed {args[1]} warm-up done", settings.warmup_steps)

        def ran(args, run):
            done[(run["seed"], run["config"])] = run
            bar.update(f"seed {run['seed']} {run['config']} done", settings.steps * _GRPO_UNITS)

        try:
            run_tasks([(f"warm-up seed {seed}", _warmup_job, (settings, seed, threads))
                       for seed in todo_seeds], warm)
            run_tasks([(f"seed {seed} {config.name}", _grpo_job,
                        (settings, states[seed], config, seed, eval_set_for(settings, seed),
                         threads))
                       for seed, config in todo], ran)
        except KeyboardInterrupt as stop:
            bar.close()
            # what finished, in the form ``previous`` takes, so that a rerun keeps it
            stop.partial = {"settings": dataclasses.asdict(settings), "seeds": list(seeds),
                            "runs": [done[(seed, config.name)] for seed, config in work
                                     if (seed, config.name) in done],
                            "partial": True}
            raise
    runs = [done[(seed, config.name)] for seed, config in work]
    bar.close()
    return {
        "settings": dataclasses.asdict(settings),
        "seeds": list(seeds),
        "configs": [dataclasses.asdict(c) | {"name": c.name, "family": c.family}
                    for c in configs],
        "summary": summarize(runs, configs, seeds),
        "runs": runs,
        "wall_s": round(time.monotonic() - t0, 1),
    }


def _mean_std(values):
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, s


def summarize(runs, configs, seeds):
    """Per configuration: means and standard deviations over seeds; gaps paired per seed."""
    by = {(r["config"], r["seed"]): r for r in runs}
    base = configs[0].name
    out = []
    for c in configs:
        rs = [by[(c.name, s)] for s in seeds]
        row = {"config": c.name, "family": c.family, "train": c.train,
               "rollout": c.rollout_label}
        for key in ("acc", "acc_bf16", "abs_log_ratio", "kl"):
            row[key], row[key + "_std"] = _mean_std([r[key] for r in rs])
        for key in ("acc", "acc_bf16"):
            gaps = [by[(c.name, s)][key] - by[(base, s)][key] for s in seeds]
            row["gap" if key == "acc" else "gap_bf16"], row[("gap" if key == "acc" else
                                                             "gap_bf16") + "_std"] = _mean_std(gaps)
        row["acc_step0"] = sum(r["curve"]["acc"][0] for r in rs) / len(rs)
        for key in ("underflow", "underflow_final"):
            row[key] = {t: sum(r[key].get(t, 0.0) for r in rs) / len(rs) for t in LAYER_TYPES}
        out.append(row)
    return out


def _pct(v):
    return f"{100 * v:5.1f}"


def format_table(results):
    """The results as a fixed-width text table (percent; mean +- std over seeds)."""
    seeds = results["seeds"]
    lines = [
        f"GRPO precision matrix: {len(results['summary'])} configurations, seeds "
        f"{', '.join(map(str, seeds))}; accuracy = greedy exact match (%), mean +- std over "
        "seeds; gap = paired difference to bf16/bf16",
        "",
        f"{'train/rollout':<28} {'acc':>12} {'gap':>12} {'acc@bf16':>12} {'gap@bf16':>12} "
        f"{'|logr|':>7} {'KL':>8}  underflow to zero % (qkv out up down head) main -> final",
    ]
    for row in results["summary"]:
        uf = " ".join(_pct(row["underflow"][t]) for t in LAYER_TYPES)
        uf2 = " ".join(_pct(row["underflow_final"][t]) for t in LAYER_TYPES)
        resq = row["config"].endswith(tuple("+" + m for m in RESQ_MODES))
        lines.append(
            f"{row['config']:<28} {_pct(row['acc'])}+-{_pct(row['acc_std']).strip():>4} "
            f"{100 * row['gap']:+6.1f}+-{_pct(row['gap_std']).strip():>4} "
            f"{_pct(row['acc_bf16'])}+-{_pct(row['acc_bf16_std']).strip():>4} "
            f"{100 * row['gap_bf16']:+6.1f}+-{_pct(row['gap_bf16_std']).strip():>4} "
            f"{row['abs_log_ratio']:7.4f} {row['kl']:8.5f}  {uf}" + (f" -> {uf2}" if resq else ""))
    return "\n".join(lines) + "\n"


def plot_curves(results, path):
    """Per format (columns): greedy accuracy in the rollout precision vs GRPO step (top) and
    the rollout reward per step, moving average of 5 (bottom); means over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    families = [f for f in FP4 if any(row["family"] == f for row in results["summary"])]
    fig, axes = plt.subplots(2, len(families), figsize=(6 * len(families), 8.5), sharey="row",
                             squeeze=False)
    base = results["summary"][0]["config"]
    colors = {BASELINE: "tab:gray", "W4A16": "tab:blue", "W16A4": "tab:orange",
              "W4A4": "tab:red", "+dense": "tab:green", "+2:4": "tab:purple",
              "+channel50": "tab:brown", "+block32x64": "tab:olive"}

    def mean_curve(name, key, sub):
        rs = [r for r in runs if r["config"] == name]
        n = len(rs[0][key][sub])
        return [sum(r[key][sub][i] for r in rs) / len(rs) for i in range(n)]

    def smooth(values, k=5):
        return [sum(values[max(0, i - k + 1):i + 1]) / len(values[max(0, i - k + 1):i + 1])
                for i in range(len(values))]

    for col, fam in enumerate(families):
        names = [base] + [row["config"] for row in results["summary"] if row["family"] == fam]
        for name in names:
            train, rollout = name.split("/")
            kind = next((k for k in colors if k.startswith("+") and rollout.endswith(k)), None)
            kind = kind or (BASELINE if rollout == BASELINE else rollout.split("-")[-1])
            style = {"color": colors.get(kind, "black"), "label": name,
                     "linestyle": "--" if train == BASELINE else "-"}
            if name == base:
                style.update(color="black", linewidth=2.5)
            rs = [r for r in runs if r["config"] == name]
            steps = rs[0]["curve"]["step"]
            acc = [100 * v for v in mean_curve(name, "curve", "acc")]
            axes[0][col].plot(steps, acc, marker="o", markersize=3, **style)
            reward = smooth([100 * v for v in mean_curve(name, "history", "reward")])
            axes[1][col].plot(range(1, len(reward) + 1), reward, **style)
        axes[0][col].set_title(f"{fam}: greedy eval accuracy in rollout precision")
        axes[1][col].set_title(f"{fam}: rollout reward (moving average of 5)")
        axes[1][col].set_xlabel("GRPO step")
        for row in (0, 1):
            axes[row][col].grid(alpha=0.3)
        axes[0][col].legend(fontsize=7, loc="best")
    axes[0][0].set_ylabel("accuracy (%)")
    axes[1][0].set_ylabel("reward (%)")
    fig.suptitle(f"GRPO on {results['settings']['digits']}-digit addition; mean over seeds "
                 f"{', '.join(map(str, results['seeds']))}; dashed = BF16 training, "
                 "solid = FP4 training")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
