"""Cost estimation: Yosys synthesis (:mod:`sim.cost.synth`) and primitive modules for the
area model's calibration (:mod:`sim.cost.primitives`)."""
