"""Small builders of step streams shared by the named-case tables."""

import numpy as np

__all__ = ["stream", "loop", "single"]


def stream(a, w, r, first, last):
    """A step stream dict as ``sim.dot.run_steps`` and the bench take it."""
    return {"a": a, "w": w, "r": r, "first": np.asarray(first, dtype=bool),
            "last": np.asarray(last, dtype=bool)}


def loop(n):
    """``first``/``last`` flags of one K-loop of ``n`` steps."""
    first = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    first[0] = last[-1] = True
    return first, last


def single(n):
    """``first``/``last`` flags of ``n`` one-step results."""
    return np.ones(n, dtype=bool), np.ones(n, dtype=bool)
