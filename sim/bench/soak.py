"""Soak chunks on the fast harness, failing K-loops shrunk into replay files.

A soak (:func:`sim.sweep.soak`, ``hif4 soak``) is a list of seeded chunks. A chunk
(:func:`soak_chunk`) draws its steps (:func:`chunk_steps`), checks every output word on the
compiled harness (:mod:`sim.bench.fast`) with a random stall pattern, and returns a small
summary. When a word is wrong (or late, or the run times out) the chunk shrinks the failure
(:func:`shrink`) and saves it as a *replay file* (:func:`save_case`): a small ``.npz`` with
the unit, its parameters, the steps of the shortest failing K-loop found and, when the
failure needs them, the stall pattern; ``hif4 verify --replay FILE`` runs it again on the
RTL and the golden model (:func:`load_case`).

Dot units draw from :func:`sim.stimulus.draw.mixed_stream` (random, cancelling and
NaN/Inf K-loops in the shares of the mix). An encoder's chunk opens with the named groups of
its seed (the adversarial ones, about a thousand), then draws random groups
(:func:`sim.stimulus.encoder.random_groups`): the ``special`` kind (BF16 NaN, Inf and
their neighbours) for the mix's ``special`` share, the other kinds for the rest.
"""

import hashlib
import io
import json
import time
from pathlib import Path

import numpy as np

__all__ = ["chunk_steps", "soak_chunk", "shrink", "save_case", "load_case", "DEFAULT_MIX"]

#: Default shares of the soak's steps: random, adversarial (``cancel``) and NaN/Inf
#: (``special``), defined once with the streams that draw them.
from sim.stimulus.draw import SOAK_MIX as DEFAULT_MIX  # noqa: E402


def _encoder(unit):
    from hif4spec import unit_spec
    return unit_spec(unit).kind == "encoder"


def chunk_steps(unit, residual, count, seed, index, mix=None):
    """The ``count`` steps (an encoder: groups) of chunk ``index`` of a soak seeded
    ``seed``: the same arguments always give the same stream."""
    mix = DEFAULT_MIX if mix is None else mix
    rng = np.random.default_rng([seed, index])
    if not _encoder(unit):
        from sim.stimulus.draw import mixed_stream
        return mixed_stream(unit, residual, count, rng, mix)
    from sim.stimulus.encoder import KINDS, concat_groups, named_groups, random_groups
    parts = [s for _, s in named_groups(unit, residual, seed=[seed, index])]
    have = min(count, sum(len(p["x"]) for p in parts))
    total = sum(mix.values())
    special = int(round((count - have) * mix.get("special", 0) / total))
    others = tuple(k for k in KINDS if k != "special")
    parts += [random_groups(unit, special, rng, kinds=("special",)),
              random_groups(unit, count - have - special, rng, kinds=others)]
    s = concat_groups(parts)
    return {"x": s["x"][:count], "t": None if s["t"] is None else s["t"][:count]}


def soak_chunk(unit, residual, text, manifest, folder, build_root, seed, index, count, mix,
               valid_prob, ready_prob):
    """Worker side of :func:`sim.sweep.soak`: build (cached, under ``build_root``, None for
    the worker's own ``build/``) the harness of Verilog ``text`` and check chunk ``index``;
    returns a summary dict (``steps``, ``outputs``, ``mismatches``, ``timeout``, ``late``,
    ``cycles``, ``seconds``, and for a failure ``case``: the replay file's bytes, which the
    driver writes, so a Ray worker on another machine needs no shared folder)."""
    from .fast import build_harness, run_fast, stall_pattern
    from .runner import unit_vectors

    t0 = time.perf_counter()
    build_root = Path(build_root) if build_root else Path(__file__).resolve().parents[2] / "build"
    src = build_root / "soak" / "src" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.v"
    src.parent.mkdir(parents=True, exist_ok=True)
    if not src.exists():
        tmp = src.with_suffix(f".{index}.tmp")
        tmp.write_text(text)
        tmp.replace(src)
    binary = build_harness(src, manifest, folder=folder, build_root=build_root, quiet=True)
    stream = chunk_steps(unit, residual, count, seed, index, mix)
    payload, expected, steps = unit_vectors(unit, residual, manifest, stream, seed)
    gaps, ready = stall_pattern(len(payload), [seed, index, 1], valid_prob, ready_prob)
    r = run_fast(binary, manifest, payload, expected, steps, gaps, ready)
    late = r["early_output"] is not None
    out = {"index": index, "steps": count, "outputs": r["checked"],
           "mismatches": r["mismatches"], "timeout": r["timeout"], "late": late,
           "cycles": r["cycles"], "case": None}
    if r["mismatches"] or r["timeout"] or late:
        case = shrink(binary, manifest, unit, residual, stream, r, gaps, ready)
        buf = io.BytesIO()
        save_case(buf, manifest, text, case, seed=seed, chunk=index)
        out["case"] = buf.getvalue()
        out["case_steps"] = case["length"]
        out["first_mismatch"] = {k: v for k, v in (r["first_mismatch"] or {}).items()}
    out["seconds"] = time.perf_counter() - t0
    return out


def _sub(stream, idx):
    """The steps ``idx`` of a dot stream (``first``/``last`` as given)."""
    out = {}
    for key in ("a", "w", "r"):
        out[key] = None if stream[key] is None else {f: v[idx] for f, v in stream[key].items()}
    out["first"] = np.asarray(stream["first"])[idx].copy()
    out["last"] = np.asarray(stream["last"])[idx].copy()
    return out


def _loop(stream, idx):
    """Steps ``idx`` as one K-loop: ``first`` on the first step only, ``last`` on the last."""
    s = _sub(stream, np.asarray(idx))
    s["first"][:] = False
    s["last"][:] = False
    s["first"][0] = s["last"][-1] = True
    return s


