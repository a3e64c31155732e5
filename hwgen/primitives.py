"""Small Verilog primitives whose synthesized areas calibrate the analytic area model.

Each family is a deterministic Verilog generator with a few size parameters; the families
are the ones the generators' blocks report their contents in (:mod:`hwgen.parts`), and
:data:`FAMILIES` is their list. They are synthesized with exactly the flow of
:mod:`sim.cost.synth`, and ``benchmarks/fit_area_model.py`` fits one cost formula per
family name (:mod:`sim.area_model`). Inputs and outputs are module ports, so nothing is
optimized away; combinational families have no flip-flops.

Families (``name(params)``, what it is):

- ``mul(a, b)``: unsigned ``a`` x ``b``-bit multiplier, full product.
- ``smul(a, b)``: sign-magnitude multiplier: unsigned magnitudes plus the XOR of the signs
  and a conditional negation to two's complement (what a 4-bit element product does).
- ``smulx(a, b)``: two's-complement ``a``-bit operand times an unsigned ``b - 1``-bit operand
  (a signed ``b``-bit operand with a zero sign), product truncated to ``a + b - 1`` bits:
  what ``signed * unsigned`` becomes in the generated Verilog.
- ``add(w)``: two's-complement ``w``-bit adder with carry out.
- ``tree(n, w)``: sum of ``n`` signed ``w``-bit operands (an adder tree), full width.
- ``shl(w, r)``: ``w``-bit value shifted left by 0..``r``-1, full width output.
- ``shr(w, r)``: ``w``-bit value shifted right by 0..``r``-1 with a sticky bit of the
  shifted-out bits (an alignment shifter).
- ``mux(n, w)``: ``n``-input ``w``-bit multiplexer with a binary select.
- ``reg(w)``: ``w`` flip-flops with enable and synchronous reset (a pipeline register).
- ``regp(w)``: ``w`` plain flip-flops; ``rege(w)``: with enable, no reset.
- ``e2m1(n)``: ``n`` exact E2M1 x E2M1 products (signed 9 bits, units of 1/4).
- ``e2m1dot(n)``: ``n`` such products summed exactly by an adder tree (one MXFP4/NVFP4 block
  reduction; synthesized together, it costs about a fifth more than its parts apart).
- ``wshl(s, r, w)``: signed ``s``-bit value shifted left by 0..``r``-1 into a ``w``-bit
  window (sign-extended, truncated): the accumulator's alignment shifter.
- ``addn(n, w)``: sum of ``n`` ``w``-bit operands, truncated to ``w`` bits (window adder).
- ``neg(w)``: conditional two's-complement negation of ``w`` bits.
- ``norm(w)``: leading-zero count of ``w`` bits and the normalising left shift, keeping 25
  bits and a sticky bit (the rounding front of the accumulator).
- ``lzc(w)``: leading-zero count of ``w`` bits.
- ``cmp(w)``: ``w``-bit unsigned magnitude comparator (a < b).
- ``maxtree(n, w)``: the largest of ``n`` unsigned ``w``-bit values by a balanced tree of
  ``n - 1`` compare-and-selects (an encoder's block or group maximum).
- ``e2m1rnd(w)``: the E2M1 rounding of a ``w``-bit fixed-point magnitude against the
  seven constant bounds of :data:`E2M1_BOUNDS` (the count of bounds it exceeds, 3 bits):
  what an MXFP4 encoder does per element once the magnitude is aligned to its scale.
- ``hif4rnd(frac, g)``: step 7 of the HiF4 quantizer for ``g`` micro-groups of four
  elements of ``frac`` fraction bits sharing one E6M2 scale code: the REC exponent and the
  significand thresholds once, per micro-group its L2 + L3 shift, per element the compares
  of its significand with the thresholds and the selection of k
  (:func:`hwgen.quant_hif4.element_thresholds` and :func:`~hwgen.quant_hif4.element_code`,
  converted by Amaranth, so the primitive is the generator's own logic).
- ``nvscale(b)``: the NVFP4 encoder's scale stage for ``b`` blocks: the divisor ``3 Ts``
  once, per block the UE4M3 code of ``amax / 6 / T`` (``hwgen.quant_mxnv.nv_divisor`` and
  ``nv_scale_code``, the generator's own logic).
- ``nvbounds(b)``: the NVFP4 encoder's bounds stage for ``b`` blocks: per block ``T * s``,
  its normalization and the seven E2M1 bounds (``hwgen.quant_mxnv.nv_block_bounds``).
"""

