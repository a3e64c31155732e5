"""Formal proof of what the multi-format unit shares: its operand muxes and element
products (:class:`hwgen.multi.ElementProducts`) give each format's own element products,
for every input of every format.

For a step of format ``f`` (the format code assumed to be ``f``'s), with the unit's
payload fields free, every shared product equals the product of the element codes read at
``f``'s own bits, with the values of the oracles of ``tests/conftest.py`` (constant tables,
as ``formal_props`` does):

* HiF4: ``4 a_i * 4 w_i * 2**shift`` (S1P2 values, the shift ``b_a + c_a + b_w + c_w`` of
  element ``i``'s micro-group from its L3 and L2 bits); with the 2:4 residual, kept element
  ``j`` times weight element ``4 (j // 2) + pos_j``, shifted by ``b_r + c_r + b_w + c_w``.
  The HiF4 unit's :class:`hwgen.hif4.MicroGroupDot` is proved to give the sum of the same
  products per micro-group (``MicroGroupDotProof`` of ``formal_props``), so the shared
  products add up to the HiF4 unit's micro-group sums.
* MXFP4 and NVFP4: ``2 a_i * 2 w_i`` (E2M1 values), the product
  :func:`hwgen.e2m1.e2m1_product_expr` of the MXFP4 and NVFP4 units is proved to give
  (``E2M1ProductProof``); with the MXFP4 2:4 residual, kept element ``j`` times weight
  element ``4 (j // 2) + pos_j`` of the MXFP4 step.

Each proof has a mutant (the reference reads element 16 at the bits of another format's
layout, the slip a shared mux invites), which the solver must reject. Combinational: BMC
depth 1 covers every input. The HiF4 proof (its 96 shifted products) takes about two
minutes on two shared cores and is marked ``slow``.
"""

import pytest
from amaranth.hdl import Array, Assert, Assume, Const, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from conftest import e2m1, s1p2
from hif4spec import FORMAT_FIELD, payload_fields, residual_layout, step_layout, unit_spec
from hwgen.multi import ElementProducts
from sim.formal import prove

#: 4 x S1P2 value and 2 x E2M1 value of every code, from the oracles.
S1P2_X4 = [int(4 * s1p2(c)) for c in range(16)]
E2M1_X2 = [int(2 * e2m1(c)) for c in range(16)]


def _table(values, shape):
    return Array([Const(v, shape) for v in values])

UNIT = "tc4_hif4_mxfp4_nvfp4"
RESIDUAL = "2:4"


class ElementProductsProof(wiring.Component):
    """:class:`hwgen.multi.ElementProducts` of ``unit`` with ``residual`` against format
    ``fmt``'s own product blocks (module docstring)."""

    def __init__(self, unit, residual, fmt, mutant=False):
        self._unit, self._residual, self._fmt, self._mutant = unit, residual, fmt, mutant
        self._widths = dict(payload_fields(unit, residual))
        members = {"a": In(self._widths["a"]), "w": In(self._widths["w"]),
                   "code": In(self._widths[FORMAT_FIELD])}
        if "r" in self._widths:
            members["r"] = In(self._widths["r"])
        super().__init__(members)

    def _elem(self, positions, i):
        """Bit of element ``i``; the mutant reads element 16 at another layout's bit."""
        if self._mutant and i == 16:
            others = [step_layout(f).positions("elem")[i] for f in unit_spec(self._unit).formats]
            return next(p for p in others if p != positions[i])
        return positions[i]

    def elaborate(self, platform):
        m = Module()
        formats = unit_spec(self._unit).formats
        m.submodules.dut = dut = ElementProducts(formats, self._residual, self._widths)
        m.d.comb += [dut.a.eq(self.a), dut.w.eq(self.w), dut.code.eq(self.code)]
        has_r = dut.has_residual
        if has_r:
            m.d.comb += dut.r.eq(self.r)
        m.d.comb += Assume(self.code == formats.index(self._fmt))
        lay = step_layout(self._fmt)
        elem = lay.positions("elem")

        def code_of(x, i):
            at = self._elem(elem, i)
            return x[at:at + 4]

        hif4 = self._fmt == "hif4"
        val = _table(S1P2_X4 if hif4 else E2M1_X2, signed(5))
        pow2 = _table([1, 2, 4, 8, 16, 16, 16, 16], 5)

        def check(name, got, x, w, shift):
            ref = Signal(signed(12), name=name)
            prod = val[x] * val[w]
            m.d.comb += [ref.eq(prod * pow2[shift] if hif4 else prod), Assert(got == ref)]

        def shift_of(x, l3, l2, g):
            return x[l3[g]] + x[l2[g // 2]] + self.w[wl3[g]] + self.w[wl2[g // 2]]

        if hif4:
            wl3, wl2 = lay.positions("l3"), lay.positions("l2")
        for i in range(64):
            shift = shift_of(self.a, wl3, wl2, i // 4) if hif4 else 0
            check(f"ref{i}", dut.p[i], code_of(self.a, i), code_of(self.w, i), shift)
        if has_r and self._residual in unit_spec(self._unit).residuals and \
                self._fmt in dut.residual_formats:
            rl = residual_layout(self._fmt, self._residual)
            kept, pos = rl.positions("elem"), rl.positions("pos")
            for j in range(32):
                g = j // 2
                wsel = Signal(4, name=f"refw{j}")
                with m.Switch(self.r[pos[j]:pos[j] + 2]):
                    for k in range(4):
                        with m.Case(k):
                            m.d.comb += wsel.eq(code_of(self.w, 4 * g + k))
                shift = (shift_of(self.r, rl.positions("l3"), rl.positions("l2"), g) if hif4
                         else 0)
                check(f"rref{j}", dut.q[j], self.r[kept[j]:kept[j] + 4], wsel, shift)
        return m


FORMATS = unit_spec(UNIT).formats


#: About two minutes on two shared cores (the others well under one): marked slow.
SLOW = ("hif4",)


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=[pytest.mark.slow] if f in SLOW else [])
                                 for f in FORMATS])
def test_shared_products_equal_each_formats_own(fmt, tmp_path):
    res = prove(ElementProductsProof(UNIT, RESIDUAL, fmt), f"multi_{fmt}", tmp_path,
                timeout=600)
    assert res.status == "PASS", res.log[-3000:]


@pytest.mark.parametrize("fmt", FORMATS)
def test_mutant_is_rejected(fmt, tmp_path):
    res = prove(ElementProductsProof(UNIT, RESIDUAL, fmt, mutant=True), f"multi_{fmt}_mut",
                tmp_path, timeout=600)
    assert res.status == "FAIL", res.log[-3000:]
