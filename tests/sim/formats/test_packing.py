"""The one packer (sim.formats.packing) against a bit-by-bit transcription of the layouts.

The oracle places every item at ``block * block_bits + offset + index * width`` straight
from the FieldLayouts of ``hif4spec``, without ``StepLayout.positions``.
"""

import numpy as np
import pytest

from hif4spec import FORMATS, RESIDUAL24, RESIDUAL24_MXFP4, STEP_LAYOUTS
from hif4spec.formats import FieldLayout, ResidualBlockSpec
from sim.formats import packing

#: A layout with items straddling bytes and a field wider than a byte.
ODD = ResidualBlockSpec("odd", "hif4", 0, 0, 61, (
    FieldLayout("a", 0, 3, 5), FieldLayout("b", 15, 13, 2), FieldLayout("c", 41, 20, 1)))

LAYOUTS = ([*STEP_LAYOUTS.values()] + [FORMATS[f] for f in FORMATS]
           + [RESIDUAL24, RESIDUAL24_MXFP4, ODD])


def _blocks_of(layout):
    return (layout.spec, layout.blocks) if hasattr(layout, "blocks") else (layout, 1)


def _oracle(layout, fields, row):
    spec, blocks = _blocks_of(layout)
    word = 0
    for f in spec.layout:
        items = np.asarray(fields[f.name][row]).reshape(blocks, f.count)
        for b in range(blocks):
            for i in range(f.count):
                word |= int(items[b, i]) << (b * spec.block_bits + f.offset + i * f.width)
    return word


def _shape(layout, f):
    spec, blocks = _blocks_of(layout)
    return tuple(n for n in (blocks, f.count) if n > 1)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: lay.name)
def test_pack_matches_bit_by_bit_layout(layout):
    rng = np.random.default_rng(5)
    spec, blocks = _blocks_of(layout)
    g = 9
    fields = {f.name: rng.integers(0, 1 << f.width, (g,) + _shape(layout, f))
              for f in spec.layout}
    fields[spec.layout[0].name][0] = (1 << spec.layout[0].width) - 1      # all ones
    words = packing.pack_ints(layout, fields)
    assert words == [_oracle(layout, fields, i) for i in range(g)]
    assert all(w < 1 << (blocks * spec.block_bits) for w in words)
    data = packing.pack(layout, fields)
    assert data.shape == (g, -(-blocks * spec.block_bits // 8))
    assert [int.from_bytes(row.tobytes(), "little") for row in data] == words
    for back in (packing.unpack(layout, data), packing.unpack_ints(layout, words)):
        assert back.keys() == fields.keys()
        for k in fields:
            assert back[k].shape == fields[k].shape
            assert np.array_equal(back[k], fields[k])


def test_no_rows():
    lay = STEP_LAYOUTS["hif4"]
    empty = {k: np.zeros((0,) + lay.shape(k), np.uint8) for k in lay.fields}
    assert packing.pack(lay, empty).shape == (0, lay.bytes)
    assert packing.pack_ints(lay, empty) == []
    assert all(v.shape == (0,) + lay.shape(k) for k, v in packing.unpack_ints(lay, []).items())