__all__ = ["FAMILIES", "primitive_verilog", "primitive_name", "DEFAULT_GRID", "E2M1_BOUNDS"]

#: The E2M1 rounding bounds of ``e2m1rnd``: a magnitude ``F`` in units of 2**-9 of the
#: scale rounds to the code ``#{j : F > E2M1_BOUNDS[j]}`` (the midpoints 1/4, 3/4, 5/4,
#: 7/4, 5/2, 7/2, 5 times 2**9, less one where a tie rounds up to the even code; equal to
#: ``hwgen.quant_mxnv.MXFP4_BOUNDS``, which ``tests/sim/cost/test_area_model.py`` checks).
E2M1_BOUNDS = (128, 383, 640, 895, 1280, 1791, 2560)


def _clog2(n):
    return max(1, (n - 1).bit_length())


def _mul(a, b):
    return (f"module {{name}}(input [{a-1}:0] a, input [{b-1}:0] b, output [{a+b-1}:0] p);\n"
            f"  assign p = a * b;\nendmodule\n")


def _smul(a, b):
    w = a + b + 1
    return (f"module {{name}}(input sa, input sb, input [{a-1}:0] a, input [{b-1}:0] b,\n"
            f"    output [{w-1}:0] p);\n"
            f"  wire [{w-1}:0] m = a * b;\n"
            f"  assign p = (sa ^ sb) ? -m : m;\nendmodule\n")


def _smulx(a, b):
    w = a + b
    return (f"module {{name}}(input signed [{a-1}:0] a, input [{b-2}:0] b,\n"
            f"    output signed [{w-2}:0] p);\n"
            f"  wire signed [{b-1}:0] bs = {{1'b0, b}};\n"
            f"  assign p = a * bs;\nendmodule\n")


def _add(w):
    return (f"module {{name}}(input [{w-1}:0] a, input [{w-1}:0] b, output [{w}:0] s);\n"
            f"  assign s = a + b;\nendmodule\n")


def _tree(n, w):
    out = w + _clog2(n)
    terms = " + ".join(f"$signed(x[{i*w+w-1}:{i*w}])" for i in range(n))
    return (f"module {{name}}(input [{n*w-1}:0] x, output signed [{out-1}:0] s);\n"
            f"  assign s = {terms};\nendmodule\n")


def _shl(w, r):
    sb = _clog2(r)
    out = w + r - 1
    return (f"module {{name}}(input [{w-1}:0] a, input [{sb-1}:0] s, output [{out-1}:0] y);\n"
            f"  wire [{sb-1}:0] t = (s > {r-1}) ? {sb}'d{r-1} : s;\n"
            f"  assign y = {{{{{r-1}'d0, a}}}} << t;\nendmodule\n")


def _shr(w, r):
    sb = _clog2(r)
    return (f"module {{name}}(input [{w-1}:0] a, input [{sb-1}:0] s, output [{w-1}:0] y,\n"
            f"    output sticky);\n"
            f"  wire [{sb-1}:0] t = (s > {r-1}) ? {sb}'d{r-1} : s;\n"
            f"  wire [{2*w-1}:0] z = {{a, {w}'d0}} >> t;\n"
            f"  assign y = z[{2*w-1}:{w}];\n"
            f"  assign sticky = |z[{w-1}:0];\nendmodule\n")


def _mux(n, w):
    sb = _clog2(n)
    return (f"module {{name}}(input [{n*w-1}:0] x, input [{sb-1}:0] s, output [{w-1}:0] y);\n"
            f"  wire [{w-1}:0] arr [0:{n-1}];\n"
            f"  genvar i;\n"
            f"  generate for (i = 0; i < {n}; i = i + 1) begin : g\n"
            f"    assign arr[i] = x[i*{w} +: {w}];\n"
            f"  end endgenerate\n"
            f"  assign y = arr[s];\nendmodule\n")


