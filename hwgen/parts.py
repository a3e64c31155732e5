"""What a generated block is built from, counted in primitive families.

Every hardware block of the generators reports its own contents with a ``parts()`` method:
a list of :class:`Part`, ``count`` copies of one primitive ``family(params)``. The families
and their parameters are those of :mod:`hwgen.primitives` (``mul``, ``smul``, ``smulx``,
``add``, ``tree``, ``shl``, ``wshl``, ``addn``, ``neg``, ``norm``, ``mux``, ``reg``, ``cmp``,
``e2m1dot``, ...; :data:`hwgen.primitives.FAMILIES`), whose synthesized areas calibrate the
area model by family name. A block counts what it
builds itself and asks its sub-blocks for theirs; :attr:`hwgen.unit.DotUnit.structure`
collects a unit's parts stage by stage into the manifest's ``structure`` section
(:mod:`hwgen.manifest`), the one input of :mod:`sim.area_model`.
"""

from dataclasses import dataclass, replace

__all__ = ["Part", "probe", "times", "within", "of_term", "entries"]


@dataclass(frozen=True)
class Part:
    """``count`` copies of primitive ``family(params)``.

    Attributes
    ----------
    family : str
        Primitive family (:data:`hwgen.primitives.FAMILIES`).
    params : tuple of int
        Its size parameters.
    count : int
        Number of copies.
    sub : str
        Sub-block of the reporting block it belongs to (``""``: the block itself), e.g.
        ``"align"`` inside the accumulator.
    term : str
        For accumulator logic that the step feeds before the accumulator loop (the full
        window's alignment shifter of a term; the bounded back end's pre-add, pair, split
        and term decode, which form and normalize the loop's one term): that term's name.
    """

    family: str
    params: tuple
    count: int = 1
    sub: str = ""
    term: str = ""


def probe(block):
    """``block``, built only to ask for its ``parts()`` and never elaborated; returned with
    Amaranth's warning about an unused elaboratable silenced."""
    block._MustUse__silence = True
    return block


def times(parts, k):
    """``parts`` of ``k`` copies of a block."""
    return [replace(p, count=p.count * k) for p in parts]


def within(sub, parts):
    """``parts`` of a sub-block ``sub`` (the reporting block's own parts)."""
    return [replace(p, sub=sub) for p in parts]


def of_term(term, parts):
    """``parts`` that form or align term ``term`` before the accumulator loop."""
    return [replace(p, term=term) for p in parts]


def entries(block, parts):
    """The manifest's ``structure`` entries of ``parts`` inside ``block`` (JSON-able)."""
    out = []
    for p in parts:
        entry = {"block": f"{block}.{p.sub}" if p.sub else block, "family": p.family,
                 "params": list(p.params), "count": p.count}
        if p.term:
            entry["term"] = p.term
        out.append(entry)
    return out
