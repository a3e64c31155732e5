"""Amaranth generators of the units in the :mod:`hif4spec` registry: the dot-product units
(:mod:`hwgen.hif4`, :mod:`hwgen.mxfp4`, :mod:`hwgen.nvfp4` on :class:`hwgen.unit.DotUnit`,
with the accumulator back ends of :mod:`hwgen.backend`) and the encoders
(:mod:`hwgen.encoder` around the quantizer cores of :mod:`hwgen.quant_hif4` and
:mod:`hwgen.quant_mxnv`). :mod:`hwgen.units` builds a unit by name, :mod:`hwgen.emit`
writes its Verilog and :mod:`hwgen.manifest` its manifest."""