def _reg(w):
    return (f"module {{name}}(input clk, input rst, input en, input [{w-1}:0] d,\n"
            f"    output reg [{w-1}:0] q);\n"
            f"  always @(posedge clk) if (rst) q <= 0; else if (en) q <= d;\nendmodule\n")


def _regp(w):
    return (f"module {{name}}(input clk, input [{w-1}:0] d, output reg [{w-1}:0] q);\n"
            f"  always @(posedge clk) q <= d;\nendmodule\n")


def _rege(w):
    return (f"module {{name}}(input clk, input en, input [{w-1}:0] d,\n"
            f"    output reg [{w-1}:0] q);\n"
            f"  always @(posedge clk) if (en) q <= d;\nendmodule\n")


def _wshl(s, r, w):
    sb = _clog2(r)
    return (f"module {{name}}(input signed [{s-1}:0] a, input [{sb-1}:0] e,\n"
            f"    output signed [{w-1}:0] y);\n"
            f"  wire [{sb-1}:0] t = (e > {r-1}) ? {sb}'d{r-1} : e;\n"
            f"  wire signed [{w-1}:0] x = a;\n"
            f"  assign y = x <<< t;\nendmodule\n")


def _addn(n, w):
    terms = " + ".join(f"x{i}" for i in range(n))
    ins = ", ".join(f"input [{w-1}:0] x{i}" for i in range(n))
    return (f"module {{name}}({ins}, output [{w-1}:0] s);\n"
            f"  assign s = {terms};\nendmodule\n")


def _neg(w):
    return (f"module {{name}}(input c, input [{w-1}:0] a, output [{w-1}:0] y);\n"
            f"  assign y = c ? -a : a;\nendmodule\n")


def _norm(w):
    sb = _clog2(w)
    lines = [f"module {{name}}(input [{w-1}:0] a, output [24:0] m, output sticky,",
             f"    output reg [{sb}:0] n);",
             "  integer i;",
             "  always @* begin",
             f"    n = {w};",
             f"    for (i = 0; i < {w}; i = i + 1) if (a[i]) n = {w - 1} - i;",
             "  end",
             f"  wire [{w-1}:0] z = a << n;",
             f"  assign m = z[{w-1}:{w-25}];",
             f"  assign sticky = |z[{w-26}:0];",
             "endmodule", ""]
    return "\n".join(lines)


def _e2m1_products(n):
    """Verilog lines: ``n`` exact E2M1 x E2M1 products of ``a`` and ``w`` into ``p`` (signed
    9-bit results; spec: |x|*2 = sig << sh)."""
    return ["  genvar i;",
            f"  generate for (i = 0; i < {n}; i = i + 1) begin : g",
            "    wire [3:0] x = a[4*i +: 4];",
            "    wire [3:0] y = w[4*i +: 4];",
            "    wire [1:0] sx = (x[2:1] != 0) ? {1'b1, x[0]} : {1'b0, x[0]};",
            "    wire [1:0] sy = (y[2:1] != 0) ? {1'b1, y[0]} : {1'b0, y[0]};",
            "    wire [1:0] hx = (x[2:1] != 0) ? x[2:1] - 2'd1 : 2'd0;",
            "    wire [1:0] hy = (y[2:1] != 0) ? y[2:1] - 2'd1 : 2'd0;",
            "    wire [7:0] mag = (sx * sy) << (hx + hy);",
            "    assign p[9*i +: 9] = (x[3] ^ y[3]) ? -{1'b0, mag} : {1'b0, mag};",
            "  end endgenerate"]


def _e2m1(n):
    # n independent E2M1 x E2M1 products
    lines = [f"module {{name}}(input [{4*n-1}:0] a, input [{4*n-1}:0] w,",
             f"    output [{9*n-1}:0] p);",
             *_e2m1_products(n), "endmodule", ""]
    return "\n".join(lines)


