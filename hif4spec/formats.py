"""Format constants and packed block layouts (``docs/formats.md``, ``docs/mxfp4_residual.md``).

Bit offsets count from bit 0 = least significant bit of a packed block, and a block is
serialized little-endian (byte 0 holds bits 0..7).
"""

from dataclasses import dataclass, field
from math import ceil

__all__ = [
    "STEP_ELEMS",
    "FieldLayout",
    "FormatSpec",
    "ElementType",
    "FORMATS",
    "ELEMENT_TYPES",
    "HIF4_GROUP",
    "HIF4_SUBGROUPS",
    "HIF4_SUBGROUP_ELEMS",
    "HIF4_MICROGROUPS",
    "HIF4_MICROGROUP_ELEMS",
    "HIF4_BF16_ONE_SEVENTH",
    "HIF4_REC_SIGNIFICANDS",
    "RESIDUAL24",
    "RESQ_MODES",
    "RESIDUAL24_MXFP4",
    "ResidualBlockSpec",
    "NVFP4_TENSOR_SCALE_DIVISOR",
    "HIF8_OVERFLOW",
]

#: Elements of each operand that a dot-product unit consumes per step (spec section 7).
STEP_ELEMS = 64


@dataclass(frozen=True)
class FieldLayout:
    """One packed field: ``count`` items of ``width`` bits, item i at ``offset + i * width``."""

    name: str
    offset: int
    width: int
    count: int = 1

    @property
    def bits(self):
        return self.width * self.count

    @property
    def end(self):
        return self.offset + self.bits


@dataclass(frozen=True)
class ElementType:
    """A small float type as the spec's building-block table defines it.

    ``exp_bits``/``man_bits``/``bias`` describe the IEEE-like part; ``signed`` says whether
    bit ``exp_bits + man_bits`` is a sign bit. ``nan_codes`` lists the NaN encodings (unsigned
    part), ``max_finite`` the largest finite magnitude, ``subnormals`` whether exponent field
    0 is a subnormal binade (else it is a normal binade, as in E6M2 and E8M0).
    """

    name: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    subnormals: bool
    max_finite: float
    nan_codes: tuple = ()
    inf_codes: tuple = ()


ELEMENT_TYPES = {
    "E2M1": ElementType("E2M1", 4, 2, 1, 1, True, True, 6.0),
    "S1P2": ElementType("S1P2", 4, 0, 3, 0, True, False, 1.75),   # k/4, k in 0..7
    "E4M3": ElementType("E4M3", 8, 4, 3, 7, True, True, 448.0, nan_codes=(0x7F,)),
    "UE4M3": ElementType("UE4M3", 8, 4, 3, 7, False, True, 448.0, nan_codes=(0x7F,)),
    "E8M0": ElementType("E8M0", 8, 8, 0, 127, False, False, 2.0 ** 127, nan_codes=(0xFF,)),
    "E6M2": ElementType("E6M2", 8, 6, 2, 48, False, False, 49152.0, nan_codes=(0xFF,)),
    "HIF8": ElementType("HIF8", 8, 0, 0, 0, True, True, 32768.0, nan_codes=(0x80,),
                        inf_codes=(0x6F, 0xEF)),
    "BF16": ElementType("BF16", 16, 8, 7, 127, True, True, 3.3895313892515355e38,
                        nan_codes=(0x7FC0,), inf_codes=(0x7F80, 0xFF80)),
}


@dataclass(frozen=True)
class FormatSpec:
    """One quantization format.

    ``block`` elements share the scale(s); ``block_bits`` is the packed block (288/136/72 for
    the block formats, the element width for the element-wise ones) and ``block_bytes`` its
    serialized size. ``layout`` lists the packed fields of one block (low bits first).
    ``nan_scale_code`` is the scale code of a NaN block. ``blocks_per_step`` is how many
    blocks one 64-element dot-product step holds (0 for element-wise formats). ``options``
    names the quantization options the format takes (``"tensor_scale"``: one FP32 scale T
    per tensor beside the block scales); ``title`` is the name tables, plots and messages
    show.
    """

    name: str
    block: int
    elem_bits: int
    elem_type: str
    scale_type: str | None
    scale_bits: int
    block_bits: int
    layout: tuple = field(default=())
    nan_scale_code: int | None = None
    blocks_per_step: int = 0
    options: tuple = ()
    title: str = ""

    @property
    def block_bytes(self):
        return ceil(self.block_bits / 8)

    @property
    def bits_per_value(self):
        return self.block_bits / self.block

    @property
    def fields(self):
        return {f.name: f for f in self.layout}


