"""``hwgen.layouts``: every block and step layout comes from the ``hif4spec`` tables, and a
step layout registered there needs no entry in hwgen (it is built when first used)."""

import subprocess
import sys
import textwrap

import pytest
from amaranth.hdl import Shape

from hif4spec import FORMATS, RESIDUAL24, STEP_LAYOUTS
from hwgen import layouts


@pytest.mark.parametrize("name", list(STEP_LAYOUTS))
def test_every_step_layout_from_its_table(name):
    lay = STEP_LAYOUTS[name]
    block = layouts.block_of(name)
    assert Shape.cast(block).width == lay.block_bits
    assert Shape.cast(layouts.step_layout(name)).width == lay.bits
    assert layouts.step_layout(name) is layouts.step_layout(name)          # built once


def test_hif4_blocks():
    assert layouts.HIF4_BLOCK == layouts.block_layout(FORMATS["hif4"].layout,
                                                      items={"elem": layouts.S1P2})
    assert layouts.RES24_BLOCK == layouts.block_layout(
        RESIDUAL24.layout, items={"elem": layouts.S1P2}, names={"elem": "kept"})


def test_unknown_step_layout():
    with pytest.raises(ValueError, match="^Step layout must be one of hif4, .*, not 'toy'$"):
        layouts.step_layout("toy")


def test_a_registered_layout_needs_no_hwgen_entry():
    """A format and step layout added to the hif4spec tables before hwgen is imported: the
    generators import, and the new layout is built from its table."""
    code = textwrap.dedent("""
        import hif4spec
        from hif4spec import FORMATS, FieldLayout, FormatSpec, STEP_LAYOUTS, StepLayout
        toy = FormatSpec("toy", 32, 4, "E2M1", "E8M0", 8, 136,
                         (FieldLayout("elem", 0, 4, 32), FieldLayout("scale", 128, 8, 1)),
                         0xFF, 2)
        FORMATS["toy"] = toy
        STEP_LAYOUTS["toy"] = StepLayout("toy", toy, 2)
        import hwgen.encoder, hwgen.hif4, hwgen.mxfp4, hwgen.nvfp4, hwgen.units
        from hwgen.layouts import step_layout
        from amaranth.hdl import Shape
        print(Shape.cast(step_layout("toy")).width)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["272"]
