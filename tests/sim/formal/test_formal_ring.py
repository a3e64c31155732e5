"""Formal proofs that an interleaved unit's cut adder (:class:`hwgen.ring.LoopCuts`) equals
the combinational adder it replaces, for every back end and term shape.

Each proof drives the cut registers' load enable high and gives the adder free inputs in
every cycle (its accumulator input P cycles after the step, as the ring gives it: P is the
number of stages ahead of the accumulator's join); the one-cycle adder gets the same inputs
through P + L - 1 registers. From that edge on, every cut register holds what the inputs
gave, so the cut adder's ``word`` must equal the one-cycle adder's, and its ``held``
output the accumulator word of that step, for every input sequence: a value that crossed a
stage without its register would see the wrong cycle's inputs. BMC depth P + L + 1 checks
two cycles where that holds. The cuts are the ones the ring uses (:func:`hwgen.ring.place`),
at L = 8 (each block alone where the adder has eight or fewer) and L = 2. The mutant
drops one register from the first value that crosses a stage (the slip these proofs
exist for: a value read a stage early), which the solver must reject.
"""

import pytest
from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hwgen.parts import probe
from hwgen.ring import LoopCuts, place
from hwgen.units import build_unit
from sim.formal import prove

#: (unit, residual, accum): every adder shape: the full window; the bounded back end with
#: one term (HiF4, NVFP4), two pre-added (HiF4 2:4), two paired (MXFP4), two paired beside
#: a wide term (the MXFP4 + NVFP4 unit) and four split (MXFP4 2:4).
ADDERS = [("hif4", "none", "window"), ("hif4", "none", "bounded"),
          ("hif4", "2:4", "bounded"), ("mxfp4", "none", "bounded"),
          ("tc4_mxfp4_nvfp4", "none", "bounded"),
          ("mxfp4", "2:4", "bounded"), ("nvfp4", "none", "bounded")]


def _make_add(unit, residual, accum, interleave):
    """The ring's adder factory of the unit (``make_add(cuts)``)."""
    built = probe(build_unit(unit, residual=residual, accum=accum, interleave=interleave))
    return probe(built._accumulator())._make_add


class DropOne(LoopCuts):
    """Cuts that forget the last register of the first value crossing a stage."""

    dropped = False

    def delay(self, m, value, a, b, **kwargs):
        if b > a and not self.dropped:
            self.dropped = True
            b -= 1
        return super().delay(m, value, a, b, **kwargs)


class CutProof(wiring.Component):
    """The cut adder against the combinational one fed the same step ``P + L - 1`` cycles
    later (P: the cut adder's stages ahead of the accumulator's join, where its accumulator
    input comes P cycles after the step), checked from edge P + L - 1 on. The inputs are
    free in every cycle, so a value that crosses a stage without its register shows;
    ``mutant`` cuts with :class:`DropOne`."""

    def __init__(self, make_add, interleave, mutant):
        self._make_add, self._l, self._mutant = make_add, interleave, mutant
        width = len(probe(make_add(None)).step.as_value())
        super().__init__({"acc": In(32), "step": In(width)})
        self.prep = place(probe(make_add(None)), interleave).join

    def elaborate(self, platform):
        m = Module()
        L, P = self._l, self.prep
        cuts = place(probe(self._make_add(None)), L, DropOne if self._mutant else None)
        m.submodules.cut = cut = self._make_add(cuts)
        m.submodules.ref = ref = self._make_add(None)
        m.d.comb += [cuts.enable.eq(1), Assume(~ResetSignal())]

        def delayed(value, cycles, name):
            for k in range(cycles):
                reg = Signal.like(value, name=f"{name}_d{k}")
                m.d.sync += reg.eq(value)
                value = reg
            return value
        m.d.comb += [cut.step.eq(self.step), cut.acc.eq(delayed(self.acc, P, "acc_join"))]
        acc = delayed(self.acc, P + L - 1, "acc_ref")
        m.d.comb += [ref.acc.eq(acc), ref.step.eq(delayed(self.step, P + L - 1, "step_ref"))]
        edges = Signal(range(P + L + 1), init=0)
        with m.If(edges < P + L):
            m.d.sync += edges.eq(edges + 1)
        with m.If(edges >= P + L - 1):
            m.d.comb += [Assert(cut.word == ref.word), Assert(cut.held == acc)]
        return m


def _prove(unit, residual, accum, L, mutant, tmp_path):
    make = _make_add(unit, residual, accum, L)
    name = f"ring_{unit}_{residual.replace(':', '')}_{accum}_i{L}"
    proof = CutProof(make, L, mutant)
    return prove(proof, name, tmp_path, solver="boolector", depth=proof.prep + L + 1,
                 timeout=1800, flatten=True)


#: The proofs of the default suite: the shapes with cuts inside their step-only work or at
#: every block (a pre-add at L = 2, a pair and one term at L = 8, a pair beside a wide term
#: at L = 2); the others run with ``make test-all``.
DEFAULT = {("hif4", "2:4", "bounded", 2), ("mxfp4", "none", "bounded", 8),
           ("nvfp4", "none", "bounded", 8), ("tc4_mxfp4_nvfp4", "none", "bounded", 2)}


def _cases():
    out = []
    for unit, residual, accum in ADDERS:
        for L in (2, 8):
            # the split's step-only stages (P = 7 and 23) make its proofs long (BMC depth
            # P + L + 1: 10 and 32)
            slow = (unit, residual, accum, L) not in DEFAULT
            out.append(pytest.param(unit, residual, accum, L,
                                    id=f"{unit}-{residual}-{accum}-i{L}",
                                    marks=[pytest.mark.slow] if slow else []))
    return out


@pytest.mark.parametrize("unit,residual,accum,L", _cases())
def test_cut_adder_equals_the_adder(unit, residual, accum, L, tmp_path):
    result = _prove(unit, residual, accum, L, False, tmp_path)
    assert result.status == "PASS", result.log[-3000:]


@pytest.mark.parametrize("unit,residual,accum,L", [
    ("nvfp4", "none", "bounded", 8),
    pytest.param("hif4", "2:4", "bounded", 2, marks=pytest.mark.slow)])
def test_a_dropped_cut_register_is_caught(unit, residual, accum, L, tmp_path):
    result = _prove(unit, residual, accum, L, True, tmp_path)
    assert result.status == "FAIL", result.log[-3000:]
