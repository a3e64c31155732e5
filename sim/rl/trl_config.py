"""Settings and precision matrix of GRPO on SmolLM2 (:mod:`sim.rl.trl_grpo`), without torch.

The command line checks its options with these before any heavy import.

Precision names:

- rollout: ``fp32``; ``bf16`` (weights and Linear inputs rounded to BF16); ``FORMAT``
  (W4A4: weights and inputs in FORMAT along K); ``FORMAT-W16A4`` (inputs only); either of
  the last two with ``+MODE`` for Rollout-ResQ on the inputs (``hif4+2:4``);
- training: ``fp32``, ``bf16`` or ``FORMAT`` (every operand of the forward and backward
  GEMMs).
"""

import dataclasses
import hashlib
import json
from pathlib import Path

from hif4spec import RESQ_MODES

from .trl_tasks import TASKS

__all__ = ["FP4", "FLOATS", "TASKS", "Settings", "QUICK", "FULL", "RunConfig",
           "rollout_fields", "train_fields", "matrix", "run_path", "RUNS_DIR"]

FP4 = ("hif4", "mxfp4", "nvfp4")
#: Precisions that are not 4-bit: ``fp32`` (no quantization) and ``bf16``.
FLOATS = ("fp32", "bf16")
ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of one run; ``prompts x group`` completions per step."""

    task: str = "max-fewshot"
    steps: int = 60
    prompts: int = 8
    group: int = 4
    max_tokens: int = 16
    lr: float = 3e-6
    eval_n: int = 48
    eval_every: int = 10
    eval_tokens: int = 4
    save_every: int = 5
    gemm: str = "fake"

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, not {self.task!r}")
        for name in ("steps", "prompts", "max_tokens", "eval_n", "eval_every", "eval_tokens",
                     "save_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.group < 2:
            raise ValueError(f"group must be >= 2 (GRPO compares completions of a prompt), "
                             f"not {self.group}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, not {self.lr}")


#: Smoke settings: seconds per step on a 2-core CPU; shows the path works, not a result.
QUICK = Settings(steps=2, prompts=2, group=2, max_tokens=3, eval_n=4, eval_every=2,
                 eval_tokens=3, save_every=1)
#: The experiment: 32 completions of at most 16 tokens per step, 60 steps.
FULL = Settings()


def rollout_fields(text):
    """``(label, {weight, act, resq})`` of a rollout precision (see the module docstring);
    ``ValueError`` for a bad one."""
    spec = text.strip()
    base, plus, mode = spec.partition("+")
    fmt, dash, wa = base.partition("-")
    fmt = fmt.lower()
    if fmt in FLOATS and not dash and not plus:
        return fmt, ({} if fmt == "fp32" else {"weight": "bf16", "act": "bf16"})
    if fmt not in FP4:
        raise ValueError(f"rollout {text!r}: give fp32, bf16 or FORMAT[-W16A4][+MODE] with "
                         f"FORMAT one of {', '.join(FP4)}")
    wa = wa.upper() if dash else "W4A4"
    if wa not in ("W4A4", "W16A4"):
        raise ValueError(f"rollout {text!r}: the mode after '-' is W4A4 or W16A4, not {wa!r}")
    if plus and mode not in RESQ_MODES:
        raise ValueError(f"rollout {text!r}: ResQ mode must be one of {', '.join(RESQ_MODES)}")
    resq = mode if plus else None
    label = f"{fmt}-{wa}" + (f"+{resq}" if resq else "")
    return label, {"weight": fmt if wa == "W4A4" else None, "act": fmt, "resq": resq}


def train_fields(text):
    """``(label, {weight, act, grad})`` of a training precision: fp32, bf16 or an FP4
    format; ``ValueError`` for a bad one."""
    fmt = text.strip().lower()
    if fmt == "fp32":
        return fmt, {}
    if fmt == "bf16" or fmt in FP4:
        return fmt, {"weight": fmt, "act": fmt, "grad": fmt}
    raise ValueError(f"train {text!r}: give fp32, bf16 or one of {', '.join(FP4)}")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One cell of the matrix: training and rollout precisions, TIS cap (None: off)."""

    train: str = "fp32"
    rollout: str = "fp32"
    tis: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "train", train_fields(self.train)[0])
        object.__setattr__(self, "rollout", rollout_fields(self.rollout)[0])
        if self.tis is not None and not self.tis >= 1.0:
            raise ValueError(f"the TIS cap must be >= 1, not {self.tis}")

    @property
    def name(self):
        tis = "" if self.tis is None else f" tis{self.tis:g}"
        return f"{self.train}/{self.rollout}{tis}"

    @property
    def family(self):
        for part in (self.rollout, self.train):
            fmt = part.split("-")[0]
            if fmt in FP4:
                return fmt
        return "float"

    @property
    def cost(self):
        """Step time relative to the float baseline, roughly, as measured on a CPU: FP4
        rollouts about 1.6x (1.9x with ResQ), FP4 training about 3.6x. A sweep runs the
        cheapest first, so a stopped one has finished as many runs as it could."""
        fields = rollout_fields(self.rollout)[1]
        cost = 1.0
        if fields.get("act") in FP4:
            cost += 0.6 if fields["weight"] else 0.5
        if fields.get("resq"):
            cost += 0.3
        if self.train in FP4:
            cost += 2.2
        return cost

    @property
    def slug(self):
        """The name as a folder name."""
        return self.name.replace("/", "__").replace(":", "").replace("+", "_").replace(" ", "_")


def matrix(formats=("hif4",), float_precision="fp32", resq="2:4", tis=(None,)):
    """The precision matrix: the float baseline, then per format all-FP4, FP4 rollouts with
    float training (W4A4 and W16A4), each FP4 W4A4 row again with Rollout-ResQ ``resq``;
    every row once per TIS cap of ``tis``."""
    f = float_precision
    rows = [(f, f)]
    for fmt in formats:
        rows += [(fmt, fmt), (fmt, f"{fmt}+{resq}"), (f, fmt), (f, f"{fmt}+{resq}"),
                 (f, f"{fmt}-W16A4")]
    return [RunConfig(train, rollout, cap) for cap in tis for train, rollout in rows]


#: Default root of the run folders (:func:`run_path`).
RUNS_DIR = ROOT / "build" / "rl" / "smollm2"


def run_path(root, config, settings, seed, device="cpu"):
    """A run's folder: ``root/<settings digest>/<config>/seed<seed>``, so runs of other
    settings never share one and a sweep and ``hif4 rl`` reuse each other's runs."""
    key = json.dumps([dataclasses.asdict(settings), device], sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return Path(root) / f"{settings.task}-{settings.steps}steps-{digest}" / config.slug / \
        f"seed{seed}"
