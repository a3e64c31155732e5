"""Step streams of a GEMM: quantized matrices cut into the steps of a dot unit, and the
K-loops of chosen (row of A, row of W) pairs as one stream.

A matrix (rows, K) quantized along K with K a multiple of ``hif4spec.STEP_ELEMS`` becomes
step fields with leading dimensions (rows, ksteps) in the unit's operand or residual step
layout (:func:`operand_steps`, :func:`residual_steps`); :func:`pair_stream` strings the
K-loops of row pairs together in the stream form of :mod:`sim.stimulus.streams`.
"""

import numpy as np

from hif4spec import operand_layout, residual_layout, unit_spec
from sim.formats.registry import golden

__all__ = ["operand_steps", "residual_of", "residual_steps", "pair_stream"]


def _steps(fields, layout, rows, ksteps):
    """Tensor fields (rows, blocks, ...) -> step fields (rows, ksteps, *layout shape)."""
    return {key: np.asarray(fields[key]).reshape((rows, ksteps) + layout.shape(key))
            for key in layout.fields}


def operand_steps(qt, unit, ksteps):
    """A QuantizedTensor (rows, K) of ``unit``'s format -> per row, its ``ksteps`` steps'
    fields in the unit's operand layout (leading dims rows, ksteps)."""
    return _steps(qt.fields, operand_layout(unit_spec(unit).fmt), qt.shape[0], ksteps)


def residual_of(x, unit, residual):
    """The residual A's rows ``x`` (float, (rows, K)) give ``unit`` in residual mode
    ``residual`` (``"2:4"`` or ``"dense"``): Rollout-ResQ (:func:`sim.formats.resq.resq`)
    along K in the unit's format, with that sparsifier."""
    from sim.formats.resq import resq

    return resq(x, unit_spec(unit).fmt, residual, axis=1)


def residual_steps(r, unit, residual, a, ksteps):
    """A's residual ``r`` (a QuantizedTensor, or an object with ``.residual`` such as the
    result of :func:`sim.formats.resq.resq`) -> its step fields in ``unit``'s ``residual``
    layout (for ``"2:4"``, the fields its format's ``pack_residual`` packs), rows and ksteps
    as :func:`operand_steps` of ``a``."""
    qt = r.residual if hasattr(r, "residual") else r
    fmt = unit_spec(unit).fmt
    if residual == "dense":
        fields = qt.fields
    else:
        fields = golden(fmt).need("pack_residual")(qt)
    return _steps(fields, residual_layout(fmt, residual), a.shape[0], ksteps)


def pair_stream(a_steps, w_steps, r_steps, sel_a, sel_w, ksteps):
    """One stream of the K-loops of the row pairs ``(sel_a[i], sel_w[i])``, in order.

    ``a_steps``, ``w_steps``, ``r_steps`` (None: no residual) are step fields of
    :func:`operand_steps` and :func:`residual_steps`; a row index of -1 gives zero steps
    (an idle array position). ``first`` is set on the first step of each loop, ``last`` on
    its last.
    """
    def take(steps, sel):
        out = {}
        for key, v in steps.items():
            rows = []
            for s in sel:
                rows.append(v[s] if s >= 0 else np.zeros_like(v[0]))
            out[key] = np.concatenate(rows)
        return out

    n = len(sel_a) * ksteps
    first = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    first[::ksteps] = True
    last[ksteps - 1::ksteps] = True
    return {"a": take(a_steps, sel_a), "w": take(w_steps, sel_w),
            "r": None if r_steps is None else take(r_steps, sel_a),
            "first": first, "last": last}
