"""sim.rl.gemm_torch.gemm_torch against the exact NumPy path: the same uint32 words, zero
tolerance, for every unit and residual mode, on quantized data, on random fields over the
whole code space, and on crafted cancellation, tie, overflow and underflow chains."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hif4spec import STEP_LAYOUTS, residual_layout                     # noqa: E402
from sim.rl import gemm_torch                                        # noqa: E402
from sim.dot import FORMATS_DOT, NAN_WORD, gemm                     # noqa: E402
from sim.formats import quantize                                     # noqa: E402
from sim.formats.resq import pack_24, resq                           # noqa: E402
from sim.formats.tensor import QuantizedTensor                       # noqa: E402

PINF = 0x7F800000
NEG = 0x80000000


def both(aq, wq, r=None, **kw):
    want = gemm(aq, wq, r, **kw)
    got = gemm_torch.gemm_torch(aq, wq, r, **kw)
    assert got.dtype == np.uint32 and got.shape == want.shape
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} words differ, first at {bad[0]}: " \
        f"{got[tuple(bad[0])]:#010x} != {want[tuple(bad[0])]:#010x}"
    return want


def operands(M, N, K, seed, spread):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)) * 2.0 ** rng.integers(-spread, spread + 1, (M, 1))
    w = rng.standard_normal((N, K)) * 2.0 ** rng.integers(-spread, spread + 1, (1, K))
    return a.astype(np.float32), w.astype(np.float32)


@pytest.mark.parametrize("fmt", list(FORMATS_DOT))
@pytest.mark.parametrize("K", [64, 200, 640])
def test_quantized_operands(fmt, K):
    a, w = operands(7, 5, K, seed=K, spread=12)
    a[1, 9] = np.nan
    w[3, 70 % K] = np.inf
    aq, wq = quantize(a, fmt, axis=1), quantize(w, fmt, axis=1)
    out = both(aq, wq)
    assert (out[1] == NAN_WORD).all()
    if fmt == "nvfp4":
        both(aq, wq, scaled=True)


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4"])
@pytest.mark.parametrize("mode", ["2:4", "dense", "channel50", "block32x64"])
def test_resq_residuals(fmt, mode):
    a, w = operands(6, 4, 256, seed=3, spread=10)
    out = resq(a, fmt, mode, axis=1)
    wq = quantize(w, fmt, axis=1)
    want = both(out.main, wq, out)
    assert np.array_equal(gemm_torch.gemm_torch(out.main, wq, out.residual), want)
    if fmt == "hif4" and mode == "2:4":
        assert np.array_equal(gemm_torch.gemm_torch(out.main, wq, pack_24(out)), want)


# --- random fields over the whole code space ------------------------------------------

def random_fields(fmt, rows, nb, rng, layout=None):
    """Fields (rows, nb, ...) of ``layout`` (default: the operand's) with scales spread over
    the whole code range (extremes, a few NaN) and sparse elements (zero blocks, single
    powers of two), so that steps land on ties, cancel, overflow and underflow."""
    lay = layout or STEP_LAYOUTS[fmt]
    per = lay.blocks                                   # blocks in one step of the layout
    f = {}
    for name in lay.fields:
        shape = (rows, nb) + lay.shape(name)[1 if per > 1 else 0:]
        hi = 1 << lay.width(name)
        f[name] = rng.integers(0, hi, shape).astype(np.uint8)
    elem = f["elem"]
    kind = rng.integers(0, 4, elem.shape[:2])
    sparse = rng.random(elem.shape) < 0.9
    elem[(kind == 1)[..., None] & sparse] = 0          # a few nonzero elements
    elem[kind == 2] = 0                                # zero blocks
    sc = f["scale"].astype(np.int64)
    base = rng.integers(0, 256, (rows, 1))
    jitter = rng.integers(-3, 4, sc.shape)
    near = np.clip(base + jitter, 0, 254)
    pick = rng.random(sc.shape)
    sc = np.where(pick < 0.6, near, sc)                # mostly near a row base, else anywhere
    sc = np.where(pick > 0.985, 255, sc)               # rare NaN code (255 in all three)
    sc = np.where((pick > 0.95) & (pick <= 0.985), rng.choice([0, 1, 254], sc.shape), sc)
    f["scale"] = sc.astype(np.uint8)
    if "pos" in f:
        f["pos"] = np.sort(f["pos"].reshape(rows, nb, -1, 2), axis=-1).reshape(f["pos"].shape)
    return f


def qt_of(fmt, fields, rows, K):
    f = dict(fields)
    if fmt == "nvfp4":
        f["tensor_scale"] = np.float32(0.75)
    return QuantizedTensor(fmt, (rows, K), 1, np.float32, f)


class Counter:
    def __init__(self, monkeypatch):
        self.calls = {"exact": 0, "twosum": 0}
        for name, key in (("_exact_step", "exact"), ("_add_rounded", "twosum")):
            fn = getattr(gemm_torch, name)
            monkeypatch.setattr(gemm_torch, name, self.wrap(fn, key))

    def wrap(self, fn, key):
        def inner(*args):
            self.calls[key] += 1
            return fn(*args)
        return inner


UNIT_MODES = [(fmt, mode) for fmt in FORMATS_DOT
              for mode in {"hif4": ("none", "2:4", "2:4-packed", "dense"),
                           "mxfp4": ("none", "2:4", "dense"), "nvfp4": ("none",)}[fmt]]


@pytest.mark.parametrize("fmt,mode", UNIT_MODES)
def test_random_fields(fmt, mode, monkeypatch):
    count = Counter(monkeypatch)
    M, N, steps = 12, 9, 6
    nb = steps * FORMATS_DOT[fmt]
    K = nb * 64 // FORMATS_DOT[fmt]
    for seed in range(4):
        rng = np.random.default_rng([seed, len(fmt), len(mode)])
        aq = qt_of(fmt, random_fields(fmt, M, nb, rng), M, K)
        wq = qt_of(fmt, random_fields(fmt, N, nb, rng), N, K)
        r = None
        if mode != "none":
            rf = random_fields(fmt, M, nb, rng)
            if mode != "dense":                        # 2:4: two of every four codes zero
                e = rf["elem"].reshape(M, nb, -1, 4)
                keep = np.argsort(rng.random(e.shape), axis=-1) < 2
                rf["elem"] = np.where(keep, e, 0).reshape(rf["elem"].shape).astype(np.uint8)
            r = qt_of(fmt, rf, M, K)
            if mode == "2:4-packed":
                r = pack_24(r)
        both(aq, wq, r)
        if fmt == "nvfp4":
            both(aq, wq, scaled=True)
    # HiF4 steps without residual are exact float32 sums (22 bits); NVFP4's always fit
    # float64; the other modes go through all three paths here.
    paths = {"twosum": not (fmt == "hif4" and mode == "none")}
    paths["exact"] = paths["twosum"] and fmt != "nvfp4"
    assert {k: count.calls[k] > 0 for k in paths} == paths


def test_packed_residual_layout_is_the_spec():
    assert residual_layout("hif4", "2:4").name == "hif4-2:4"


# --- crafted chains -----------------------------------------------------------------

LO = 2.0 ** -64                                # W's second row, for the tiny chains


def mx_rows(steps):
    """MXFP4 A rows from per-step (block 0, block 1) values at element 0 of each block,
    checked to quantize exactly; W row 0 is all ones, row 1 all ``LO``."""
    M = len(steps)
    S = max(len(s) for s in steps)
    a = np.zeros((M, 64 * S))
    for m, row in enumerate(steps):
        for k, (b0, b1) in enumerate(row):
            a[m, 64 * k], a[m, 64 * k + 32] = b0, b1
    aq = quantize(a, "mxfp4", axis=1)
    assert np.array_equal(aq.decoded(), a)
    w = np.ones((2, 64 * S))
    w[1] = LO
    wq = quantize(w, "mxfp4", axis=1)
    assert np.array_equal(wq.decoded(), w)
    return aq, wq


def test_crafted_mxfp4_chains(monkeypatch):
    count = Counter(monkeypatch)
    t, u = 2.0 ** 24, 1 / LO                    # u: A values of rows read against W row 1
    hi = [
        [(t, 2.0), (-1.0, 2.0 ** -60)],        # tie 2**24 + 1 decided 60 binades below: up
        [(t, 2.0), (-1.0, -(2.0 ** -60))],     # ... down
        [(t, 2.0), (-1.0, 2.0 ** -35)],        # ... 35 below (float64 path, round to odd)
        [(t, 2.0), (-1.0, 0.0)],               # exact tie: to even
        [(3 * 2.0 ** 100, 0.0), (-3 * 2.0 ** 100, 0.0)],               # cancels to +0
        [(6 * 2.0 ** 127, 0.0), (-6 * 2.0 ** 127, 1.0)],               # +Inf stays
        [(-6 * 2.0 ** 126, -6 * 2.0 ** 126), (1.0, 2.0 ** 100)],       # -Inf stays
        [(2.0 ** 127, 2.0 ** 127), (-(2.0 ** 127), 0.0)],              # Inf, then finite
    ]
    lo = [
        [(3 * 2.0 ** -60 * u, 0.0), (-3 * 2.0 ** -60 * u, -(2.0 ** -160) * u)],   # +0, -0
        [(-(2.0 ** -160) * u, 0.0), (0.0, 0.0)],       # -0, then a zero step gives +0
        [(2.0 ** -140 * u, 0.0), (-(2.0 ** -140) * u, -(2.0 ** -170) * u)],   # to -0
        [(1.5 * 2.0 ** -140 * u, 0.0), (2.0 ** -149 * u, 2.0 ** -150 * u)],   # subnormal tie
    ]
    aq, wq = mx_rows(hi + lo)
    out = both(aq, wq)
    h, lw = out[:len(hi), 0], out[len(hi):, 1]
    f = h.view(np.float32)
    assert f[0] == t + 2 and f[1] == t and f[2] == t + 2 and f[3] == t
    assert h[4] == 0 and h[5] == PINF and h[6] == NEG | PINF and h[7] == PINF
    assert lw[0] == NEG and lw[1] == 0 and lw[2] == NEG
    assert lw[3] == 770                         # 769.5 * 2**-149, tie to even
    assert count.calls["exact"] > 0 and count.calls["twosum"] > 0
    # alone in its chunk, the second step is all zero: -0 + 0 is still +0
    aq, wq = mx_rows([[(-(2.0 ** -160) * u, 0.0), (0.0, 0.0)]])
    assert both(aq, wq)[0, 1] == 0


def test_torch_backend_options():
    a, w = operands(5, 3, 128, seed=1, spread=3)
    aq, wq = quantize(a, "hif4", axis=1), quantize(w, "hif4", axis=1)
    want = gemm(aq, wq)
    assert np.array_equal(gemm_torch.gemm_torch(aq, wq, row_chunk=2, device="cpu"), want)
    t = gemm_torch.gemm_torch(aq, wq, as_tensor=True)
    assert t.dtype == torch.float32 and np.array_equal(t.numpy().view(np.uint32), want)
    with pytest.raises(ValueError, match="gemm needs"):
        gemm_torch.gemm_torch(aq, quantize(w, "mxfp4", axis=1))
    with pytest.raises(ValueError, match="same K"):
        gemm_torch.gemm_torch(aq, quantize(w[:, :64], "hif4", axis=1))


@pytest.mark.parametrize("fmt,mode", [("hif4", None), ("hif4", "2:4"), ("mxfp4", "dense"),
                                      ("nvfp4", None)])
def test_quant_linear_bit_true(fmt, mode):
    from torch import nn

    from sim.rl.qlinear import Precision, convert_linears, set_gemm, set_mode

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(192, 24, bias=False))
    convert_linears(model, train=Precision.uniform(fmt),
                    rollout=Precision(weight=fmt, act=fmt, resq=mode))
    x = (torch.randn(2, 3, 192) * 2.0 ** torch.randint(-6, 7, (1, 1, 192))).requires_grad_()
    set_mode(set_gemm(model, "bit-true"), "rollout")
    y = model(x)
    x2 = x.detach().reshape(-1, 192).numpy()
    wq = quantize(model[0].weight.detach().numpy(), fmt, axis=1)
    r = resq(x2, fmt, mode, axis=1) if mode else None
    aq = r.main if mode else quantize(x2, fmt, axis=1)
    want = gemm(aq, wq, r, scaled=True)
    assert np.array_equal(y.detach().reshape(-1, 24).numpy().view(np.uint32), want)
    y.sum().backward()                      # straight through, as the fake path
    g = x.grad.clone()
    x.grad = None
    set_gemm(model, "fake")
    model(x).sum().backward()
    assert torch.equal(g, x.grad)
    set_mode(set_gemm(model, "bit-true"), "train")      # training forward: no ResQ
    x.grad = None
    y = model(x)
    assert np.array_equal(y.detach().reshape(-1, 24).numpy().view(np.uint32),
                          gemm(quantize(x2, fmt, axis=1), wq, scaled=True))
    y.sum().backward()
    assert x.grad is not None
    with pytest.raises(ValueError, match="gemm must be"):
        set_gemm(model, "exact")


@pytest.mark.parametrize("fmt,mode", [("hif4", "2:4"), ("nvfp4", None)])
def test_quant_linear_trunc(fmt, mode):
    """``gemm="trunc"``: the truncating unit's words (:func:`sim.dot.gemm` with
    ``accum="trunc"``), which differ from the exact unit's on these operands."""
    from torch import nn

    from sim.rl.qlinear import Precision, convert_linears, set_gemm, set_mode

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(640, 16, bias=False))
    convert_linears(model, rollout=Precision(weight=fmt, act=fmt, resq=mode))
    # Steps many binades apart: the sums need rounding, which truncation does differently.
    x = torch.randn(4, 640) * 2.0 ** torch.randint(-12, 13, (4, 10)).repeat_interleave(64, 1)
    set_mode(set_gemm(model, "trunc"), "rollout")
    with torch.no_grad():
        y = model(x).numpy().view(np.uint32)
    x2 = x.numpy()
    wq = quantize(model[0].weight.detach().numpy(), fmt, axis=1)
    r = resq(x2, fmt, mode, axis=1) if mode else None
    aq = r.main if mode else quantize(x2, fmt, axis=1)
    want = gemm(aq, wq, r, scaled=True, accum="trunc")
    assert np.array_equal(y, want)
    assert (want != gemm(aq, wq, r, scaled=True)).any()
