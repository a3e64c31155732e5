"""Interleaved streams of a dot unit with ``interleave`` L > 1 accumulators (issue 45).

Such a unit holds L independent FP32 accumulators; each step names its own in the payload
field ``hif4spec.ACC_FIELD``, and each accumulator follows the rules of a unit with one
accumulator for its own steps (a ``first`` step starts from +0, a ``last`` step emits, NaN
stays until that accumulator's next ``first``). The unit emits its words in the order in
which their ``last`` steps were transferred.

An interleaved stream is made from a *base* stream, any stream of the unit with one
accumulator (:mod:`sim.stimulus.streams`, or :mod:`sim.stimulus.multi` for a multi-format
unit): the base stream is cut into accumulator chains (a new chain at step 0 and at every
``first`` step), whole chains go to accumulators, and their steps are interleaved so that
each accumulator has at most one chain open at a time (:func:`interleave`). It is a dict
``{"base", "interleave", "order", "acc_id", "first", "last"}``: ``base`` is the base
stream with its first step made a ``first`` step, ``interleave`` is L, ``order`` (intp,
(S,)) the base step at each interleaved position, ``acc_id`` (uint8, (S,)) its
accumulator, and ``first``/``last`` the base flags in interleaved order. As every chain
starts from +0, each chain's words are the base stream's words at its steps, so the golden
words of an interleaved stream are the base stream's, in the order of the positions of
their ``last`` steps (:func:`expected_words`).

The benches (:mod:`sim.bench.runner`) take an interleaved unit's payloads and golden words
from here (:func:`pack_payloads`, :func:`expected_words`).
"""

import numpy as np

from hif4spec import ACC_FIELD, acc_id_bits, payload_fields, unit_spec

__all__ = ["chains", "interleave", "single", "in_turn", "is_interleaved", "stream_module",
           "pack_payloads",
           "expected_words", "step_inputs"]

#: Episode modes of :func:`interleave` and their probabilities: every accumulator takes
#: chains, their steps in turn (``round``) or at random times (``random``); some of them
#: take chains while the others stay idle (``some``); or every accumulator takes chains,
#: its steps in bursts (``burst``).
MODES = {"round": 0.35, "random": 0.25, "some": 0.2, "burst": 0.2}


def chains(s):
    """``[(start, stop), ...]``: the accumulator chains of a stream (a new chain at step 0
    and at every ``first`` step)."""
    n = len(s["first"])
    starts = [0] + [int(k) for k in np.flatnonzero(s["first"]) if k]
    return list(zip(starts, starts[1:] + [n])) if n else []


def _first_forced(s):
    """Stream ``s`` (single- or multi-format) with its first step a ``first`` step."""
    s = dict(s)
    s["first"] = np.asarray(s["first"], dtype=bool).copy()
    if not len(s["first"]) or s["first"][0]:
        return s
    s["first"][0] = True
    if "parts" in s:                    # a multi-format stream: its step 0 in its part
        fmt = s["formats"][int(s["fmt"][0])]
        part = dict(s["parts"][fmt])
        part["first"] = np.asarray(part["first"], dtype=bool).copy()
        part["first"][0] = True
        s["parts"] = {**s["parts"], fmt: part}
    return s


def _assemble(s, L, order, acc_id):
    return {"base": s, "interleave": L, "order": np.asarray(order, dtype=np.intp),
            "acc_id": np.asarray(acc_id, dtype=np.uint8),
            "first": s["first"][order].copy(),
            "last": np.asarray(s["last"], dtype=bool)[order].copy()}


def single(s, L, acc=0):
    """Stream ``s`` as an interleaved stream of a unit with ``L`` accumulators, every step
    in accumulator ``acc`` and in its own order."""
    if not 0 <= acc < L:
        raise ValueError(f"accumulator {acc} of a unit with {L}")
    s = _first_forced(s)
    n = len(s["first"])
    return _assemble(s, L, np.arange(n), np.full(n, acc, dtype=np.uint8))


