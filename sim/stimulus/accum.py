"""Accumulation steps for the exact back ends: random and adversarial ``(acc, step)`` pairs.

A step is one accumulator word and one to four exact terms ``sig * 2**(exp - bias)``; both
back ends (:class:`hwgen.accum.ExactAdd`, :class:`hwgen.accum_bounded.BoundedAdd`) turn it
into ``RNE_FP32(acc + sum of terms)`` with spec section 7's special cases, and
:meth:`AccumSteps.golden` gives that word from :func:`sim.dot.accumulate`. With two terms
(HiF4's main and residual) the second term's exponent field is always within
``max_exp_diff`` of the first's, as the front end guarantees; independent terms (no
``max_exp_diff``: MXFP4's two blocks, or its four with a residual) take any fields.

:func:`accum_steps` draws the steps in NumPy (a million in seconds), each from one of the
:data:`CLASSES`; a step whose class cannot be built for the drawn values (a term grid that
cannot reach the accumulator, say) keeps its random fields and counts as ``random``.
``main`` is the first term, ``res`` the second.

=============  ================================================================================
class          the step
=============  ================================================================================
random         a random accumulator word (normal, subnormal, +-0) and random terms
cancel         main within three units of ``-acc``: cancellation by many bits
near           ``acc`` within two ulps of ``-main``
half_ulp       ``acc`` at half an ulp of ``main``, or one ulp off it
subnormal      main as near ``2**-126`` as its grid allows, ``acc`` near ``-main`` plus
               up to ``2**-126``: subnormal sums where the grid reaches them
zero           main exactly ``-acc`` (from either side), else main 0: exact zeros, +-0
               operands
special        +-Inf or NaN ``acc``, the ``nan`` flag, ``first``, or overflow past +-max
d1             opposite signs, ``|acc|`` just above ``|main|``, leading ones one place apart
tie            ``acc + main`` exactly halfway between two FP32 words, the residual (0, or a
               few units at the lowest exponent allowed, below half an ulp) deciding, or
               (one term) halfway but for main's lowest bit far below; or, for a main of
               more than 25 bits, main itself halfway and a smaller ``acc`` (or +-0) deciding
res_cancel     res exactly or nearly ``-main`` (two terms)
res_far        exponent fields ``max_exp_diff`` apart, ``acc`` cancelling the higher term
               exactly or but for an ulp (two terms)
opposite       two terms of opposite signs, far below a large ``acc`` (two terms)
zero_tiny      the terms cancel ``acc`` to +0 exactly, then one to three steps of a few units
               at the lowest exponents on ``acc = +-0``
pair_edge      (independent terms) ``acc`` exactly ``-hi`` (the higher term) or a few ulps off
               it, and the lower term 0 to 80 places below hi (a fifth of the time up to 400)
pair_tight     (independent terms) hi ``+-2**ph``, ``acc + hi = +-2**(ph - 24)``, and the
               lower term of the other sign, its leading one at ``2**(ph - 49)`` and bits down
               to ``2**(ph - 47 - S)``: the exact sum just inside a midpoint, which a
               pair window of 50 bits would jam it onto
split_bypass   (three or four terms) ``acc`` the one FP32 word ``-s * Xe`` that the split's
               term cannot serve (``hwgen.accum_split``), or a few ulps off it
split_mid      (three or four terms) two terms whose sum is an FP32 midpoint, two more far
               below (their sum deciding), ``acc`` +-0, near ``-(the two below)``, or near
               ``2**(q - 26)``
split_chain    (three or four terms) 0 to 34 empty places between each term's lowest bit
               and the next one's leading one (the split's cluster edge, 29, among them):
               clusters joined and split at the edge; ``acc`` near ``-T``, ``-N`` or random
split_cancel   (three or four terms) two terms cancelling exactly (or but a unit), the others
               far below; ``acc`` near ``-T``, ``-(the others)`` or +-0
split_pow2     (three or four terms) a power of two above terms of the other sign 14 to 80
               places below (the sum's top place one lower); ``acc`` near ``-N``, ``-T`` or
               the bypass word
=============  ================================================================================

With two terms, ``random`` and ``special`` steps draw a random residual; the other classes
above ``res_cancel`` give it 0 or a few units at the lowest exponent allowed, which keeps
the step adversarial. With three or four (independent) terms the one-term classes give the
others 0 or a few units at the lowest exponent, and the ``split_*`` classes, drawn in
Python integers (the exact sum can span 500 bits), aim at the split of
:mod:`hwgen.accum_split`.
"""

from dataclasses import dataclass

import numpy as np

from hif4spec import TRUNC_BITS
from sim.dot import accumulate, accumulate_trunc

__all__ = ["CLASSES", "TWO_TERM_CLASSES", "PAIR_CLASSES", "SPLIT_CLASSES", "Term",
           "AccumSteps", "accum_steps"]

CLASSES = ("random", "cancel", "near", "half_ulp", "subnormal", "zero", "special", "d1", "tie",
           "res_cancel", "res_far", "opposite", "zero_tiny", "pair_edge", "pair_tight",
           "split_bypass", "split_mid", "split_chain", "split_cancel", "split_pow2")
#: The classes drawn only for two-term steps.
TWO_TERM_CLASSES = ("res_cancel", "res_far", "opposite")
#: The classes drawn only for two independent terms.
PAIR_CLASSES = ("pair_edge", "pair_tight")
#: The classes drawn only for three or four independent terms.
SPLIT_CLASSES = ("split_bypass", "split_mid", "split_chain", "split_cancel", "split_pow2")
_K = {name: i for i, name in enumerate(CLASSES)}
#: Relative draw weights of the slots (every other class 1; a zero_tiny slot is 2-4 steps).
_WEIGHT = {"random": 2, "zero_tiny": 1 / 3}

_PINF, _NAN_SIG = 0x7F800000, 0x7FFFFF
_MAX_FINITE = 0x7F7FFFFF