# HiF4 structure (spec section 2): 64 = 8 sub-groups x 2 micro-groups x 4 elements.
HIF4_GROUP = 64
HIF4_SUBGROUPS = 8
HIF4_SUBGROUP_ELEMS = 8
HIF4_MICROGROUPS = 16
HIF4_MICROGROUP_ELEMS = 4
#: BF16(1/7), the constant of HiF4 quantization step 2.
HIF4_BF16_ONE_SEVENTH = 0.142578125
#: BF16(1/S) for E6M2 significands 1.0, 1.25, 1.5, 1.75 (spec step 4), before the power of two.
HIF4_REC_SIGNIFICANDS = (1.0, 0.80078125, 0.66796875, 0.5703125)

#: Rollout-ResQ sparsifiers S of spec section 6 (which half of the quantized residual is kept).
RESQ_MODES = ("2:4", "dense", "channel50", "block32x64")

#: NVFP4 per-tensor scale: T = float32(amax / 2688) (6 * 448).
NVFP4_TENSOR_SCALE_DIVISOR = 2688.0
#: HiF8 magnitudes at or above this encode to +-Inf.
HIF8_OVERFLOW = 40960.0

_HIF4_LAYOUT = (
    FieldLayout("elem", 0, 4, 64),      # bits 4i..4i+2 = k, bit 4i+3 = sign
    FieldLayout("l3", 256, 1, 16),
    FieldLayout("l2", 272, 1, 8),
    FieldLayout("scale", 280, 8, 1),    # E6M2
)
_MXFP4_LAYOUT = (
    FieldLayout("elem", 0, 4, 32),      # E2M1
    FieldLayout("scale", 128, 8, 1),    # E8M0
)
_NVFP4_LAYOUT = (
    FieldLayout("elem", 0, 4, 16),      # E2M1
    FieldLayout("scale", 64, 8, 1),     # UE4M3 (bit 7 written 0)
)

FORMATS = {
    "hif4": FormatSpec("hif4", 64, 4, "S1P2", "E6M2", 8, 288, _HIF4_LAYOUT, 0xFF, 1,
                       title="HiF4"),
    "mxfp4": FormatSpec("mxfp4", 32, 4, "E2M1", "E8M0", 8, 136, _MXFP4_LAYOUT, 0xFF, 2,
                        title="MXFP4"),
    "nvfp4": FormatSpec("nvfp4", 16, 4, "E2M1", "UE4M3", 8, 72, _NVFP4_LAYOUT, 0x7F, 4,
                        options=("tensor_scale",), title="NVFP4"),
    "hif8": FormatSpec("hif8", 1, 8, "HIF8", None, 0, 8, (FieldLayout("code", 0, 8, 1),),
                       title="HiF8"),
    "bf16": FormatSpec("bf16", 1, 16, "BF16", None, 0, 16, (FieldLayout("code", 0, 16, 1),),
                       title="BF16"),
}


@dataclass(frozen=True)
class ResidualBlockSpec:
    """A packed 2:4 residual block: the kept elements, their 2-bit positions and the scales.

    ``positions`` block positions are covered by ``kept`` kept elements (two per micro-group
    of four); ``layout`` lists the packed fields, low bits first.
    """

    name: str
    fmt: str
    positions: int
    kept: int
    block_bits: int
    layout: tuple

    @property
    def block_bytes(self):
        return ceil(self.block_bits / 8)

    @property
    def fields(self):
        return {f.name: f for f in self.layout}


#: Packed 2:4 HiF4 residual block (spec section 6): 224 bits for 64 positions.
RESIDUAL24 = ResidualBlockSpec("hif4-2:4", "hif4", 64, 32, 224, (
    FieldLayout("elem", 0, 4, 32),      # kept element j (S1P2), micro-group j // 2
    FieldLayout("pos", 128, 2, 32),     # position of kept element j in its micro-group
    FieldLayout("l3", 192, 1, 16),
    FieldLayout("l2", 208, 1, 8),
    FieldLayout("scale", 216, 8, 1),    # E6M2
))
#: Packed 2:4 MXFP4 residual block (``docs/mxfp4_residual.md``): 104 bits for 32 positions.
RESIDUAL24_MXFP4 = ResidualBlockSpec("mxfp4-2:4", "mxfp4", 32, 16, 104, (
    FieldLayout("elem", 0, 4, 16),      # kept element j (E2M1), micro-group j // 2
    FieldLayout("pos", 64, 2, 16),      # position of kept element j in its micro-group
    FieldLayout("scale", 96, 8, 1),     # E8M0
))


def _check():
    for spec in FORMATS.values():
        if spec.layout and spec.scale_type:
            assert max(f.end for f in spec.layout) == spec.block_bits, spec.name
    for res in (RESIDUAL24, RESIDUAL24_MXFP4):
        assert max(f.end for f in res.layout) == res.block_bits, res.name
        assert 2 * res.kept == res.positions == FORMATS[res.fmt].block, res.name
    for spec in FORMATS.values():
        if spec.blocks_per_step:
            assert spec.blocks_per_step * spec.block == STEP_ELEMS


_check()
