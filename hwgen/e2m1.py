"""E2M1 element datapath shared by the MXFP4 and NVFP4 units.

Both formats carry E2M1 elements (``docs/formats.md`` section 1): bit 3 sign, bits 2..1
exponent ``e`` (bias 1), bit 0 mantissa ``m``. In units of one half every magnitude is an
integer, ``|x| * 2 = sig << sh`` with a 2-bit significand ``sig = {e != 0, m}`` (0..3) and a
shift ``sh = max(e - 1, 0)`` (0..2)::

    code  0 1 2 3 4 5 6  7        (low three bits)
    |x|   0 .5 1 1.5 2 3 4 6
    sig   0 1 2 3 2 3 2  3
    sh    0 0 0 0 1 1 2  2

so a product of two elements is ``(sig_a * sig_w) << (sh_a + sh_w)`` in units of 1/4: a 2x2-bit
multiplier (0..9) and a 0..4 left shift, at most 144, i.e. a signed 9-bit fixed-point number
that is always exact. Products of one block share the block's scales, so a block sum is an
exact integer too: 32 products fit 14 signed bits (MXFP4), 16 products 13 bits (NVFP4).
"""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .unit import DotUnit, check_stages_lanes

__all__ = ["E2M1Product", "E2M1DotSlice", "E2M1DotUnitBase", "PRODUCT_BITS", "dot_sum_bits",
           "e2m1_product_expr", "adder_tree"]

#: Width of one signed E2M1 x E2M1 product in units of 1/4 (|p| <= 144).
PRODUCT_BITS = 9


def dot_sum_bits(count):
    """Signed width that holds any sum of ``count`` E2M1 products exactly.

    ``count * 144`` must fit the magnitude: 32 products need 14 bits, 16 need 13, 8 need 12.
    """
    if count < 1:
        raise ValueError(f"Product count must be at least 1, not {count!r}")
    return (count * 144).bit_length() + 1


def e2m1_product_expr(m, a, w, name="p"):
    """Add the logic of one signed E2M1 x E2M1 product to ``m`` and return its signal.

    Parameters
    ----------
    m : Module
        Module the combinational logic is added to.
    a, w : Value
        4-bit E2M1 codes.
    name : str
        Prefix for the internal signal names.

    Returns
    -------
    Signal(signed(9))
        ``a * w`` in units of 1/4, exact.
    """
    ea, ma, sa = a[1:3], a[0], a[3]
    ew, mw, sw = w[1:3], w[0], w[3]
    sig_a = Signal(2, name=f"{name}_sig_a")
    sig_w = Signal(2, name=f"{name}_sig_w")
    sh_a = Signal(2, name=f"{name}_sh_a")
    sh_w = Signal(2, name=f"{name}_sh_w")
    mag = Signal(8, name=f"{name}_mag")
    out = Signal(signed(PRODUCT_BITS), name=name)
    m.d.comb += [
        sig_a.eq(Mux(ea.any(), ma | 0b10, ma)),
        sig_w.eq(Mux(ew.any(), mw | 0b10, mw)),
        sh_a.eq(Mux(ea.any(), ea - 1, 0)),
        sh_w.eq(Mux(ew.any(), ew - 1, 0)),
        mag.eq((sig_a * sig_w) << (sh_a + sh_w)),
        out.eq(Mux(sa ^ sw, -mag, mag)),
    ]
    return out


def adder_tree(m, terms, name="sum"):
    """Sum ``terms`` (signed values) with a balanced tree of two-input adders.

    Each level widens by one bit, so the result is exact; the final signal has the width of
    the root. Returns the root signal.
    """
    level = list(terms)
    depth = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            width = max(len(level[i]), len(level[i + 1])) + 1
            s = Signal(signed(width), name=f"{name}_l{depth}_{i // 2}")
            m.d.comb += s.eq(level[i] + level[i + 1])
            nxt.append(s)
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    root = Signal(signed(len(level[0])), name=name)
    m.d.comb += root.eq(level[0])
    return root


class E2M1Product(wiring.Component):
    """One E2M1 x E2M1 product, exact, in units of 1/4.

    Combinational: ``p = a * w * 4`` as a signed 9-bit integer (|p| <= 144). A zero with the
    sign bit set is +0 here (an integer has no signed zero).

    Members
    -------
    a : In(4)
        E2M1 code of the activation element.
    w : In(4)
        E2M1 code of the weight element.
    p : Out(signed(9))
        The exact product in units of 1/4.
    """

    a: In(4)
    w: In(4)
    p: Out(signed(PRODUCT_BITS))

    def elaborate(self, platform):
        m = Module()
        p = e2m1_product_expr(m, self.a, self.w)
        m.d.comb += self.p.eq(p)
        return m