def in_turn(s, L):
    """Stream ``s`` with its chains taken ``L`` at a time, chain ``j`` of each group in
    accumulator ``j`` and the group's steps in turn (accumulators 0, 1, ..., L-1, 0, ...;
    an accumulator whose chain has ended is passed over): the schedule of an
    output-stationary array that keeps L output elements per unit, which a unit takes one
    step per cycle where the chains are as long as one another."""
    s = _first_forced(s)
    cuts = chains(s)
    order, acc_id = [], []
    for g in range(0, len(cuts), L):
        group = cuts[g:g + L]
        for k in range(max(b - a for a, b in group)):
            for j, (a, b) in enumerate(group):
                if a + k < b:
                    order.append(a + k)
                    acc_id.append(j)
    return _assemble(s, L, np.asarray(order, dtype=np.intp),
                     np.asarray(acc_id, dtype=np.uint8))


def interleave(s, L, rng):
    """Stream ``s`` (single- or multi-format) interleaved over ``L`` accumulators, drawn
    with numpy Generator ``rng``.

    The chains are taken in episodes of 1 to 4 L chains, each episode of a mode of
    :data:`MODES`. Each accumulator has a timeline on which its chains follow one another;
    a chain goes to the active accumulator whose timeline ends first. Its steps are one
    time unit apart in a ``round`` episode (so the accumulators take turns); a random time
    apart (exponential, at a pace the accumulator keeps for the episode: 1, 2 or 4) in a
    ``random`` or ``some`` episode, where in the latter 1 to L-1 accumulators take chains
    and the rest stay idle until it ends; and in bursts of about 2-8 steps at one time in
    a ``burst`` episode. The stream's steps in the order of their times are the
    interleaved stream. So the mix has all L accumulators busy, accumulators idle while
    others run, chains of different lengths ending at different times, and bursts of one
    accumulator; the chains keep their steps (adversarial K-loops, NaN/Inf) and their
    order in each accumulator.
    """
    if L < 1 or L > 1 << 8:
        raise ValueError(f"cannot interleave over {L} accumulators")
    s = _first_forced(s)
    cuts = chains(s)
    n = len(s["first"])
    if not cuts:
        return _assemble(s, L, np.zeros(0, np.intp), np.zeros(0, np.uint8))
    starts = np.array([a for a, _ in cuts], dtype=np.intp)
    lengths = np.array([b - a for a, b in cuts], dtype=np.intp)
    chain_of = np.repeat(np.arange(len(cuts)), lengths)
    within = np.arange(n) - starts[chain_of]
    # the modes of the episodes, their chains and paces
    modes, chain_episode = [], np.empty(len(cuts), dtype=np.intp)
    names, probs = list(MODES), list(MODES.values())
    c = 0
    while c < len(cuts):
        size = int(rng.integers(1, 4 * L + 1))
        chain_episode[c:c + size] = len(modes)
        modes.append(names[int(rng.choice(len(names), p=probs))])
        c += size
    paces = rng.choice([1.0, 1.0, 2.0, 4.0], size=(len(modes), L))
    in_turn = np.array([m == "round" for m in modes])
    paces[in_turn] = 1.0
    bursts = rng.integers(2, 9, size=len(modes))
    # each step's time after the one before it in its chain (its chain's start: the first)
    unit_gaps = np.where(in_turn[chain_episode[chain_of]], 1.0,
                         np.maximum(rng.exponential(1.0, n), 1e-3))
    burst_step = np.array([m == "burst" for m in modes])[chain_episode[chain_of]]
    starts_burst = rng.random(n) < 1.0 / bursts[chain_episode[chain_of]]
    gaps = np.where(burst_step & ~starts_burst & (within > 0), 1e-6,
                    np.where(burst_step, unit_gaps * bursts[chain_episode[chain_of]], unit_gaps))
    # timelines: chains to accumulators, episode by episode
    acc_of = np.empty(len(cuts), dtype=np.intp)
    pace_of = np.empty(len(cuts))
    begin = np.empty(len(cuts))
    sums = np.add.reduceat(gaps, starts)           # a chain's span at pace 1
    free = rng.random(L).tolist()                 # the accumulators' phases
    c = 0
    for e, mode in enumerate(modes):
        active = (sorted(rng.choice(L, size=int(rng.integers(1, L)), replace=False).tolist())
                  if mode == "some" and L > 1 else list(range(L)))
        while c < len(cuts) and chain_episode[c] == e:
            a = min(active, key=lambda k: free[k])
            acc_of[c] = a
            pace_of[c] = paces[e, a]
            begin[c] = free[a]
            free[a] += sums[c] * paces[e, a]
            c += 1
        if len(active) < L:                        # the idle ones wait for the episode
            end = max(free[k] for k in active)
            for k in range(L):
                if k not in active:
                    free[k] = max(free[k], end)
    offsets = np.cumsum(gaps)
    offsets -= np.repeat(offsets[starts] - gaps[starts], lengths)  # from each chain's start
    times = begin[chain_of] + offsets * pace_of[chain_of]
    acc_step = acc_of[chain_of]
    order = np.lexsort((np.arange(n), times))
    acc_id = acc_step[order]
    # Each accumulator's chains follow one another on its timeline in stream order, so its
    # steps in time order are its base steps in stream order; set them so, exactly, at the
    # positions it holds (whatever rounding did to times a hair apart).
    for a in range(L):
        order[acc_id == a] = np.flatnonzero(acc_step == a)
    return _assemble(s, L, order, acc_id)


