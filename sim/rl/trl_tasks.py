"""Synthetic verifiable tasks for GRPO on a pretrained causal LM, built in memory.

Each task is a plain-text prompt whose answer is one integer, rewarded by exact match: a
completion earns 1 when it starts (after blanks) with the answer's digits and no further
digit, else 0. The task is "which of two numbers is larger" with two distinct numbers
from 1 to 99, in two forms:

- ``max-fewshot``: plain text, two worked examples, then the question;
- ``max-zeroshot``: a chat turn (the model's chat template applies), the question alone,
  asking for the number only.

A completion is text, or for a chat prompt the assistant's message
(``[{"role": "assistant", "content": ...}]``, as TRL hands it to reward functions).

The held-out set (``heldout``) is fixed, the same for every seed; the training pairs
(``train_pairs``) exclude it and are drawn per seed.
"""

import random
import re

__all__ = ["TASKS", "Task", "make_task", "reward", "completion_text", "LOW", "HIGH"]

#: The numbers of a question are distinct integers in [LOW, HIGH].
LOW, HIGH = 1, 99

_EXAMPLES = ((23, 71), (58, 14))
_FEWSHOT_HEAD = "".join(f"Which number is larger, {a} or {b}?\nAnswer: {max(a, b)}\n\n"
                        for a, b in _EXAMPLES)
_ANSWER = re.compile(r"\s*(\d+)(?!\d)")


def _fewshot(a, b):
    return f"{_FEWSHOT_HEAD}Which number is larger, {a} or {b}?\nAnswer:"


def _zeroshot(a, b):
    return [{"role": "user",
             "content": f"Which number is larger, {a} or {b}? Reply with the number only."}]


#: Task name -> prompt builder ``(a, b) -> str`` (text) or list of chat messages.
TASKS = {"max-fewshot": _fewshot, "max-zeroshot": _zeroshot}

#: Seed of the held-out set (the same for every run).
HELDOUT_SEED = 4_242


def completion_text(completion):
    """The text of a completion: itself, or the content of a chat completion's last
    message."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def reward(completion, answer):
    """1.0 if ``completion`` starts (after blanks) with the integer ``answer``, else 0.0."""
    m = _ANSWER.match(completion_text(completion))
    return 1.0 if m is not None and m.group(1) == str(answer) else 0.0


def _pairs(rng, n, exclude=()):
    seen = set(exclude)
    out = []
    while len(out) < n:
        a, b = rng.randint(LOW, HIGH), rng.randint(LOW, HIGH)
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            out.append((a, b))
    return out


class Task:
    """One task: ``name`` of :data:`TASKS`, a fixed held-out set of ``heldout_n`` pairs."""

    def __init__(self, name, heldout_n=48):
        if name not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, not {name!r}")
        if heldout_n < 1:
            raise ValueError(f"heldout_n must be >= 1, not {heldout_n}")
        self.name = name
        self.prompt = TASKS[name]
        self.heldout_pairs = _pairs(random.Random(HELDOUT_SEED), heldout_n,
                                    exclude=_EXAMPLES)

    def rows(self, pairs):
        """``[{"prompt": text or chat messages, "answer": int}]`` for ``pairs``."""
        return [{"prompt": self.prompt(a, b), "answer": max(a, b)} for a, b in pairs]

    def heldout(self):
        return self.rows(self.heldout_pairs)

    def train_rows(self, n, seed):
        """``n`` training rows of seed ``seed``, none of them held out."""
        exclude = set(self.heldout_pairs) | set(_EXAMPLES)
        return self.rows(_pairs(random.Random(1_000 + seed), n, exclude))

    def rewards(self, completions, answers):
        return [reward(c, a) for c, a in zip(completions, answers)]


def make_task(name, heldout_n=48):
    return Task(name, heldout_n)