def shrink(binary, manifest, unit, residual, stream, result, gaps, ready):
    """The shortest failing case found for a failed chunk: a dict with ``stream`` (its
    steps, or an encoder's group), ``gaps``/``ready`` (None when it fails without stalls),
    ``length``, ``expected``/``actual`` (the words of the first mismatch, None for a late
    output or a timeout) and ``why``.

    A dot unit's failure is cut to the K-loop chain of the first wrong word (back to its
    ``first``, continued loops included, one output at the end) and then shortened step by
    step (halves, quarters, ... then single steps) while it still fails without stalls; a
    failure that needs the stall pattern keeps the chunk's steps up to the wrong word and
    the pattern. An encoder's is the group of the first wrong word.
    """
    from .fast import run_fast
    from .runner import unit_vectors

    bad = result["first_mismatch"]
    why = ("mismatch" if bad else "timeout" if result["timeout"] else "late output")

    def fails(s, pattern=None):
        payload, expected, steps = unit_vectors(unit, residual, manifest, s)
        n = len(payload)
        g, rd = pattern if pattern is not None else (np.zeros(n, np.uint16), np.ones(1, bool))
        r = run_fast(binary, manifest, payload, expected, steps, g[:n], rd)
        return (r["mismatches"] or r["timeout"] or r["early_output"] is not None), r

    if _encoder(unit):
        if bad is None or bad["step"] is None:
            return {"stream": stream, "gaps": gaps, "ready": ready, "why": why,
                    "length": len(stream["x"]), "expected": None, "actual": None}
        g = bad["step"] // manifest["ii"]
        one = {"x": stream["x"][g:g + 1],
               "t": None if stream.get("t") is None else stream["t"][g:g + 1]}
        failed, r = fails(one)
        keep = (one, None, None) if failed else (stream, gaps, ready)
        return {"stream": keep[0], "gaps": keep[1], "ready": keep[2], "why": why,
                "length": len(keep[0]["x"]), "expected": bad["expected"],
                "actual": bad["actual"]}

    if bad is None or bad["step"] is None:
        end = len(stream["first"]) - 1
        prefix = _sub(stream, np.arange(end + 1))
        return {"stream": prefix, "gaps": gaps, "ready": ready, "why": why,
                "length": end + 1, "expected": None, "actual": None}
    end = bad["step"]
    first = np.asarray(stream["first"])
    start = int(np.flatnonzero(first[:end + 1])[-1]) if first[:end + 1].any() else 0
    idx = list(range(start, end + 1))
    failed, r = fails(_loop(stream, idx))
    if not failed:                      # needs the stalls: keep the prefix and the pattern
        prefix = _sub(stream, np.arange(end + 1))
        prefix["last"][-1] = True
        return {"stream": prefix, "gaps": gaps[:end + 1], "ready": ready, "why": why,
                "length": end + 1, "expected": bad["expected"], "actual": bad["actual"]}
    size = max(1, len(idx) // 2)
    while True:                         # remove blocks of `size` steps while it still fails
        k = 0
        while k < len(idx) and len(idx) > 1:
            trial = idx[:k] + idx[k + size:]
            if trial:
                ok, rr = fails(_loop(stream, trial))
                if ok:
                    idx, r = trial, rr
                    continue
            k += size
        if size == 1:
            break
        size //= 2
    last = r["first_mismatch"]
    return {"stream": _loop(stream, idx), "gaps": None, "ready": None, "why": why,
            "length": len(idx), "expected": None if last is None else last["expected"],
            "actual": None if last is None else last["actual"]}


def save_case(path, manifest, text, case, **meta):
    """Write a replay file (``.npz``, to a path or a binary file object): the case of
    :func:`shrink`, the unit's name and parameters, its module and the SHA-256 of the
    Verilog that failed, and ``meta``."""
    arrays = {}
    s = case["stream"]
    for key, value in s.items():
        if isinstance(value, dict):
            for f, v in value.items():
                arrays[f"stream/{key}/{f}"] = np.asarray(v)
        elif value is not None:
            arrays[f"stream/{key}"] = np.asarray(value)
    if case["gaps"] is not None:
        arrays["gaps"] = np.asarray(case["gaps"], dtype=np.uint16)
        arrays["ready"] = np.asarray(case["ready"], dtype=bool)
    info = {"unit": manifest["unit"], "parameters": manifest["parameters"],
            "module": manifest["module"],
            "verilog_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "why": case["why"], "length": case["length"],
            "expected": None if case["expected"] is None else f"{case['expected']:x}",
            "actual": None if case["actual"] is None else f"{case['actual']:x}", **meta}
    np.savez_compressed(path, meta=np.array(json.dumps(info)), **arrays)
    return path


def load_case(path):
    """``(meta, stream, pattern)`` of a replay file: ``pattern`` is ``(gaps, ready)`` or
    None. ``ValueError`` if the file is not one."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            stream, pattern = {}, None
            for key in data.files:
                if key.startswith("stream/"):
                    parts = key.split("/")[1:]
                    if len(parts) == 2:
                        stream.setdefault(parts[0], {})[parts[1]] = data[key]
                    else:
                        stream[parts[0]] = data[key]
            if "gaps" in data.files:
                pattern = (data["gaps"], data["ready"])
    except (OSError, KeyError, ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a replay file ({exc})") from None
    if not {"unit", "parameters"} <= set(meta):
        raise ValueError(f"{path} is not a replay file (no unit)")
    if "x" in stream:
        stream.setdefault("t", None)
    else:
        stream.setdefault("r", None)
    return meta, stream, pattern
