"""The JSON manifest written beside every generated unit (``<module>.json``).

Keys (sorted, 2-space indent, trailing newline; deterministic):

``module``        Verilog module name.
``unit``          unit name (``hif4``, ``mxfp4``, ``nvfp4``; the encoders ``hif4_quant``,
                  ``mxfp4_quant``, ``nvfp4_quant``).
``kind``          ``"dot"`` or ``"encoder"`` (``hif4spec.KINDS``).
``parameters``    ``{"residual", "stages", "lanes"}`` and, for a dot unit, ``"accum"`` (its
                  accumulator back end, ``hif4spec.ACCUMS``) and, where it is not 1,
                  ``"interleave"`` (its accumulators, ``hif4spec.INTERLEAVES``).
``ports``         ``[{"name", "direction", "width"}]`` in Verilog port order
                  (``clk``, ``rst``, ``i__valid``, ``i__ready``, ``i__payload``,
                  ``o__valid``, ``o__ready``, ``o__payload``).
``formats``       a multi-format unit's formats (``hif4spec.UnitSpec.formats``): the payload's
                  ``fmt`` field holds a step's format's index in this list (other units
                  have no such key).
``payload``       ``{field: {"offset", "width"}}`` of ``i__payload``, low bits first
                  (``hif4spec.payload_fields``): a dot unit's step (``a``, ``w``, ``r`` if
                  present, ``acc_id`` of an interleaved unit: the step's accumulator,
                  ``first``, ``last``); an encoder's beat (``x``: ``lanes`` BF16
                  codes; ``t``: the NVFP4 tensor scale, taken with a group's last beat).
``output``        ``{field: {"offset", "width"}}`` of ``o__payload``, low bits first
                  (``hif4spec.output_fields``): ``acc`` (the FP32 word) of a dot unit; ``q``
                  (the packed operand step) and ``r`` (the residual step, if any) of an
                  encoder.
``latency``       rising edges from the input transfer of a ``last`` step (an encoder: of a
                  group's last beat) to the cycle where ``o__valid`` is high with the output
                  always ready (an interleaved unit: the least, a step whose accumulator's
                  turn has come).
``ii``            initiation interval: cycles per step, or per group (``64 // lanes``).
``timing``        ``{"pipeline": [stage, ...], "rules": str}``: the chain of stream stages
                  from input to output, each ``{"kind": "register" | "comb" | "sequencer" |
                  "deserializer" | "accumulator" | "ring", ...}`` with the exact per-kind
                  rules in ``rules`` (the text of ``hwgen.stream``'s and ``hwgen.ring``'s
                  timing sections; the ring's only in an interleaved unit's). A ``ring``
                  stage also lists ``interleave`` (L), ``prep`` (P) and the adder's blocks
                  in each of its stages: ``prep_stages`` (P, ahead of the accumulator's
                  join) and ``loop_stages`` (L), and ``cut_registers``, the names of the
                  registers between them (``<name>_s<k>``: a value as stage ``k`` reads
                  it, for timing a netlist per stage). A cycle model that simulates this chain
                  reproduces the unit's handshakes exactly.
``structure``     what the unit is built from, the area model's one input
                  (:mod:`sim.area_model`): ``[{"block", "family", "params", "count"}]``,
                  ``count`` copies of primitive ``family(params)`` (the families of
                  :mod:`hwgen.primitives`) in sub-block ``block``, stage by stage as
                  :attr:`hwgen.unit.DotUnit.structure` collects them from the generator's
                  blocks (:mod:`hwgen.parts`): ``front`` (the front end's slice logic and
                  its sequencer), ``terms``, ``pipe.<register stage>`` (payload + valid
                  flops), ``accum.align``, ``accum.round``, ``accum.special``,
                  ``accum.reg`` (the bounded back end's own: ``accum.preadd``,
                  ``accum.pair``, ``accum.split``, ...). Accumulator logic that the step
                  feeds ahead of the loop (a term's alignment shifter; the bounded back
                  end's pre-add, pair, split and term decode) also has ``"term"`` (the
                  name of the term it forms or aligns). An encoder
                  (:attr:`hwgen.encoder.EncoderUnit.structure`) has ``deserializer``, one
                  block per quantizer core stage and ``pipe.<register stage>``.
"""

