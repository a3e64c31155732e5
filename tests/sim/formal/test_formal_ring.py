"""Formal proofs that an interleaved unit's cut adder (:class:`hwgen.ring.LoopCuts`) equals
the combinational adder it replaces, for every back end and term shape.

Each proof drives the cut registers' load enable high and gives the adder free inputs in
every cycle; the one-cycle adder gets the same inputs through L - 1 registers. From the
(L - 1)-th rising edge on, every register of the L - 1 cut stages holds what the inputs
gave, so the cut adder's ``word`` must equal the one-cycle adder's, and its ``held``
output the accumulator word it was given L - 1 cycles before, for every input sequence: a
value that crossed a stage without its register would see the wrong cycle's inputs. BMC
depth L + 1 checks two cycles where that holds. The cuts are the ones the ring uses
(:func:`hwgen.ring.partition` of the adder's ``loop_blocks()``), at L = 8 (the most
stages, each block alone where the adder has eight or fewer) and L = 2. The mutant
drops one register from the first value that crosses a stage (the slip these proofs
exist for: a value read a stage early), which the solver must reject.
"""

import pytest
from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hwgen.parts import probe
from hwgen.ring import LoopCuts, partition
from hwgen.units import build_unit
from sim.formal import prove

#: (unit, residual, accum): every adder shape: the full window; the bounded back end with
#: one term (HiF4, NVFP4), two pre-added (HiF4 2:4), two paired (MXFP4) and four split
#: (MXFP4 2:4).
ADDERS = [("hif4", "none", "window"), ("hif4", "none", "bounded"),
          ("hif4", "2:4", "bounded"), ("mxfp4", "none", "bounded"),
          ("mxfp4", "2:4", "bounded"), ("nvfp4", "none", "bounded")]


def _make_add(unit, residual, accum, interleave):
    """The ring's adder factory of the unit (``make_add(cuts)``)."""
    return build_unit(unit, residual=residual, accum=accum,
                      interleave=interleave)._accumulator()._make_add


class DropOne(LoopCuts):
    """Cuts that forget the last register of the first value crossing a stage."""

    dropped = False

    def delay(self, m, value, a, b, **kwargs):
        if b > a and not self.dropped:
            self.dropped = True
            b -= 1
        return super().delay(m, value, a, b, **kwargs)


class CutProof(wiring.Component):
    """The cut adder against the combinational one fed the same inputs ``L - 1`` cycles
    later, checked from edge L - 1 on. The inputs are free in every cycle, so a value that
    crosses a stage without its register shows; ``mutant`` cuts with :class:`DropOne`."""

    def __init__(self, make_add, interleave, mutant):
        self._make_add, self._l, self._mutant = make_add, interleave, mutant
        width = len(probe(make_add(None)).step.as_value())
        super().__init__({"acc": In(32), "step": In(width)})

    def elaborate(self, platform):
        m = Module()
        L = self._l
        blocks = probe(self._make_add(None)).loop_blocks()
        cuts = (DropOne if self._mutant else LoopCuts)(partition(blocks, L), L)
        m.submodules.cut = cut = self._make_add(cuts)
        m.submodules.ref = ref = self._make_add(None)
        acc, step = self.acc, self.step
        m.d.comb += [cut.acc.eq(acc), cut.step.eq(step), cuts.enable.eq(1),
                     Assume(~ResetSignal())]
        for k in range(L - 1):          # the inputs L - 1 edges ago
            a, s = Signal.like(acc, name=f"acc_d{k}"), Signal.like(step, name=f"step_d{k}")
            m.d.sync += [a.eq(acc), s.eq(step)]
            acc, step = a, s
        m.d.comb += [ref.acc.eq(acc), ref.step.eq(step)]
        edges = Signal(range(L + 1), init=0)
        with m.If(edges < L):
            m.d.sync += edges.eq(edges + 1)
        with m.If(edges >= L - 1):
            m.d.comb += [Assert(cut.word == ref.word), Assert(cut.held == acc)]
        return m


def _prove(unit, residual, accum, L, mutant, tmp_path):
    make = _make_add(unit, residual, accum, L)
    name = f"ring_{unit}_{residual.replace(':', '')}_{accum}_i{L}"
    return prove(CutProof(make, L, mutant), name, tmp_path,
                 solver="boolector", depth=L + 1, timeout=1800, flatten=True)


def _cases():
    out = []
    for unit, residual, accum in ADDERS:
        for L in (2, 8):
            slow = (unit, residual, L) == ("mxfp4", "2:4", 2)     # the split: 25-30 s each
            out.append(pytest.param(unit, residual, accum, L,
                                    id=f"{unit}-{residual}-{accum}-i{L}",
                                    marks=[pytest.mark.slow] if slow else []))
    return out


@pytest.mark.parametrize("unit,residual,accum,L", _cases())
def test_cut_adder_equals_the_adder(unit, residual, accum, L, tmp_path):
    result = _prove(unit, residual, accum, L, False, tmp_path)
    assert result.status == "PASS", result.log[-3000:]


@pytest.mark.parametrize("unit,residual,accum,L", [("nvfp4", "none", "bounded", 8),
                                                   ("hif4", "2:4", "bounded", 2)])
def test_checking_one_edge_early_fails(unit, residual, accum, L, tmp_path):
    result = _prove(unit, residual, accum, L, True, tmp_path)
    assert result.status == "FAIL", result.log[-3000:]