class E2M1DotSlice(wiring.Component):
    """Exact sum of ``count`` E2M1 x E2M1 products: the block reduction of MXFP4 and NVFP4.

    Combinational. All products of one block share the block's two scales, so they are
    integers on one grid (units of 1/4) and add exactly without alignment; the sum needs
    :func:`dot_sum_bits` ``(count)`` signed bits (14 for 32 products, 13 for 16).

    Parameters
    ----------
    count : int
        Number of element pairs, a power of two from 1 to 64.

    Members
    -------
    a : In(ArrayLayout(4, count))
        E2M1 codes of the activation elements, element 0 in the low bits.
    w : In(ArrayLayout(4, count))
        E2M1 codes of the weight elements.
    sum : Out(signed(dot_sum_bits(count)))
        ``sum_i a_i * w_i * 4``, exact.
    """

    def __init__(self, *, count):
        if count not in (1, 2, 4, 8, 16, 32, 64):
            raise ValueError(f"Product count must be a power of two from 1 to 64, not {count!r}")
        self._count = count
        super().__init__({
            "a": In(unsigned(4 * count)),
            "w": In(unsigned(4 * count)),
            "sum": Out(signed(dot_sum_bits(count))),
        })

    @property
    def count(self):
        return self._count

    def elaborate(self, platform):
        m = Module()
        prods = [e2m1_product_expr(m, self.a[4 * i:4 * i + 4], self.w[4 * i:4 * i + 4],
                                   name=f"p{i}") for i in range(self._count)]
        root = adder_tree(m, prods, name="tree")
        m.d.comb += self.sum.eq(root)
        return m


# ---------------------------------------------------------------------------------------
# The unit shell shared by the MXFP4 and NVFP4 units (same pipeline plan as the HiF4 unit)


class E2M1DotUnitBase(DotUnit):
    """Common shell of the MXFP4 and NVFP4 dot-product units.

    A subclass sets ``unit``, ``RESIDUALS``, and implements ``_payload_fields()`` (the
    ``a``/``w``/``r`` layouts), ``_terms()`` (the :class:`hwgen.accum.TermSpec` list) and
    ``_front(m, payload, index, out)`` (one slice of the front end, a
    :class:`hwgen.stream.Sequencer` build function) with ``_sum_fields()``.

    Pipeline (the same plan and timing as :class:`hwgen.hif4.HiF4DotUnit`): with
    ``n = 64 // lanes``, ``[input_reg if stages == 4]``, ``front`` (sequencer, n slices: the
    format's products, block sums and scale path, giving the exact terms), ``[front_reg if
    stages >= 3]``, ``[terms_reg if stages >= 2]``, ``acc`` (the shared accumulator
    register). ``latency = stages`` for ``stages <= 3`` and ``stages - 1 + n``
    for ``stages == 4``; ``ii = n``.
    """

    unit = None
    RESIDUALS = ("none",)

    def __init__(self, *, residual="none", stages=3, lanes=64):
        if residual not in self.RESIDUALS:
            raise ValueError(self._residual_message(residual))
        check_stages_lanes(stages, lanes)
        self._residual, self._stages, self._lanes = residual, stages, lanes
        fields = dict(self._payload_fields())
        fields.update(first=1, last=1)
        self._payload = data.StructLayout(fields)
        self._term_specs = tuple(self._terms())
        super().__init__({"i": In(stream.Signature(self._payload)),
                          "o": Out(stream.Signature(32))})

    def _residual_message(self, residual):
        allowed = ", ".join(repr(r) for r in self.RESIDUALS)
        return f"Residual must be one of {allowed}, not {residual!r}"

    def _plan(self):
        """``[(name, description, factory)]`` of the stream stages, input to output."""
        from .accum import AccumSpec, Accumulator, accum_layout
        from .stream import Register, Sequencer

        terms = accum_layout(self._term_specs)
        n = self.ii
        plan = []
        if self._stages >= 4:
            plan.append(("input_reg", {"kind": "register"}, lambda: Register(self._payload)))
        plan.append(("front", {"kind": "sequencer", "slices": n},
                     lambda: Sequencer(self._payload, terms, slices=n,
                                       sum_fields=self._sum_fields(), build=self._front,
                                       name="front")))
        if self._stages >= 3:
            plan.append(("front_reg", {"kind": "register"}, lambda: Register(terms)))
        if self._stages >= 2:
            plan.append(("terms_reg", {"kind": "register"}, lambda: Register(terms)))
        plan.append(("acc", {"kind": "accumulator", **AccumSpec(self._term_specs).describe()},
                     lambda: Accumulator(self._term_specs)))
        return plan

    def elaborate(self, platform):
        from .stream import chain

        m = Module()
        first, last = chain(m, [(name, make()) for name, _, make in self._plan()])
        wiring.connect(m, wiring.flipped(self.i), first.i)
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m
