"""The stimulus library: step streams for the golden model's tests, the RTL benches and the
cycle-model checks, built on the step layouts and unit registry of ``hif4spec``.

- :mod:`sim.stimulus.streams`: the stream form (field arrays shaped by
  ``hif4spec.StepLayout.shape``), field builders, scale codes, K-loop ``first``/``last``
  flags, concatenation;
- :mod:`sim.stimulus.draw`: random step fields of any step layout and random streams;
- :mod:`sim.stimulus.checked`: hand-checked adversarial streams with expected words;
- :mod:`sim.stimulus.cases`: the named cases the benches run (the hand-checked streams and
  edge cases) and the exhaustive scale and element pair streams;
- :mod:`sim.stimulus.gemm`: quantized GEMM operands cut into steps and the K-loops of
  (row of A, row of W) pairs as one stream;
- :mod:`sim.stimulus.minilm`: the pretrained all-MiniLM-L6-v2 encoder, its sentences and
  the inputs and weights of its Linear layers (torch and transformers, imported when used);
- :mod:`sim.stimulus.encoder`: BF16 groups for the encoder units, their input beats, named
  and random group sets, and the golden outputs (quantized fields and residual);
- :mod:`sim.stimulus.payload`: unit payload words (manifest offsets, else
  ``hif4spec.payload_fields``) and the golden words a unit emits (``sim.dot.run_steps``);
- :mod:`sim.stimulus.accum`: random and adversarial steps of the exact accumulator back ends
  (an accumulator word and one to four exact terms) and their golden words.
"""

from .cases import edge_cases, element_pair_stream, named_cases, scale_pair_stream
from .checked import checked_cases, e6m2_code
from .draw import random_fields, random_stream, random_steps
from .payload import expected_words, manifest_accum, pack_payloads, payload_offsets
from .streams import (concat, fields, layouts, loop, loop_flags, scale_code, short_loops, single,
                      stream, take)

__all__ = ["layouts", "scale_code", "fields", "stream", "loop", "single", "loop_flags",
           "short_loops", "concat", "take", "random_fields", "random_steps", "random_stream",
           "checked_cases", "e6m2_code", "named_cases", "edge_cases", "scale_pair_stream",
           "element_pair_stream", "payload_offsets", "pack_payloads", "expected_words",
           "manifest_accum"]