@dataclass(frozen=True)
class Term:
    """A term's fields: ``sig_bits``-bit two's complement significand, ``exp_bits``-bit
    exponent field up to ``top_exp``, value ``sig * 2**(exp - bias)``."""

    sig_bits: int
    exp_bits: int
    bias: int
    top_exp: int

    @classmethod
    def of(cls, t):
        """A ``Term`` from a ``(sig_bits, exp_bits, bias, top_exp)`` tuple or an object with
        those attributes (``hwgen.accum.TermSpec``)."""
        if isinstance(t, cls):
            return t
        if isinstance(t, tuple):
            return cls(*t)
        return cls(t.sig_bits, t.exp_bits, t.bias, t.top_exp)


@dataclass
class AccumSteps:
    """``n`` steps as arrays.

    Attributes
    ----------
    terms : tuple of Term
    acc : uint32 (n,)
        Accumulator words (the back ends read +0 on a ``first`` step).
    sig, exp : int64 (n, T)
        Significands and exponent fields of the ``T`` terms.
    nan, first : bool (n,)
    kind : uint8 (n,)
        Index into :data:`CLASSES`.
    """

    terms: tuple
    acc: np.ndarray
    sig: np.ndarray
    exp: np.ndarray
    nan: np.ndarray
    first: np.ndarray
    kind: np.ndarray

    def __len__(self):
        return len(self.acc)

    def golden(self, accum="window", extra_bits=TRUNC_BITS):
        """The FP32 words of the steps (:func:`sim.dot.accumulate`; for back end ``accum``
        ``"trunc"``, :func:`sim.dot.accumulate_trunc` with ``extra_bits``)."""
        bias = np.array([t.bias for t in self.terms], dtype=np.int64)
        acc = np.where(self.first, 0, self.acc).astype(np.uint32)
        if accum == "trunc":
            return accumulate_trunc(acc, self.sig, self.exp - bias, self.nan, extra_bits)
        return accumulate(acc, self.sig, self.exp - bias, self.nan)

    def pack(self, fields):
        """Step words (uint64 (n,)): the step's fields placed by ``fields``, the
        ``(offset, width)`` of each term's significand and exponent field in turn, then of
        ``nan``, ``first`` and ``last`` (0) (the order of ``hwgen.accum.accum_layout``)."""
        fields = list(fields)
        if max(off + width for off, width in fields) > 64:
            raise ValueError("Step words of at most 64 bits (pack_words packs wider ones)")
        w = self.pack_words(fields, 2).astype(np.uint64)
        return w[:, 0] | (w[:, 1] << np.uint64(32))

    def pack_words(self, fields, words=None):
        """The step words of :meth:`pack` of any width as little-endian 32-bit pieces,
        uint32 (n, ``words``) (default: as many as the widest field needs)."""
        fields = list(fields)
        if len(fields) != 2 * len(self.terms) + 3:
            raise ValueError(f"{2 * len(self.terms) + 3} fields, not {len(fields)}")
        top = max(off + width for off, width in fields)
        words = words or -(-top // 32)
        if top > 32 * words:
            raise ValueError(f"Step words of {top} bits do not fit {words} 32-bit words")
        cols = [c for j in range(len(self.terms)) for c in (self.sig[:, j], self.exp[:, j])]
        cols += [self.nan, self.first, np.zeros(len(self), dtype=bool)]
        out = np.zeros((len(self), words), dtype=np.uint64)
        for col, (off, width) in zip(cols, fields):
            v = col.astype(np.int64).astype(np.uint64) & np.uint64((1 << width) - 1)
            for k in range(off // 32, (off + width - 1) // 32 + 1):
                sh = off - 32 * k
                piece = v << np.uint64(sh) if sh >= 0 else v >> np.uint64(-sh)
                out[:, k] |= piece & np.uint64(0xFFFFFFFF)
        return out.astype(np.uint32)

    def counts(self):
        """Steps per class, ``{name: count}`` in :data:`CLASSES` order (drawn ones only)."""
        c = np.bincount(self.kind, minlength=len(CLASSES))
        return {name: int(c[i]) for i, name in enumerate(CLASSES) if c[i]}


def accum_steps(terms, n, seed, max_exp_diff=None):
    """``n`` random and adversarial steps (:class:`AccumSteps`) of one term, of two whose
    exponent fields differ by at most ``max_exp_diff`` (None: independent terms), or of three
    or four independent ones; the same ``seed`` gives the same steps."""
    terms = tuple(Term.of(t) for t in terms)
    if len(terms) == 2:
        if max_exp_diff is not None and max_exp_diff < 0:
            raise ValueError("Two-term steps need max_exp_diff >= 0, or None")
        if terms[0].bias != terms[1].bias:
            raise ValueError("The two terms must share the exponent bias")
    elif len(terms) in (3, 4):
        if max_exp_diff is not None:
            raise ValueError("Steps of three or four terms take independent ones "
                             "(max_exp_diff None)")
        if len({t.bias for t in terms}) != 1:
            raise ValueError("The terms must share the exponent bias")
    elif len(terms) != 1:
        raise ValueError(f"Steps of one to four terms, not {len(terms)}")
    if any(t.sig_bits > 52 or t.sig_bits < 2 for t in terms):
        raise ValueError("Term significands of 2 to 52 bits")
    if n < 1:
        raise ValueError(f"Need at least one step, not {n}")
    return _Draw(terms, n, np.random.default_rng(seed), max_exp_diff).steps


# ---------------------------------------------------------------------------------------
# Vector helpers (int64 / float64 arrays)


def _bitlen(x):
    """Bit length of ``|x|`` (``|x| < 2**62``)."""
    x = np.abs(np.asarray(x, dtype=np.int64))
    bl = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    over = (bl > 0) & ((np.int64(1) << np.maximum(bl - 1, 0)) > x)     # float rounded up
    return bl - over


def _tz(x):
    """Trailing zeros of ``x`` (0 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    low = x & -x
    return np.where(x == 0, 0, np.frexp(low.astype(np.float64))[1] - 1).astype(np.int64)


def _shl(x, k):
    """``x * 2**k`` rounded toward -inf (``k`` may be negative; ``|k| < 63``)."""
    k = np.asarray(k, dtype=np.int64)
    return np.where(k >= 0, x << np.clip(k, 0, 62), x >> np.clip(-k, 0, 62))


def _between(rng, lo, hi):
    """Uniform integers in ``[lo, hi]`` (arrays; where ``hi < lo``: ``lo``)."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64),
                                 np.asarray(hi, dtype=np.int64))
    span = np.maximum(hi - lo + 1, 1)
    return lo + np.minimum((rng.random(lo.shape) * span).astype(np.int64), span - 1)


def _sign(rng, m):
    return np.where(rng.integers(0, 2, m) == 1, -1, 1).astype(np.int64)


def _value(sig, exp_field, bias):
    """``sig * 2**(exp - bias)`` as float64 (exact for ``|sig| < 2**53``; may be +-inf)."""
    with np.errstate(over="ignore"):
        return np.ldexp(sig.astype(np.float64), (exp_field - bias).astype(np.int32))


def _f32(v):
    """FP32 words of float64 values (round to nearest even, overflow to +-Inf)."""
    with np.errstate(over="ignore"):
        return np.asarray(v, dtype=np.float64).astype(np.float32).view(np.uint32)


def _exact_f32(v):
    """FP32 words of ``v`` and whether each is exact, finite and nonzero."""
    w = _f32(v)
    back = w.view(np.float32).astype(np.float64)
    return w, (back == v) & np.isfinite(v) & (v != 0)


def _word_parts(acc):
    """(signed significand, weight exponent of its bit 0) of finite FP32 words."""
    acc = acc.astype(np.int64)
    e, f = (acc >> 23) & 0xFF, acc & 0x7FFFFF
    sig = np.where(e == 0, f, f | 0x800000)
    return np.where(acc >> 31 == 1, -sig, sig), np.where(e == 0, -149, e - 150)


class _Draw:
    """One call of :func:`accum_steps`: random fields first, then each class's fields."""

    def __init__(self, terms, n, rng, max_exp_diff):
        self.terms, self.rng, self.D = terms, rng, max_exp_diff
        self.two = len(terms) == 2
        self.pair = self.two and max_exp_diff is None
        self.split = len(terms) > 2
        if self.pair:
            self.D = max(t.top_exp for t in terms)
        names = [c for c in CLASSES if (self.two or c not in TWO_TERM_CLASSES)
                 and (self.pair or c not in PAIR_CLASSES)
                 and (self.split or c not in SPLIT_CLASSES)]
        w = np.array([_WEIGHT.get(c, 1) for c in names], dtype=np.float64)
        # Slots of one step, or of a zero_tiny chain of 2-4 steps, laid out back to back.
        slots = np.array([_K[c] for c in names])[rng.choice(len(names), n, p=w / w.sum())]
        length = np.where(slots == _K["zero_tiny"], rng.integers(2, 5, n), 1)
        start = np.cumsum(length) - length
        self.kind = np.repeat(slots, length)[:n].astype(np.uint8)
        self.pos = np.arange(n) - np.repeat(start, length)[:n]
        self.n = n
        self._random()
        for c in names:
            idx = np.flatnonzero(self.kind == _K[c])
            if c != "random" and idx.size:
                getattr(self, "_" + c)(idx)
        if self.two:
            self._residuals()
        if self.split:
            self._split_rest()
        self.steps = AccumSteps(terms, self.acc, self.sig, self.exp, self.nan, self.first,
                                self.kind)

    # -- field draws -----------------------------------------------------------------

    def _words(self, m):
        """Random accumulator words: 1/10 subnormal, 1/10 +-0, the rest normal."""
        rng = self.rng
        kind = rng.integers(0, 10, m)
        sign = rng.integers(0, 2, m).astype(np.uint32) << 31
        frac = rng.integers(0, 1 << 23, m).astype(np.uint32)
        e = rng.integers(1, 255, m).astype(np.uint32)
        return np.where(kind == 0, frac, np.where(kind == 1, 0, (e << 23) | frac)) | sign

    def _sigs(self, m, bits):
        """Random significands of a random width 1..``bits`` (two's complement range)."""
        b = self.rng.integers(1, bits + 1, m)
        half = np.int64(1) << (b - 1)
        return self.rng.integers(-half, half)

    def _tiny(self, m):
        """+-1 .. +-3."""
        return _sign(self.rng, m) * self.rng.integers(1, 4, m)

    def _res_range(self, e1):
        """Exponent fields the residual may take beside a main field ``e1``."""
        return np.maximum(0, e1 - self.D), np.minimum(self.terms[1].top_exp, e1 + self.D)

    def _random(self):
        n, rng, t0 = self.n, self.rng, self.terms[0]
        self.acc = self._words(n)
        self.nan = np.zeros(n, dtype=bool)
        self.first = np.zeros(n, dtype=bool)
        self.sig = np.zeros((n, len(self.terms)), dtype=np.int64)
        self.exp = np.zeros((n, len(self.terms)), dtype=np.int64)
        self.sig[:, 0] = self._sigs(n, t0.sig_bits)
        self.exp[:, 0] = rng.integers(0, t0.top_exp + 1, n)
        if self.two:
            lo, hi = self._res_range(self.exp[:, 0])
            self.exp[:, 1] = _between(rng, lo, hi)
            self.sig[:, 1] = np.where(rng.random(n) < 0.25, 0,
                                      self._sigs(n, self.terms[1].sig_bits))
        for j, t in enumerate(self.terms[1:] if self.split else (), start=1):
            # near the first term half the time (clusters), else anywhere
            near = rng.random(n) < 0.5
            e = np.where(near, self.exp[:, 0] + rng.integers(-40, 8, n),
                         rng.integers(0, t.top_exp + 1, n))
            self.exp[:, j] = np.clip(e, 0, t.top_exp)
            self.sig[:, j] = np.where(rng.random(n) < 0.25, 0, self._sigs(n, t.sig_bits))

    def _split_rest(self):
        """The other terms beside a main term that a one-term class has set (three or four
        terms): 0 (always for ``zero_tiny``, half the time otherwise) or a few units at
        exponent 0 (each, half the time)."""
        one = [_K[c] for c in CLASSES if c not in TWO_TERM_CLASSES + PAIR_CLASSES
               + SPLIT_CLASSES + ("random", "special")]
        idx = np.flatnonzero(np.isin(self.kind, one))
        keep = (self.rng.random(idx.size) < 0.5) & (self.kind[idx] != _K["zero_tiny"])
        for j in range(1, len(self.terms)):
            self.exp[idx, j] = 0
            self.sig[idx, j] = np.where(keep & (self.rng.random(idx.size) < 0.5),
                                        self._tiny(idx.size), 0)

    # -- three or four independent terms (Python integers) -----------------------------

    def _split_setup(self):
        t = self.terms[0]
        self._sh = t.bias + 200                 # exact values are ints at 2**-_sh
        self._w = max(u.sig_bits for u in self.terms)

    def _place(self, i, cols, vals):
        """Terms ``vals`` (``(signed magnitude, top place)``, None for 0) into columns
        ``cols`` of step ``i``; False (nothing written) where a field does not fit."""
        out = []
        for c, v in zip(cols, vals):
            t = self.terms[c]
            if v is None or v[0] == 0:
                out.append((c, 0, int(self.rng.integers(0, t.top_exp + 1))))
                continue
            m, top = v
            e = top - (abs(m).bit_length() - 1) + t.bias
            if not 0 <= e <= t.top_exp or abs(m) >= 1 << (t.sig_bits - 1):
                return False
            out.append((c, m, e))
        for c, m, e in out:
            self.sig[i, c], self.exp[i, c] = m, e
        return True

    def _exact_sum(self, i):
        b = self.terms[0].bias
        return sum(int(self.sig[i, c]) << (int(self.exp[i, c]) - b + self._sh)
                   for c in range(len(self.terms)))

    def _word(self, v):
        """RNE FP32 word of ``v * 2**-_sh`` (a nonzero value keeps its sign)."""
        if v == 0:
            return 0
        sign = 0x80000000 if v < 0 else 0
        m = abs(v)
        q = max(m.bit_length() - 1 - self._sh, -126)
        sh = q - 23 + self._sh                    # the ulp's place in v's units
        f, r = m >> sh, m & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        f += r > half or (r == half and f & 1)
        mag = ((q + 126) << 23) + f if f >= 1 << 23 else f
        return sign | min(mag, _PINF)

    def _is_exact(self, v, w):
        """Whether word ``w`` is ``v * 2**-_sh`` exactly (and finite)."""
        if w & 0x7FFFFFFF >= _PINF:
            return False
        e, f = (w >> 23) & 0xFF, w & 0x7FFFFF
        mag = (f | (0x800000 if e else 0)) << (max(e, 1) - 150 + self._sh)
        return (-mag if w >> 31 else mag) == v

    def _split_of(self, v):
        """``(s, q, fn, e, xe)`` of a nonzero exact sum: sign, ``max(top, -126)``, ``N`` in
        units of ``2**(q - 24)``, ``E = T - N`` (units of ``2**-_sh``) and the even one of
        floor(|T|) and the next (units of ``2**(q - 24)``)."""
        s = -1 if v < 0 else 1
        m = abs(v)
        q = max(m.bit_length() - 1 - self._sh, -126)
        sh = q - 24 + self._sh
        f, r = m >> sh, m & ((1 << sh) - 1)
        fn = f + (r >= 1 << (sh - 1))
        xe = f + (f & 1)
        return s, q, fn, s * (m - (fn << sh)), xe

    def _words_off(self, w, k):
        """Word ``w`` moved by up to ``k`` ulps (not onto Inf/NaN)."""
        x = (w + int(self.rng.integers(-k, k + 1))) & 0xFFFFFFFF
        return w if (x >> 23) & 0xFF == 0xFF else x

    def _rand_mag(self, bits=None):
        w = bits or self._w - 1
        m = int(self.rng.integers(1, 1 << w))
        return -m if self.rng.random() < 0.5 else m

    def _split_steps(self, idx, draw):
        """Steps ``idx`` from ``draw(i, cols) -> bool`` (term columns in random order)."""
        self._split_setup()
        ok = np.zeros(idx.size, dtype=bool)
        n = len(self.terms)
        for k, i in enumerate(idx):
            for _ in range(8):
                cols = [int(c) for c in self.rng.permutation(n)]
                if draw(int(i), cols):
                    ok[k] = True
                    break
        self._fail(idx, ok)

    def _top(self, lo=-180, hi=120):
        return int(self.rng.integers(lo, hi + 1))

    def _split_bypass(self, idx):
        def draw(i, cols):
            w, top = self._w, self._top()
            vals = [(self._rand_mag(), top - int(self.rng.integers(0, 3 * w)))
                    for _ in cols]
            if not self._place(i, cols, vals):
                return False
            v = self._exact_sum(i)
            if v == 0:
                return False
            s, q, fn, e, xe = self._split_of(v)
            xv = -s * (xe << (q - 24 + self._sh))
            word = self._word(xv)
            if not self._is_exact(xv, word):
                return False
            self.acc[i] = word if self.rng.random() < 0.6 else self._words_off(word, 2)
            return True
        self._split_steps(idx, draw)

    def _split_mid(self, idx):
        def draw(i, cols):
            w, rng = self._w, self.rng
            u = self._top(-170, 90)
            m25 = int(rng.integers(1 << 23, 1 << 24)) * 2 + 1          # odd, 25 bits
            sg = -1 if rng.random() < 0.5 else 1
            hi_bits = 25 - (w - 2)
            head = [(sg * (m25 >> (w - 2)), u + 24),
                    (sg * (m25 & ((1 << (w - 2)) - 1)), None)]
            low = m25 & ((1 << (w - 2)) - 1)
            head[1] = (sg * low, u + low.bit_length() - 1) if low else None
            t3 = u + 24 - int(rng.integers(27, 140))
            tails = [(self._rand_mag(), t3),
                     (self._rand_mag(), t3 - int(rng.integers(-2, 80)))]
            vals = (head + tails)[:len(cols)]
            if hi_bits < 1 or not self._place(i, cols, vals):
                return False
            v = self._exact_sum(i)
            s, q, fn, e, xe = self._split_of(v)
            pick = rng.integers(0, 4)
            if pick == 0:
                self.acc[i] = int(rng.integers(0, 2)) << 31
            elif pick == 1:
                self.acc[i] = self._words_off(self._word(-e), 1) if e else 0
            elif pick == 2:
                ea = q - 26 + 127 + int(rng.integers(-1, 1))
                if not 1 <= ea <= 254:
                    return False
                self.acc[i] = (int(rng.integers(0, 2)) << 31) | (ea << 23) \
                    | int(rng.integers(0, 4))
            else:
                ea = max(0, min(254, q - 27 + 127 - int(rng.integers(0, 30))))
                self.acc[i] = (int(rng.integers(0, 2)) << 31) | (ea << 23) \
                    | int(rng.integers(0, 1 << 23))
            return True
        self._split_steps(idx, draw)

    def _split_chain(self, idx):
        def draw(i, cols):
            w, rng = self._w, self.rng
            top = self._top(-120, 200)
            vals = []
            for _ in cols:
                vals.append((self._rand_mag(), top))
                top -= w + int(rng.integers(0, 35))
            if not self._place(i, cols, vals):
                return False
            v = self._exact_sum(i)
            pick = rng.integers(0, 3)
            if pick == 0 and v:
                self.acc[i] = self._words_off(self._word(-v), 2)
            elif pick == 1 and v:
                s, q, fn, e, xe = self._split_of(v)
                self.acc[i] = self._words_off(self._word(-(v - e)), 1)
            return True
        self._split_steps(idx, draw)

    def _split_cancel(self, idx):
        def draw(i, cols):
            w, rng = self._w, self.rng
            top = self._top(-150, 200)
            m = self._rand_mag()
            nudge = 0 if rng.random() < 0.6 else int(rng.integers(-1, 2))
            vals = [(m, top), (-m + nudge if -m + nudge else -m, top)]
            for _ in cols[2:]:
                vals.append((self._rand_mag(), top - int(rng.integers(10, 200))))
            if not self._place(i, cols, vals):
                return False
            v = self._exact_sum(i)
            rest = sum(int(self.sig[i, c]) << (int(self.exp[i, c]) - self.terms[0].bias
                                               + self._sh) for c in cols[2:])
            pick = rng.integers(0, 4)
            if pick == 0:
                self.acc[i] = self._words_off(self._word(-v), 1)
            elif pick == 1:
                self.acc[i] = self._words_off(self._word(-rest), 1)
            elif pick == 2:
                self.acc[i] = int(rng.integers(0, 2)) << 31
            return True
        self._split_steps(idx, draw)

    def _split_pow2(self, idx):
        def draw(i, cols):
            w, rng = self._w, self.rng
            top = self._top(-140, 200)
            sg = -1 if rng.random() < 0.5 else 1
            vals = [(sg << int(rng.integers(0, w - 1)), top)]
            t2 = top - int(rng.integers(14, 81))
            vals.append((-sg * abs(self._rand_mag()), t2))
            for _ in cols[2:]:
                vals.append((self._rand_mag(), t2 - int(rng.integers(0, 120)))
                            if rng.random() < 0.7 else None)
            if not self._place(i, cols, vals):
                return False
            v = self._exact_sum(i)
            s, q, fn, e, xe = self._split_of(v)
            pick = rng.integers(0, 4)
            if pick == 0:
                self.acc[i] = self._words_off(self._word(-(v - e)), 1)
            elif pick == 1:
                self.acc[i] = self._words_off(self._word(-v), 1)
            elif pick == 2:
                xv = -s * (xe << (q - 24 + self._sh))
                word = self._word(xv)
                if self._is_exact(xv, word):
                    self.acc[i] = word
            return True
        self._split_steps(idx, draw)

    def _residuals(self):
        """The residual beside a main term that a one-term class has set: a random one
        (``special``), else 0 or a few units as far below as allowed."""
        lo, hi = self._res_range(self.exp[:, 0])
        idx = np.flatnonzero(self.kind == _K["special"])
        self.exp[idx, 1] = _between(self.rng, lo[idx], hi[idx])
        idx = np.flatnonzero(np.isin(self.kind, [_K[c] for c in CLASSES if c not in
                                                 TWO_TERM_CLASSES + PAIR_CLASSES
                                                 + ("random", "special", "zero_tiny")]))
        self.exp[idx, 1] = lo[idx]
        self.sig[idx, 1] = np.where(self.rng.random(idx.size) < 0.5, 0, self._tiny(idx.size))
        # tie: only a residual below half the accumulator's ulp decides the midpoint.
        idx = np.flatnonzero(self.kind == _K["tie"])
        half = np.maximum((self.acc[idx] >> 23) & 0xFF, 1).astype(np.int64) - 151
        above = lo[idx] - self.terms[1].bias + 2 > half
        self.sig[idx[above], 1] = 0

    def _clip_main(self, idx):
        t0 = self.terms[0]
        self.sig[idx, 0] = np.clip(self.sig[idx, 0], -(1 << (t0.sig_bits - 1)),
                                   (1 << (t0.sig_bits - 1)) - 1)

    def _fail(self, idx, ok):
        """Steps ``idx`` whose class could not be built (``~ok``) count as random."""
        self.kind[idx[~ok]] = _K["random"]

    def _near_main(self, vsig, vexp, exact_only=False):
        """Main-term fields equal to ``vsig * 2**vexp`` where the grid allows (3 in 4 of
        those), else that value rounded toward -inf at a random exponent where it fits; and
        whether any fitting nonzero term exists (with ``exact_only``: an exact one)."""
        t = self.terms[0]
        bl, tz = _bitlen(vsig), _tz(vsig)
        lo = np.maximum(0, vexp + bl - t.sig_bits + 1 + t.bias)
        hi_fit = np.minimum(t.top_exp, vexp + bl - 1 + t.bias)
        hi_exact = np.minimum(hi_fit, vexp + tz + t.bias)
        exact = (lo <= hi_exact) & (vsig != 0)
        pick_exact = exact & ((self.rng.random(vsig.shape) < 0.75) | exact_only)
        e = _between(self.rng, lo, np.where(pick_exact, hi_exact, hi_fit))
        s = _shl(vsig, vexp - (e - t.bias))
        ok = exact if exact_only else (lo <= hi_fit) & (vsig != 0)
        return s, e, ok

    # -- one-term classes ------------------------------------------------------------

    def _cancel(self, idx):
        vs, ve = _word_parts(self.acc[idx])
        s, e, ok = self._near_main(-vs, ve)
        self.sig[idx, 0] = np.where(ok, s + self.rng.integers(-3, 4, idx.size),
                                    self.sig[idx, 0])
        self.exp[idx, 0] = np.where(ok, e, self.exp[idx, 0])
        self._clip_main(idx)
        self._fail(idx, ok)

    def _near(self, idx):
        t = self.terms[0]
        v = _value(self.sig[idx, 0], self.exp[idx, 0], t.bias)
        ok = (v != 0) & (np.abs(v) < 3e38)
        base = _f32(-v)
        acc = (base.astype(np.int64) + self.rng.integers(-2, 3, idx.size)) & 0xFFFFFFFF
        acc = np.where((acc >> 23) & 0xFF == 0xFF, base, acc).astype(np.uint32)
        self.acc[idx] = np.where(ok, acc, self.acc[idx])
        self._fail(idx, ok)

    def _half_ulp(self, idx):
        t = self.terms[0]
        v = _value(self.sig[idx, 0], self.exp[idx, 0], t.bias)
        a = np.abs(v)
        ok = (a > 1e-37) & (a < 1e38)
        top = np.frexp(np.where(ok, a, 1.0))[1] - 1           # floor(log2 |v|)
        half = np.ldexp(_sign(self.rng, idx.size).astype(np.float64), top - 24)
        w = _f32(half).astype(np.int64)
        w = ((w + self.rng.integers(-1, 2, idx.size)) & 0x7FFFFFFF) | (w & 0x80000000)
        self.acc[idx] = np.where(ok, w, self.acc[idx]).astype(np.uint32)
        self._fail(idx, ok)

    def _subnormal(self, idx):
        """Main with its leading one near ``2**-126`` (or as low as its grid reaches),
        ``acc`` the FP32 word nearest ``-main + k * 2**-149``, ``|k| < 2**23``."""
        rng, t, m = self.rng, self.terms[0], idx.size
        s = np.where(rng.random(m) < 0.5, self._sigs(m, min(4, t.sig_bits)),
                     self.sig[idx, 0])
        s = np.where(s == 0, 1, s)
        e = np.clip(rng.integers(-150, -117, m) - _bitlen(s) + 1 + t.bias, 0, t.top_exp)
        v = _value(s, e, t.bias)
        delta = np.ldexp(rng.integers(-(1 << 23), 1 << 23, m).astype(np.float64), -149)
        ok = np.abs(v) < 3e38
        self.sig[idx, 0] = np.where(ok, s, self.sig[idx, 0])
        self.exp[idx, 0] = np.where(ok, e, self.exp[idx, 0])
        self.acc[idx] = np.where(ok, _f32(-v + delta), self.acc[idx])
        self._fail(idx, ok)

    def _zero(self, idx):
        """Half: ``acc = -main`` where main is an FP32 value; half: main ``= -acc`` where
        the grid allows; else main 0."""
        t = self.terms[0]
        w, exact = _exact_f32(-_value(self.sig[idx, 0], self.exp[idx, 0], t.bias))
        from_main = exact & (self.rng.random(idx.size) < 0.5)
        self.acc[idx] = np.where(from_main, w, self.acc[idx])
        vs, ve = _word_parts(self.acc[idx])
        s, e, ok = self._near_main(-vs, ve, exact_only=True)
        self.sig[idx, 0] = np.where(from_main, self.sig[idx, 0], np.where(ok, s, 0))
        self.exp[idx, 0] = np.where(ok & ~from_main, e, self.exp[idx, 0])

    def _special(self, idx):
        rng, t, m = self.rng, self.terms[0], idx.size
        pick = rng.integers(0, 5, m)
        sign = rng.integers(0, 2, m).astype(np.uint32) << 31
        nan_word = _PINF | rng.integers(1, _NAN_SIG + 1, m).astype(np.uint32)
        smax = (1 << (t.sig_bits - 1)) - 1
        acc = self.acc[idx]
        acc = np.where(pick == 0, _PINF | sign, acc)
        acc = np.where(pick == 1, nan_word, acc)
        acc = np.where(pick == 4, _MAX_FINITE | sign, acc)
        self.acc[idx] = acc
        self.nan[idx] = pick == 2
        self.first[idx] = pick == 3
        self.sig[idx, 0] = np.where(pick == 4, np.where(sign != 0, -smax, smax),
                                    self.sig[idx, 0])
        self.exp[idx, 0] = np.where(pick == 4, t.top_exp, self.exp[idx, 0])

    def _d1(self, idx):
        rng, t, m = self.rng, self.terms[0], idx.size
        S = t.sig_bits
        k = self.exp[idx, 0] - t.bias + S - 1               # |main| < 2**k <= |acc|
        ok = (k >= -126) & (k <= 127) & (S > 2)
        neg = rng.integers(0, 2, m)
        acc = ((np.clip(k, -126, 127) + 127) << 23) | rng.integers(0, 8, m) | (neg << 31)
        bits = rng.integers(1, max(S - 1, 2), m)
        r = rng.integers(1, np.int64(1) << bits) | 1
        sig = (np.int64(1) << (S - 1)) - r
        self.acc[idx] = np.where(ok, acc, self.acc[idx]).astype(np.uint32)
        self.sig[idx, 0] = np.where(ok, np.where(neg == 1, sig, -sig), self.sig[idx, 0])
        self._fail(idx, ok)

    def _tie(self, idx):
        """Either ``acc`` with biased exponent ``ea`` (ulp ``2**(max(ea, 1) - 150)``, a
        quarter of the time one of the four lowest ``ea`` the term grid reaches) and main an
        odd multiple of half that ulp, with one term half of those +-1 in main's lowest bit
        when that is below the midpoint's; or (a main of more than 25 bits, half the time)
        main of 25 significant bits, a midpoint itself, and ``acc`` below half its ulp, or
        +-0."""
        rng, t, m = self.rng, self.terms[0], idx.size
        S, b = t.sig_bits, t.bias
        ok = np.zeros(m, dtype=bool)
        lo_ea, hi_ea = max(0, 151 - b), min(254, t.top_exp - b + 151 + S - 2)
        frac = rng.integers(0, 1 << 23, m)
        sign = rng.integers(0, 2, m) << 31
        if lo_ea <= hi_ea:
            low = rng.integers(lo_ea, min(hi_ea, lo_ea + 3) + 1, m)
            ea = np.where(rng.random(m) < 0.25, low, rng.integers(lo_ea, hi_ea + 1, m))
            half = np.maximum(ea, 1) - 151                  # weight exponent of half an ulp
            w = _between(rng, np.maximum(-b, half - (S - 2)), np.minimum(t.top_exp - b, half))
            k = half - w                                    # main = odd << k
            odd = np.minimum(np.abs(self._sigs(m, S - 1 - k)) | 1,
                             (np.int64(1) << (S - 1 - k)) - 1)
            self.acc[idx] = ((ea << 23) | frac | sign).astype(np.uint32)
            nudge = (k > 0) & (rng.random(m) < 0.5) & (not self.two)
            nudge = np.where(nudge, _sign(rng, m), 0)
            self.sig[idx, 0] = _sign(rng, m) * (odd << k) + nudge
            self.exp[idx, 0] = w + b
            ok[:] = True
        if S - 1 >= 25:
            own = ~ok | (rng.random(m) < 0.5)
            k = _between(rng, np.zeros(m, dtype=np.int64), S - 26)
            main = ((rng.integers(1 << 23, 1 << 24, m) << 1) | 1) << k
            e = rng.integers(0, t.top_exp + 1, m)
            half = e - b + k                                # weight exponent of main's bit 0
            ea = half - 1 + 127 - rng.integers(0, 41, m)    # |acc| < 2**half
            acc = np.where(ea >= 1, (np.clip(ea, 1, 254) << 23) | frac, 0) | sign
            self.acc[idx[own]] = acc[own].astype(np.uint32)
            self.sig[idx[own], 0] = (_sign(rng, m) * main)[own]
            self.exp[idx[own], 0] = e[own]
            ok |= own
        self._fail(idx, ok)

    # -- two-term classes ------------------------------------------------------------

    def _res_cancel(self, idx):
        rng, m = self.rng, idx.size
        t0, t1 = self.terms
        s1 = self._sigs(m, min(t0.sig_bits, t1.sig_bits) - 1)
        s1 = np.where(s1 == 0, 1, s1)
        e1 = self.exp[idx, 0]
        # res = -main at e2 = e1 - j: j up to the residual's spare bits below, up to
        # main's trailing zeros above.
        j_hi = np.minimum(np.minimum(t1.sig_bits - 1 - _bitlen(s1), self.D), e1)
        j_lo = -np.minimum(np.minimum(_tz(s1), self.D), t1.top_exp - e1)
        j = _between(rng, j_lo, j_hi)
        off = np.where(rng.random(m) < 0.5, 0, self._tiny(m))
        s1max = (1 << (t1.sig_bits - 1)) - 1
        self.sig[idx, 0] = s1
        self.sig[idx, 1] = np.clip(-_shl(s1, j) + off, -s1max - 1, s1max)
        self.exp[idx, 1] = e1 - j
        pick = rng.integers(0, 4, m)                        # acc: random, +-0, or first
        self.acc[idx] = np.where(pick == 1, (rng.integers(0, 2, m) << 31).astype(np.uint32),
                                 self.acc[idx])
        self.first[idx] = pick == 2

    def _res_far(self, idx):
        rng, m = self.rng, idx.size
        t0, t1 = self.terms
        D = self.D
        below = rng.random(m) < 0.75                        # res below main, or above
        lo = np.where(below, D, 0)
        hi = np.where(below, t0.top_exp, min(t0.top_exp, t1.top_exp - D))
        e1 = _between(rng, lo, hi)
        e2 = np.where(below, e1 - D, e1 + D)
        ok = (lo <= hi) & (e2 >= 0) & (e2 <= t1.top_exp)
        s2 = np.where(rng.random(m) < 0.5, self._tiny(m), self._sigs(m, t1.sig_bits))
        self.exp[idx, 0] = np.where(ok, e1, self.exp[idx, 0])
        self.exp[idx, 1] = np.where(ok, e2, self.exp[idx, 1])
        self.sig[idx, 1] = np.where(ok, s2, self.sig[idx, 1])
        # acc: random, exactly -(the higher term), or that plus or minus an ulp
        hs = np.where(below, self.sig[idx, 0], self.sig[idx, 1])
        he = np.where(below, self.exp[idx, 0], self.exp[idx, 1])
        w, exact = _exact_f32(-_value(hs, he, t0.bias))
        pick = rng.integers(0, 3, m)
        w = np.where(pick == 2, w + self._tiny(m).clip(-1, 1).astype(np.uint32), w)
        use = exact & (pick > 0) & ok & ((w >> 23) & 0xFF != 0xFF)
        self.acc[idx] = np.where(use, w, self.acc[idx])
        self._fail(idx, ok)

    def _opposite(self, idx):
        rng, m = self.rng, idx.size
        t0, t1 = self.terms
        e1 = self.exp[idx, 0]
        s1 = self._sigs(m, min(t0.sig_bits, t1.sig_bits))
        s1 = np.where(s1 == 0, 1, s1)
        same = rng.random(m) < 0.5                          # nearly cancelling at e1
        lo, hi = self._res_range(e1)
        e2 = np.where(same, e1, _between(rng, lo, hi))
        mag2 = np.where(same, np.abs(s1) + rng.integers(-3, 4, m),
                        np.abs(self._sigs(m, t1.sig_bits)))
        s1max = (1 << (t1.sig_bits - 1)) - 1
        self.sig[idx, 0] = s1
        self.sig[idx, 1] = -np.sign(s1) * np.clip(mag2, 0, s1max)
        self.exp[idx, 1] = e2
        # acc's lowest bit from 24 binades below main's leading one to 40 above it
        ea = np.clip(e1 - t0.bias + 150 + _bitlen(s1) + rng.integers(-24, 41, m), 1, 254)
        self.acc[idx] = ((ea << 23) | rng.integers(0, 1 << 23, m)
                         | (rng.integers(0, 2, m) << 31)).astype(np.uint32)

    # -- independent-pair classes ----------------------------------------------------

    def _pair_edge(self, idx):
        rng, m, t = self.rng, idx.size, self.terms[0]
        hs = self._sigs(m, t.sig_bits)
        hs = np.where(hs == 0, 1, hs)
        # hi's leading one from 2**-100 to 2**120 (its FP32 word normal), where the grid allows
        he = np.clip(rng.integers(-100, 121, m) - _bitlen(hs) + 1 + t.bias, 0, t.top_exp)
        w, exact = _exact_f32(-_value(hs, he, t.bias))
        off = rng.integers(-3, 4, m) * (rng.random(m) < 0.7)
        acc = (w.astype(np.int64) + off) & 0xFFFFFFFF
        ls = self._sigs(m, t.sig_bits)
        gap = np.where(rng.random(m) < 0.8, rng.integers(0, 81, m), rng.integers(0, 401, m))
        le = he + _bitlen(hs) - _bitlen(ls) - gap
        ok = exact & (le >= 0) & (le <= t.top_exp) & ((acc >> 23) & 0xFF != 0xFF)
        self._set_pair(idx, ok, acc, hs, he, ls, le)

    def _pair_tight(self, idx):
        rng, m, t = self.rng, idx.size, self.terms[0]
        S = t.sig_bits
        ph = rng.integers(-100, 121, m)
        neg = rng.integers(0, 2, m)
        sgn = np.where(neg == 1, -1, 1)
        acc = ((ph - 1 + 127) << 23) | ((1 << 23) - 1) | ((1 - neg) << 31)
        hs, he = sgn * (np.int64(1) << (S - 2)), ph - (S - 2) + t.bias
        ls = -sgn * ((np.int64(1) << (S - 2)) + rng.integers(1, np.int64(1) << (S - 2), m))
        le = ph - 49 - (S - 2) + t.bias
        ok = (S >= 4) & (he >= 0) & (he <= t.top_exp) & (le >= 0) & (le <= t.top_exp)
        self._set_pair(idx, ok, acc, hs, he, ls, le)

    def _set_pair(self, idx, ok, acc, hs, he, ls, le):
        """hi and lo into either term (at random), where ``ok``."""
        swap = self.rng.random(idx.size) < 0.5
        for j, (s, e) in enumerate(((hs, he), (ls, le))):
            col = np.where(swap, 1 - j, j)
            for c in (0, 1):
                put = ok & (col == c)
                self.sig[idx[put], c] = s[put]
                self.exp[idx[put], c] = e[put]
        self.acc[idx[ok]] = acc[ok].astype(np.uint32)
        self._fail(idx, ok)

    # -- chains ----------------------------------------------------------------------

    def _zero_tiny(self, idx):
        rng = self.rng
        t0 = self.terms[0]
        head = idx[self.pos[idx] == 0]
        tail = idx[self.pos[idx] > 0]
        m = head.size
        # Head: acc = -(main + res) exactly; main's value has at most 24 significant bits.
        s1 = self._sigs(m, min(t0.sig_bits - 2, 24))
        s1 = np.where(s1 == 0, 1, s1)
        e1 = self.exp[head, 0]
        w, ok = _exact_f32(-_value(s1, e1, t0.bias))
        self.acc[head] = np.where(ok, w, 0)                 # else 0 + 0
        main = np.where(ok, s1, 0)
        if self.two:                                        # part of main moved to res
            t1 = self.terms[1]
            qbits = min(t0.sig_bits - 2, t1.sig_bits - 1)
            j = _between(rng, 0, np.minimum(np.minimum(self.D, e1), qbits - 1))
            q = np.where(ok & (rng.random(m) < 0.5), self._sigs(m, qbits - j), 0)
            self.sig[head, 1] = q << j
            self.exp[head, 1] = e1 - j
            main = main - q
        self.sig[head, 0] = main
        # Tail: acc = +0 (the head's result) or -0, a few units at the lowest exponents.
        k = tail.size
        self.acc[tail] = np.where(rng.random(k) < 0.75, 0, 0x80000000).astype(np.uint32)
        self.exp[tail, 0] = rng.integers(0, min(t0.top_exp, 3) + 1, k)
        self.sig[tail, 0] = _sign(rng, k) * rng.integers(1, 8, k)
        if self.two:
            lo, hi = self._res_range(self.exp[tail, 0])
            e2 = _between(rng, lo, np.minimum(hi, lo + 3))
            cancel = rng.random(k) < 0.5                    # res = -main but a unit
            s2 = np.where(cancel, -_shl(self.sig[tail, 0], self.exp[tail, 0] - e2)
                          + self._tiny(k).clip(-1, 1), self._tiny(k))
            self.sig[tail, 1] = s2
            self.exp[tail, 1] = e2
