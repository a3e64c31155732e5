"""Simulation side of the toolkit: golden model, bit-true GEMM, benches, estimators."""