def _e2m1dot(n):
    # n exact E2M1 x E2M1 products summed by an adder tree: one MXFP4/NVFP4 block reduction
    out = (n * 144).bit_length() + 1
    lines = [f"module {{name}}(input [{4*n-1}:0] a, input [{4*n-1}:0] w,",
             f"    output signed [{out-1}:0] s);",
             f"  wire [{9*n-1}:0] p;",
             *_e2m1_products(n),
             "  assign s = " + " + ".join(f"$signed(p[{9*i+8}:{9*i}])" for i in range(n)) + ";",
             "endmodule", ""]
    return "\n".join(lines)


def _lzc(w):
    out = _clog2(w + 1)
    lines = [f"module {{name}}(input [{w-1}:0] a, output reg [{out-1}:0] n);",
             "  integer i;",
             "  always @* begin",
             f"    n = {w};",
             f"    for (i = 0; i < {w}; i = i + 1) if (a[i]) n = {w - 1} - i;",
             "  end", "endmodule", ""]
    return "\n".join(lines)


def _cmp(w):
    return (f"module {{name}}(input [{w-1}:0] a, input [{w-1}:0] b, output lt);\n"
            f"  assign lt = a < b;\nendmodule\n")


def _maxtree(n, w):
    lines = [f"module {{name}}(input [{n*w-1}:0] x, output [{w-1}:0] y);"]
    level, k = [f"x[{i*w+w-1}:{i*w}]" for i in range(n)], 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            lines.append(f"  wire [{w-1}:0] m{k} = ({level[i]} >= {level[i+1]}) ? "
                         f"{level[i]} : {level[i+1]};")
            nxt.append(f"m{k}")
            k += 1
        level = nxt + level[len(level) - len(level) % 2:]
    lines += [f"  assign y = {level[0]};", "endmodule", ""]
    return "\n".join(lines)


def _e2m1rnd(w):
    lines = [f"module {{name}}(input [{w-1}:0] f, output [2:0] c);"]
    lines += [f"  wire t{j} = f > {w}'d{h};" for j, h in enumerate(E2M1_BOUNDS)]
    lines += ["  assign c = " + " + ".join(f"t{j}" for j in range(len(E2M1_BOUNDS))) + ";",
              "endmodule", ""]
    return "\n".join(lines)


def _hif4rnd(frac, g):
    from amaranth.hdl import Cat, Const, Module, Signal

    from .quant_hif4 import REC_TABLE, element_code, element_thresholds

    m = Module()
    w, n = frac + 8, 4 * g                          # fraction bits and the 8-bit exponent
    code, mags = Signal(8, name="code"), Signal(n * w, name="mag")
    l2, l3, ks = Signal(g, name="l2"), Signal(g, name="l3"), Signal(3 * n, name="k")
    mant, ex = code[:2], code[2:]
    shw = max(sh for _, sh in REC_TABLE).bit_length()
    rexp = ex + Cat(*(Const(sh, shw) for _, sh in REC_TABLE)).word_select(mant, shw)
    thr = element_thresholds(m, mant, frac)
    for j in range(g):
        shift = Signal(2, name=f"shift{j}")
        m.d.comb += shift.eq(l2[j] + l3[j])
        for i in range(4 * j, 4 * j + 4):
            k = element_code(mags[w * i:w * i + w], thr, rexp, shift, frac)
            m.d.comb += ks[3 * i:3 * i + 3].eq(k)
    return _convert(m, [code, mags, l2, l3, ks])


def _convert(m, ports):
    from amaranth.back import verilog

    text = verilog.convert(m, name="PRIMITIVE", ports=ports, emit_src=False)
    return text.replace("PRIMITIVE", "{name}")


def _nvscale(b):
    from amaranth.hdl import Cat, Module, Signal

    from .quant_mxnv import MAG, nv_divisor, nv_scale_code, t_fields

    m = Module()
    t, amax = Signal(32, name="t"), Signal(b * MAG, name="amax")
    ft, ts = t_fields(t)
    div, dn = nv_divisor(m, ts)
    codes = [nv_scale_code(m, amax[MAG * k:MAG * (k + 1)], ft, div, dn, f"b{k}")
             for k in range(b)]
    out = Signal(sum(len(c) for c in codes), name="code")
    m.d.comb += out.eq(Cat(*codes))
    return _convert(m, [t, amax, out])