def is_interleaved(s):
    """Whether ``s`` is an interleaved stream (of this module)."""
    return isinstance(s, dict) and "order" in s and "base" in s


def stream_module(unit, s=None):
    """The module with ``pack_payloads(manifest, unit, residual, s)`` and
    ``expected_words(unit, residual, s, **accum)`` for dot unit ``unit``'s stream ``s``:
    this module for an interleaved stream, else :mod:`sim.stimulus.multi` for a
    multi-format unit, else :mod:`sim.stimulus.payload`."""
    if is_interleaved(s):
        import sys
        return sys.modules[__name__]
    if unit_spec(unit).formats:
        from . import multi
        return multi
    from . import payload
    return payload


def pack_payloads(manifest, unit, residual, s):
    """Packed ``i__payload`` words of interleaved stream ``s`` (uint8 (S, bytes)): the base
    stream packed by its own packer at the manifest's offsets (without a manifest: those of
    ``hif4spec.payload_fields`` with the stream's interleave), the rows in interleaved
    order, each step's accumulator in ``acc_id``."""
    L = s["interleave"]
    if manifest is None:
        fields, offset = {}, 0
        for name, bits in payload_fields(unit, residual, interleave=L):
            fields[name] = {"offset": offset, "width": bits}
            offset += bits
    else:
        fields = manifest["payload"]
    field = fields.get(ACC_FIELD)
    if field is None or field["width"] < acc_id_bits(L):
        have = "no" if field is None else f"a {field['width']}-bit"
        raise ValueError(f"a stream interleaved over {L} accumulators needs a "
                         f"{acc_id_bits(L)}-bit {ACC_FIELD} field; the payload has {have} one")
    rows = stream_module(unit).pack_payloads({"payload": fields}, unit, residual, s["base"])
    out = rows[s["order"]]
    acc = np.asarray(s["acc_id"], dtype=np.uint8)
    if len(acc) and int(acc.max()) >= L:
        raise ValueError(f"an accumulator beyond the unit's {L}")
    for bit in range(field["width"]):
        pos = field["offset"] + bit
        out[:, pos // 8] |= (((acc >> bit) & 1) << (pos % 8)).astype(np.uint8)
    return out


def expected_words(unit, residual, s, **accum):
    """``(words, steps)``: the golden words the unit emits for interleaved stream ``s``:
    the base stream's words (its module's ``expected_words``, hand-derived words checked),
    ordered by the interleaved positions of their ``last`` steps, and those positions."""
    words, base_steps = stream_module(unit).expected_words(unit, residual, s["base"], **accum)
    where = np.empty(len(s["order"]), dtype=np.intp)
    where[s["order"]] = np.arange(len(s["order"]))
    steps = where[np.asarray(base_steps, dtype=np.intp)]
    pick = np.argsort(steps, kind="stable")
    return np.asarray(words)[pick], steps[pick]


def step_inputs(s, k):
    """``(accumulator, base stream, base step)`` of interleaved position ``k``."""
    return int(s["acc_id"][k]), s["base"], int(s["order"][k])
