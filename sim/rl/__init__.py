"""RL numerics: PyTorch quantizers equal to the golden model, and the experiments using them.

Modules (all need the ``rl`` extra: torch, transformers):

- :mod:`sim.rl.torch_quant` -- fake quantization of torch tensors with torch operations on
  the tensor's device, bit-identical to :func:`sim.formats.fake_quantize` (and Rollout-ResQ
  to :mod:`sim.formats.resq`), with a straight-through gradient.
- :mod:`sim.rl.qlinear` -- :class:`~sim.rl.qlinear.QuantLinear` (quantized GEMM operands in
  training, forward and backward; FP4 rollouts with optional Rollout-ResQ) and
  :func:`~sim.rl.qlinear.convert_linears` for any torch model.
- :mod:`sim.rl.task`, :mod:`sim.rl.model`, :mod:`sim.rl.grpo` -- the GRPO precision-matrix
  experiment behind ``hif4 rl``.
- :mod:`sim.rl.minilm` -- W4A4 inference of the pretrained all-MiniLM-L6-v2 (``hif4 numerics``).
- :mod:`sim.rl.smollm2` -- FP4 inference and rollout-train mismatch of the pretrained causal LM
  SmolLM2-135M-Instruct (``hif4 numerics --model smollm2``).

Importing this package imports nothing heavy.
"""
