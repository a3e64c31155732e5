"""Packed step layouts: what one 64-element dot-product step of each operand holds.

A step is ``STEP_ELEMS`` elements of one operand: one HiF4 block, two MXFP4 blocks or four
NVFP4 blocks, block 0 in the low bits; a 2:4 residual step is one packed HiF4 2:4 residual
block or two packed MXFP4 2:4 residual blocks. Layout names are the format names and
``"hif4-2:4"``, ``"mxfp4-2:4"``.
"""

from dataclasses import dataclass

from .formats import FORMATS, RESIDUAL24, RESIDUAL24_MXFP4, STEP_ELEMS

__all__ = ["StepLayout", "STEP_LAYOUTS", "step_layout", "operand_layout", "residual_layout"]


@dataclass(frozen=True)
class StepLayout:
    """``blocks`` packed blocks of ``spec`` (a FormatSpec or ResidualBlockSpec) per step."""

    name: str
    spec: object
    blocks: int

    @property
    def block_bits(self):
        return self.spec.block_bits

    @property
    def bits(self):
        return self.blocks * self.spec.block_bits

    @property
    def bytes(self):
        return self.bits // 8

    @property
    def fields(self):
        """Field names, in packed order."""
        return tuple(f.name for f in self.spec.layout)

    def shape(self, name):
        """Array shape of field ``name`` in one step: ``(blocks, count)`` without 1s."""
        f = self.spec.fields[name]
        return tuple(n for n in (self.blocks, f.count) if n > 1) if self.blocks > 1 else \
            ((f.count,) if f.count > 1 else ())

    def width(self, name):
        """Bits of one item of field ``name``."""
        return self.spec.fields[name].width

    def positions(self, name):
        """Bit position of every item of field ``name`` in the step, in C order of ``shape``."""
        f = self.spec.fields[name]
        return [b * self.spec.block_bits + f.offset + i * f.width
                for b in range(self.blocks) for i in range(f.count)]


STEP_LAYOUTS = {
    lay.name: lay for lay in (
        StepLayout("hif4", FORMATS["hif4"], FORMATS["hif4"].blocks_per_step),
        StepLayout("mxfp4", FORMATS["mxfp4"], FORMATS["mxfp4"].blocks_per_step),
        StepLayout("nvfp4", FORMATS["nvfp4"], FORMATS["nvfp4"].blocks_per_step),
        StepLayout("hif4-2:4", RESIDUAL24, STEP_ELEMS // RESIDUAL24.positions),
        StepLayout("mxfp4-2:4", RESIDUAL24_MXFP4, STEP_ELEMS // RESIDUAL24_MXFP4.positions),
    )
}


def step_layout(name):
    """The :class:`StepLayout` called ``name``: one of :data:`STEP_LAYOUTS`, or the operand
    step of a block format registered in ``FORMATS`` since (``blocks_per_step`` blocks);
    ``ValueError`` naming the known ones."""
    lay = STEP_LAYOUTS.get(name)
    if lay is None and name in FORMATS and FORMATS[name].blocks_per_step:
        lay = StepLayout(name, FORMATS[name], FORMATS[name].blocks_per_step)
    if lay is None:
        raise ValueError(f"Step layout must be one of {', '.join(STEP_LAYOUTS)}, "
                         f"not {name!r}")
    return lay


def operand_layout(fmt):
    """The step layout of an activation or weight operand of format ``fmt``."""
    return step_layout(fmt)


def residual_layout(fmt, residual):
    """The step layout of the residual operand (None for ``"none"``)."""
    if residual == "none":
        return None
    if residual == "dense":
        return step_layout(fmt)
    return step_layout(f"{fmt}-{residual}")


def _check():
    for lay in STEP_LAYOUTS.values():
        assert lay.bits % 8 == 0, lay.name


_check()