import json

from hif4spec import output_fields, unit_spec

from .ring import RING_RULES

__all__ = ["manifest", "manifest_text", "TIMING_RULES"]

TIMING_RULES = (
    "All state changes on the rising edge of clk; rst is synchronous. A transfer happens on "
    "an edge where valid and ready are both high. Stages, input to output: "
    "register: i.ready = !o.valid | o.ready; on a transfer in, the payload is loaded and "
    "o.valid <= 1, else if o.ready then o.valid <= 0. "
    "comb: o.valid = i.valid, i.ready = o.ready, no cycle. "
    "sequencer(n): a counter c (reset 0) increments on every edge with i.valid and c < n-1; "
    "at c = n-1, o.valid = i.valid and i.ready = o.ready, and the transfer resets c to 0; "
    "so a step takes n cycles and i.ready is low in its first n-1 cycles. "
    "deserializer(n) (beats = n): a counter c (reset 0) counts beats; while c < n-1, "
    "i.ready = 1 and a transfer registers the beat and increments c; at c = n-1, "
    "o.valid = i.valid, i.ready = o.ready, o.payload = the registered beats and the current "
    "one, and the transfer resets c to 0; n = 1 is comb. "
    "accumulator: i.ready = !o.valid | o.ready; on a transfer in, the accumulator register "
    "takes RNE_FP32(acc + step) and o.valid <= last; else if o.ready then o.valid <= 0; "
    "o.payload is the accumulator register."
)


def _output(unit):
    out, offset = {}, 0
    for name, bits in output_fields(unit.unit, unit.residual):
        out[name] = {"offset": offset, "width": bits}
        offset += bits
    return out


def _ports(unit):
    width = unit.payload_layout.size
    out_width = sum(f["width"] for f in _output(unit).values())
    return [
        {"name": "clk", "direction": "input", "width": 1},
        {"name": "rst", "direction": "input", "width": 1},
        {"name": "i__valid", "direction": "input", "width": 1},
        {"name": "i__ready", "direction": "output", "width": 1},
        {"name": "i__payload", "direction": "input", "width": width},
        {"name": "o__valid", "direction": "output", "width": 1},
        {"name": "o__ready", "direction": "input", "width": 1},
        {"name": "o__payload", "direction": "output", "width": out_width},
    ]


def _parameters(unit):
    out = {"residual": unit.residual, "stages": unit.stages, "lanes": unit.lanes}
    if unit_spec(unit.unit).kind == "dot":
        out["accum"] = unit.accum
        if unit.interleave != 1:
            out["interleave"] = unit.interleave
    return out


def manifest(unit):
    """The manifest of ``unit`` as a dict (see the module docstring)."""
    payload = {}
    for name, fld in unit.payload_layout:
        payload[name] = {"offset": fld.offset, "width": fld.width}
    formats = unit_spec(unit.unit).formats
    return {
        **({"formats": list(formats)} if formats else {}),
        "module": unit.module_name,
        "unit": unit.unit,
        "kind": unit_spec(unit.unit).kind,
        "parameters": _parameters(unit),
        "ports": _ports(unit),
        "payload": payload,
        "output": _output(unit),
        "latency": unit.latency,
        "ii": unit.ii,
        "timing": {"pipeline": unit.timing["pipeline"],
                   "rules": TIMING_RULES + (" " + RING_RULES if unit.interleave != 1
                                            else ""),
                   **{k: v for k, v in unit.timing.items() if k != "pipeline"}},
        "structure": unit.structure,
    }


def manifest_text(unit):
    """The manifest as deterministic JSON text."""
    return json.dumps(manifest(unit), indent=2, sort_keys=True) + "\n"
