"""A verifiable-reward task: fixed-width multi-digit addition, answer written reversed.

Prompt ``a+b=`` with both operands zero-padded to ``digits`` digits; the answer is the sum
zero-padded to ``digits + 1`` digits, written least significant digit first (the order in
which carries are computed, which a tiny transformer can learn in minutes), then EOS.
Every prompt and every answer has the same length, so batches need no padding.
The reward is 1 for an exactly correct answer (EOS included), else 0.
"""

import torch

__all__ = ["VOCAB", "PLUS", "EQUALS", "EOS", "AdditionTask"]

PLUS, EQUALS, EOS = 10, 11, 12
VOCAB = 13


class AdditionTask:
    """Addition of two ``digits``-digit numbers.

    Attributes
    ----------
    prompt_len, answer_len, seq_len : int
    """

    def __init__(self, digits):
        if digits < 1:
            raise ValueError(f"digits must be >= 1, not {digits!r}")
        self.digits = digits
        self.prompt_len = 2 * digits + 2
        self.answer_len = digits + 2          # digits + 1 sum digits, then EOS
        self.seq_len = self.prompt_len + self.answer_len

    def sample(self, n, generator):
        """``n`` random operand pairs, as two int64 tensors."""
        hi = 10 ** self.digits
        a = torch.randint(0, hi, (n,), generator=generator)
        b = torch.randint(0, hi, (n,), generator=generator)
        return a, b

    def _digits(self, value, width, reverse):
        powers = 10 ** torch.arange(width - 1, -1, -1)
        out = (value[:, None] // powers) % 10
        return out.flip(1) if reverse else out

    def prompts(self, a, b):
        """Token tensor (n, prompt_len)."""
        n = a.shape[0]
        return torch.cat([
            self._digits(a, self.digits, False),
            torch.full((n, 1), PLUS),
            self._digits(b, self.digits, False),
            torch.full((n, 1), EQUALS),
        ], dim=1)

    def answers(self, a, b):
        """Token tensor (n, answer_len): the reversed sum, then EOS."""
        n = a.shape[0]
        return torch.cat([self._digits(a + b, self.digits + 1, True),
                          torch.full((n, 1), EOS)], dim=1)

    def reward(self, a, b, generated):
        """1.0 where ``generated`` (n, answer_len) is exactly the answer, else 0.0."""
        return (generated == self.answers(a, b)).all(dim=1).float()

    def decode(self, tokens):
        """Readable string of one token sequence (for debugging)."""
        table = "0123456789+=$"
        return "".join(table[int(t)] for t in tokens)
