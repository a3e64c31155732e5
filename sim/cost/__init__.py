"""Cost estimation: Yosys synthesis (:mod:`sim.cost.synth`), the synthesis table
(:mod:`sim.cost.table`), area and energy figures, read from manifests and netlists only."""
