#!/usr/bin/env python3
"""Quantizer throughput on one core (16M float32 values by default) beside numpy.copy and
ml_dtypes' float4_e2m1fn cast, and the Gaussian MSE ratios NVFP4/HiF4 and MXFP4/HiF4.

Same as ``hif4 bench quantize``; run ``python benchmarks/bench_quantize.py --help``.
"""

import sys

from sim.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "quantize", *sys.argv[1:]]))
