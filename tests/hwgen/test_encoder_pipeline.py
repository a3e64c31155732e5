"""The rollout path end to end in RTL: BF16 tensors -> encoder -> dot unit -> FP32 words.

An 8 x 256 BF16 activation tensor goes through the Verilated HiF4 encoder with the 2:4
residual (``hif4_quant``, 16 lanes); its output words, unpacked into steps, feed the
Verilated HiF4 dot units with an 8 x 256 weight tensor quantized by the golden model: the
plain unit (full-window accumulator) takes the operand steps ``q``, the ResQ-2:4 unit (bounded
accumulator) ``q`` and the residual steps ``r``. Every FP32 word must equal
``sim.dot.gemm`` of the golden model's quantization of the
same tensors (``quantize``, ``resq`` + ``pack_24``). The dot units are the default suite's
``CI_CONFIGS`` builds (shared with the bench tests), the encoder's that of
``tests/sim/bench/test_encoder_unit.py``.
"""

import numpy as np
import pytest

M, K, N = 8, 256, 8
ENCODER = ("hif4_quant", {"residual": "2:4", "stages": 3, "lanes": 16})


def _tensors():
    import ml_dtypes

    rng = np.random.default_rng(17)
    x = rng.standard_normal((M, K)) * np.exp2(rng.integers(-8, 8, (M, 1)))
    x[rng.random((M, K)) < 0.01] *= 2.0 ** 12                       # a few outliers
    w = rng.standard_normal((N, K))
    return x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def encoded():
    """(x, w, q_words, r_words): the encoder RTL's steps of every (row, K step) of x."""
    from hif4spec import module_name
    from sim.bench.runner import REPO, generate_cached
    from sim.bench.rtlcheck import run_rtl_cycles
    from sim.stimulus.encoder import pack_beats

    x, w = _tensors()
    unit, params = ENCODER
    module = module_name(unit, **params)
    verilog, manifest = generate_cached(unit, params, REPO / "build" / "rtl" / module)
    groups = {"x": x.view(np.uint16).reshape(-1, 64), "t": None}
    beats = pack_beats(manifest, unit, groups)
    g = len(groups["x"])
    words = run_rtl_cycles(verilog, manifest, beats, [len(beats)], [g], [0] * len(beats),
                           [])[0]["words"]
    assert len(words) == g
    qbits = manifest["output"]["q"]["width"]
    q = [wd & ((1 << qbits) - 1) for wd in words]
    r = [wd >> qbits for wd in words]
    return x, w, q, r


@pytest.mark.parametrize("residual, stages, lanes, accum", [("none", 3, 16, "window"),
                                                              ("2:4", 1, 16, "bounded")])
def test_bf16_to_fp32_through_rtl(encoded, residual, stages, lanes, accum):
    from hif4spec import module_name
    from sim import dot
    from sim.bench.runner import REPO, generate_cached
    from sim.bench.rtlcheck import run_rtl_cycles
    from sim.formats import quantize
    from sim.formats.resq import pack_24, resq
    from sim.stimulus import pack_payloads

    x, w, q, r = encoded
    ksteps = K // 64
    wq = quantize(w, "hif4", axis=1)
    a_steps = dot.unpack_steps("hif4", q)                      # (M * ksteps, ...)
    w_steps = dot.unpack_steps("hif4", dot.pack_steps(
        "hif4", {k: v.reshape((N * ksteps,) + v.shape[2:]) for k, v in wq.fields.items()}))
    r_steps = dot.unpack_steps("hif4-2:4", r) if residual == "2:4" else None
    pairs = [(i, j) for i in range(M) for j in range(N)]
    a_idx = np.array([i * ksteps + s for i, _ in pairs for s in range(ksteps)])
    w_idx = np.array([j * ksteps + s for _, j in pairs for s in range(ksteps)])
    first = np.tile(np.arange(ksteps) == 0, len(pairs))
    last = np.tile(np.arange(ksteps) == ksteps - 1, len(pairs))
    stream = {"a": {k: v[a_idx] for k, v in a_steps.items()},
              "w": {k: v[w_idx] for k, v in w_steps.items()},
              "r": None if r_steps is None else {k: v[a_idx] for k, v in r_steps.items()},
              "first": first, "last": last}
    params = {"residual": residual, "stages": stages, "lanes": lanes, "accum": accum}
    module = module_name("hif4", **params)
    verilog, manifest = generate_cached("hif4", params, REPO / "build" / "rtl" / module)
    payload = pack_payloads(manifest, "hif4", residual, stream)
    words = run_rtl_cycles(verilog, manifest, payload, [len(payload)], [len(pairs)],
                           [0] * len(payload), [])[0]["words"]

    xq = quantize(x, "hif4", axis=1)
    res = pack_24(resq(x, "hif4", "2:4", axis=1).residual) if residual == "2:4" else None
    golden = dot.gemm(xq, wq, res)
    assert np.array_equal(np.array(words, dtype=np.uint32).reshape(M, N), golden)
    # the encoder's steps are the golden model's, bit for bit
    assert q == dot.pack_steps("hif4", {k: v.reshape((M * ksteps,) + v.shape[2:])
                                        for k, v in xq.fields.items()})
