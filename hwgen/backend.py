"""The accumulator back ends a dot unit can be built with (``hif4spec.ACCUMS``).

:func:`make_adder` builds the combinational ``acc + step`` adder of a unit's accumulator
loop for a back end name: ``"window"``, :class:`hwgen.accum.ExactAdd` (every bit of every
term in one fixed-point window, the reference) or ``"bounded"``,
:class:`hwgen.accum_bounded.BoundedAdd` (a window a little wider than one term; two terms
whose exponents differ by at most a known bound are pre-added), both keeping spec section
7 bit for bit, or ``"trunc"``, :class:`hwgen.accum_trunc.TruncAdd` (aligned to the largest
operand and truncated, for comparison; not exact).
"""

from hif4spec import ACCUMS

from .accum import AccumSpec, ExactAdd
from .accum_bounded import WIDE, BoundedAdd
from .accum_trunc import TruncAdd

__all__ = ["make_adder"]

_ADDERS = {
    "window": lambda terms, max_exp_diff, cuts: ExactAdd(AccumSpec(terms), cuts),
    "bounded": lambda terms, max_exp_diff, cuts: BoundedAdd(
        terms, max_exp_diff if len([t for t in terms if t.name != WIDE]) == 2 else None,
        cuts=cuts),
    "trunc": lambda terms, max_exp_diff, cuts: TruncAdd(terms) if cuts is None else _uncut(),
}
assert tuple(_ADDERS) == ACCUMS


def _uncut():
    raise ValueError("the truncating back end has no cut loop (hif4spec.check_params refuses "
                     "an interleaved unit with it)")


def make_adder(accum, terms, max_exp_diff=None, cuts=None):
    """The adder of back end ``accum`` for ``terms``; ``max_exp_diff`` is the front end's
    bound on two terms' exponent difference (used by ``"bounded"``); ``cuts``, a
    :class:`hwgen.ring.LoopCuts`, splits its loop over the stages of an interleaved
    unit's ring (None: one combinational adder)."""
    try:
        make = _ADDERS[accum]
    except KeyError:
        raise ValueError(f"Accumulator back end must be one of {', '.join(ACCUMS)}, "
                         f"not {accum!r}") from None
    return make(terms, max_exp_diff, cuts)
