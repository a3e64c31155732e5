"""cocotb 2.x bench for the generated dot-product units (format-generic).

The bench reads only the generated Verilog and its JSON manifest (``hwgen.manifest``): the
payload fields (``a``, ``w``, ``r``, ``first``, ``last``) and their offsets come from the
manifest, the step fields are placed at the bit positions of their ``hif4spec`` step layouts
and the expected words come from the golden model ``sim.dot.run_steps`` (all in
:mod:`sim.stimulus`). So a new unit (MXFP4, NVFP4) needs no bench code, only a manifest.

Modules:

* :mod:`sim.bench.components` — ``StreamDriver``, ``StreamMonitor``, ``Scoreboard``.
* :mod:`sim.bench.tb` — the cocotb test module (run inside the simulator).
* :mod:`sim.bench.runner` — builds the Verilog once per configuration under
  ``build/<sim>/<module>/`` and runs a job: :func:`sim.bench.runner.verify`.
"""
