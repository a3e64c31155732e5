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
- :mod:`sim.rl.trl_config`, :mod:`sim.rl.trl_tasks`, :mod:`sim.rl.trl_grpo` -- GRPO on
  SmolLM2-135M-Instruct with TRL's ``GRPOTrainer`` (needs ``trl``): FP4 rollouts and FP4
  training on shared weights, synthetic exact-match tasks, checkpoints
  (``hif4 rl --model smollm2``, ``hif4 sweep rl --model smollm2``).

Importing this package imports nothing heavy.
"""
