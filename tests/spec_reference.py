"""A deliberately plain reference of ``docs/formats.md`` sections 1-5.

One group / one element at a time, Python floats (IEEE binary64, every operation rounded
RNE, evaluated in the order the spec writes it), ``math.frexp`` for exp2floor and
``fractions.Fraction`` for every named rounding (RNE, BF16, E4M3, E2M1). It shares no code
with ``sim.formats``; it is slow on purpose and meant to be obviously correct.
"""

import math
from fractions import Fraction

NAN = float("nan")
INF = float("inf")


# ------------------------------------------------------------------ building blocks

def exp2floor(v):
    """e with 2**e <= v < 2**(e+1), v > 0."""
    return math.frexp(v)[1] - 1


def rne_to_grid(v, man_bits, emin):
    """Exact RNE of v >= 0 to a float with man_bits fraction bits, subnormals below 2**emin,
    unbounded above; returned as a Fraction."""
    if v == 0:
        return Fraction(0)
    e = max(exp2floor(v), emin)
    ulp = Fraction(2) ** (e - man_bits)
    return round(Fraction(v) / ulp) * ulp          # round() on a Fraction is RNE


def to_ieee(v, man_bits, emin, emax):
    """Round a float or Fraction once, RNE, into an IEEE format; return a Python float.

    Overflow gives +-Inf. The sign is kept (also on zero)."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return v
    neg = v < 0 or (isinstance(v, float) and math.copysign(1.0, v) < 0)
    a = abs(Fraction(v))
    if a == 0:
        return -0.0 if neg else 0.0
    e = a.numerator.bit_length() - a.denominator.bit_length() - 2    # a lower bound
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - man_bits)
    q = round(a / ulp) * ulp
    r = INF if q >= Fraction(2) ** (emax + 1) else float(q)
    return -r if neg else r


def bf16(x):
    """BF16(x): bfloat16 RNE, gradual underflow, overflow to Inf (as a float)."""
    return to_ieee(x, 7, -126, 127)


def to_float16(x):
    return to_ieee(x, 10, -14, 15)


def to_float32(x):
    return to_ieee(x, 23, -126, 127)


E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)       # magnitude of code 0..7


def rne_e2m1(v):
    """E2M1 magnitude of v >= 0: RNE with saturation to 6 (nearest grid point; on a tie the
    one with the even code, i.e. mantissa bit 0)."""
    for i in range(7):
        lo, hi = E2M1_GRID[i], E2M1_GRID[i + 1]
        mid = (lo + hi) / 2                      # exact
        if v < mid:
            return lo
        if v == mid:
            return lo if i % 2 == 0 else hi
    return 6.0


def rne_e4m3(v):
    """E4M3 RNE of v >= 0; NaN beyond the finite range (ties at 464 go to 448)."""
    q = rne_to_grid(v, 3, -6)
    return NAN if q > 448 else float(q)


def has_nonfinite(xs):
    return any(math.isnan(x) or math.isinf(x) for x in xs)


# ------------------------------------------------------------------ HiF4 (section 2)

def hif4_group(xs):
    """Quantize one group of 64 floats per spec section 2.

    Returns (values, fields) where values are the exact dequantized floats and fields is a
    dict with S (E6M2 value), rec, b (8), c (16), k (64), s (64)."""
    assert len(xs) == 64
    if has_nonfinite(xs):
        return [NAN] * 64, {"S": NAN, "b": [0] * 8, "c": [0] * 16, "k": [0] * 64,
                            "s": [0] * 64}
    a = [abs(float(x)) for x in xs]
    v16 = [max(a[4 * j:4 * j + 4]) for j in range(16)]
    v8 = [max(v16[2 * g], v16[2 * g + 1]) for g in range(8)]
    vmax = max(v8)
    sf = bf16(vmax * bf16(1.0 / 7.0))                            # step 2
    sf = min(max(sf, 2.0 ** -48), 49152.0)                       # step 3
    e = exp2floor(sf)
    s_scale = float(round(Fraction(sf * 2.0 ** (2 - e))) * Fraction(2) ** (e - 2))
    rec = bf16(1.0 / s_scale)                                    # step 4
    b = [1 if v8[g] * rec >= 4 else 0 for g in range(8)]         # step 5
    c = [1 if (v16[j] * rec) * 2.0 ** (-b[j // 2]) >= 2 else 0 for j in range(16)]
    k, s, vals = [], [], []
    for i in range(64):
        bi, ci = b[i // 8], c[i // 4]
        y = (a[i] * rec) * 2.0 ** (2 - bi - ci)                  # step 7
        t = y + 0.5
        ki = min(math.floor(t), 7)
        si = 1 if xs[i] < 0 else 0                               # step 8
        k.append(ki)
        s.append(si)
        mag = s_scale * 2.0 ** (bi + ci) * ki / 4
        vals.append(-mag if si else mag)
    return vals, {"S": s_scale, "rec": rec, "b": b, "c": c, "k": k, "s": s}


# ------------------------------------------------------------------ MXFP4 (section 3)

def mxfp4_block(xs):
    if has_nonfinite(xs):
        return [NAN] * len(xs), {"X": NAN}
    amax = max(abs(float(x)) for x in xs)
    if amax == 0:
        e = -127
    else:
        e = min(max(exp2floor(amax) - 2, -127), 127)
    scale = 2.0 ** e
    vals = []
    for x in xs:
        q = rne_e2m1(abs(x) / scale)
        vals.append(-(q * scale) if x < 0 else q * scale)
    return vals, {"X": scale}


# ------------------------------------------------------------------ NVFP4 (section 4)

def nvfp4_tensor_scale(all_values, enabled=True):
    if not enabled:
        return 1.0
    finite = [abs(float(v)) for v in all_values if math.isfinite(v)]
    amax = max(finite, default=0.0)
    if amax == 0:
        return 1.0
    t = to_float32(amax / 2688.0)
    return min(max(t, 2.0 ** -126), 2.0 ** 127)


def nvfp4_block(xs, t):
    if has_nonfinite(xs):
        return [NAN] * len(xs), {"s": NAN}
    amax = max(abs(float(x)) for x in xs)
    s = rne_e4m3(min(amax / 6.0 / t, 448.0))
    d = t * s
    vals = []
    for x in xs:
        q = 0.0 if s == 0 else rne_e2m1(abs(x) / d)
        v = q * s * t
        vals.append(-v if x < 0 else v)
    return vals, {"s": s}


# ------------------------------------------------------------------ HiF8 (section 5)

def hif8(x):
    if math.isnan(x):
        return NAN
    a = abs(x)
    if a >= 40960.0:
        return -INF if x < 0 else INF
    if a < 2.0 ** -23:
        return 0.0
    e = max(exp2floor(a), -22)
    if abs(e) <= 3:
        w = 3
    elif abs(e) <= 7:
        w = 2
    elif abs(e) <= 15:
        w = 1
    else:
        w = 0
    q = math.floor(a * 2.0 ** (w - e) + 0.5) * 2.0 ** (e - w)
    return -q if x < 0 and q != 0 else q          # no -0 in HiF8


def bf16_elem(x):
    if math.isnan(x):
        return NAN
    q = bf16(abs(x))
    return -q if x < 0 else q


# ------------------------------------------------------------------ whole tensors

def fake_quantize_ref(x, fmt, axis=-1, tensor_scale=True):
    """Reference fake quantization of a NumPy array: float64 exact dequantized values in the
    input's shape (rounding to the input dtype is left to the caller)."""
    import numpy as np

    x64 = np.asarray(x).astype(np.float64)
    if fmt == "hif8":
        return np.array([hif8(float(v)) for v in x64.ravel()]).reshape(x64.shape)
    if fmt == "bf16":
        return np.array([bf16_elem(float(v)) for v in x64.ravel()]).reshape(x64.shape)
    block = {"hif4": 64, "mxfp4": 32, "nvfp4": 16}[fmt]
    xm = np.moveaxis(x64, axis, -1)
    n = xm.shape[-1]
    rows = xm.reshape(-1, n)
    t = nvfp4_tensor_scale(x64.ravel().tolist(), tensor_scale) if fmt == "nvfp4" else None
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        row = rows[r].tolist()
        for lo in range(0, n, block):
            grp = row[lo:lo + block]
            pad = [0.0] * (block - len(grp))
            if fmt == "hif4":
                vals, _ = hif4_group(grp + pad)
            elif fmt == "mxfp4":
                vals, _ = mxfp4_block(grp + pad)
            else:
                vals, _ = nvfp4_block(grp + pad, t)
            out[r, lo:lo + len(grp)] = vals[:len(grp)]
    return np.moveaxis(out.reshape(xm.shape), -1, axis)