def _nvbounds(b):
    from amaranth.hdl import Module, Signal

    from .quant_mxnv import NVBounds, nv_block_bounds, t_fields

    m = Module()
    t, codes = Signal(32, name="t"), Signal(8 * b, name="code")
    ft, ts = t_fields(t)
    bounds = [Signal(NVBounds.BOUND, name=f"bound{k}") for k in range(b)]
    for k, bd in enumerate(bounds):
        nv_block_bounds(m, ft, ts, codes[8 * k:8 * (k + 1)], bd, f"b{k}")
    return _convert(m, [t, codes, *(bd.as_value() for bd in bounds)])


FAMILIES = {
    "mul": _mul, "smul": _smul, "smulx": _smulx, "add": _add, "tree": _tree, "shl": _shl,
    "shr": _shr, "e2m1": _e2m1, "e2m1dot": _e2m1dot, "wshl": _wshl, "addn": _addn,
    "neg": _neg, "norm": _norm,
    "mux": _mux, "reg": _reg, "regp": _regp, "rege": _rege, "lzc": _lzc, "cmp": _cmp,
    "maxtree": _maxtree, "e2m1rnd": _e2m1rnd, "hif4rnd": _hif4rnd,
    "nvscale": _nvscale, "nvbounds": _nvbounds,
}

#: The calibration grid used by ``benchmarks/fit_area_model.py``.
DEFAULT_GRID = {
    "mul": [(2, 2), (3, 3), (4, 4), (3, 6), (4, 8), (6, 6), (8, 8), (12, 8), (16, 6)],
    "smul": [(2, 2), (3, 3), (4, 4), (6, 6)],
    "smulx": [(8, 5), (13, 9), (17, 7), (18, 7), (12, 12)],
    "add": [(4,), (8,), (16,), (24,), (32,), (48,), (64,)],
    "tree": [(4, 6), (4, 8), (8, 8), (8, 10), (16, 6), (16, 8), (32, 6), (64, 6), (2, 16),
             (4, 16), (8, 14)],
    "shl": [(8, 3), (8, 5), (16, 4), (16, 8), (16, 16), (24, 32), (32, 16)],
    "shr": [(16, 8), (24, 16), (32, 32), (48, 64), (64, 64), (80, 128)],
    "e2m1": [(1,), (4,), (16,)],
    "e2m1dot": [(8,), (16,), (32,)],
    "wshl": [(24, 256, 160), (24, 256, 320), (14, 512, 540), (20, 64, 180), (17, 64, 200),
             (12, 16, 64), (8, 4, 16)],
    "addn": [(2, 64), (3, 160), (2, 320), (3, 320), (5, 180), (3, 540), (5, 540)],
    "neg": [(32,), (160,), (320,), (540,)],
    "norm": [(28,), (40,), (56,), (64,), (89,), (128,), (192,), (320,), (540,)],
    "mux": [(2, 8), (2, 32), (4, 8), (4, 16), (8, 8), (16, 4)],
    "reg": [(1,), (8,), (32,), (100,), (300,)],
    "regp": [(8,), (100,)],
    "rege": [(8,), (100,)],
    "lzc": [(8,), (16,), (24,), (32,), (48,), (64,)],
    "cmp": [(8,), (16,), (32,)],
    "maxtree": [(2, 8), (4, 8), (8, 8), (16, 8), (32, 8), (4, 15), (16, 15), (8, 16),
                (16, 16), (2, 15)],
    "e2m1rnd": [(12,), (13,), (14,), (16,)],
    "hif4rnd": [(7, 1), (7, 2), (7, 4), (8, 1), (8, 4)],
    "nvscale": [(1,), (2,), (3,), (4,)],
    "nvbounds": [(1,), (2,), (3,), (4,)],
}


def primitive_name(family, params):
    """Module name of one primitive, e.g. ``prim_mul_4_4``."""
    return "prim_" + "_".join([family, *map(str, params)])


def primitive_verilog(family, params):
    """Verilog text of one primitive; returns ``(top, text)``."""
    if family not in FAMILIES:
        raise ValueError(f"Primitive family must be one of {', '.join(FAMILIES)}, "
                         f"not {family!r}")
    name = primitive_name(family, params)
    return name, FAMILIES[family](*params).replace("{name}", name)
