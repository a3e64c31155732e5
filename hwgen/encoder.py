"""Encoder units: BF16 activations in, the packed operand step (and residual step) out.

An encoder wraps a quantizer core (:mod:`hwgen.core`; :mod:`hwgen.quant_hif4`,
:mod:`hwgen.quant_mxnv`: a chain of combinational stages over one whole 64-element group) in
the stream conventions of the dot-product units, on the same base (:class:`hwgen.unit.Unit`:
ports ``i`` / ``o`` (valid/ready streams), ``residual``, ``stages`` and ``lanes`` checked
against the registry, kind ``"encoder"``), with a manifest (:mod:`hwgen.manifest`) whose
``timing.pipeline`` the cycle-level simulator runs.

Payloads (:func:`hif4spec.payload_fields`, :func:`hif4spec.output_fields`):

* input, one beat per transfer: ``x``, ``lanes`` BF16 codes (element j at bits
  ``[16 j, 16 j + 16)``); beat b of a group carries group elements
  ``[b lanes, (b + 1) lanes)``; the NVFP4 encoder also takes ``t``, the FP32 tensor scale T
  (raw bits), with the group's last beat;
* output, one transfer per group: ``q``, the packed operand step of the format, then ``r``,
  the packed residual step (``residual`` "2:4": the packed 2:4 block(s); "dense": a second
  operand step; "none": no ``r``), exactly the ``a`` and ``r`` fields of the format's
  dot-unit step, so an encoder's output feeds a dot unit.

Pipeline plan, input to output (timing rules: :mod:`hwgen.stream`): ``beat_reg``, a
register on the input beats (``stages == 4`` when the core has fewer than three stages);
``deserializer`` (:class:`hwgen.stream.Deserializer`, ``n = 64 // lanes`` beats); the core's
stages as :class:`hwgen.stream.Map` stages, with a register after the first
(``stages >= 3``) and after the second (``stages == 4``, when the core has three stages or
more); ``out_reg`` (``stages >= 2``). So ``stages - 1`` registers lie on the path of a
group's last beat: ``latency = stages - 1`` (``stages == 1`` is combinational from the last
beat to ``o``), and ``ii = n`` cycles per group.

Known limitation: the core is group-parallel, whatever ``lanes``: ``lanes`` changes only
the input width and the deserializer (which holds the first ``n - 1`` beats in registers),
not the quantizer datapath, so a narrow encoder is not smaller than a wide one.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal, Shape
from amaranth.lib import data, wiring

from hif4spec import payload_fields

from .parts import entries, probe
from .stream import Deserializer, Map, Register, chain
from .unit import Unit

__all__ = ["EncoderUnit", "HiF4QuantUnit", "MXFP4QuantUnit", "NVFP4QuantUnit"]


def _layout(fields):
    return data.StructLayout(dict(fields))


def _wrap(core_stage):
    """``Map`` build function running one combinational core stage."""
    def build(m, i_payload, o_payload):
        m.submodules.core = core_stage
        m.d.comb += [core_stage.i.eq(i_payload), o_payload.eq(core_stage.o)]
    return build


class EncoderUnit(Unit):
    """Base of the HiF4, MXFP4 and NVFP4 encoder units.

    Parameters (keyword-only): those of :class:`hwgen.unit.Unit` (no ``accum``).
    ``residual`` is the residual step emitted beside the operand step; ``stages - 1``
    pipeline registers lie on the path of a group's last beat (module docstring); ``lanes``
    BF16 elements make one input beat, so a group takes ``64 // lanes`` beats.

    Members
    -------
    i : In(stream.Signature(payload_layout))
        Beats: ``x`` (and ``t`` for NVFP4).
    o : Out(stream.Signature(output_layout))
        Groups: ``q`` (and ``r``).

    A format's unit sets ``unit`` (its registry name) and implements ``_core()``, returning
    a fresh quantizer core object whose ``stages`` is the list of ``(name, component)``
    (combinational, ports ``i`` / ``o`` of ``StructLayout`` views, each with ``parts()``).
    """

    def _payload_layout(self):
        core = self._core_stages()
        first, last = core[0][1], core[-1][1]
        self._group = first.i.shape()
        if Shape.cast(last.o.shape()).width != Shape.cast(self._output).width:
            raise AssertionError(f"{self.unit} core output {last.o.shape()} is not "
                                 f"{self._output}")
        for (name, fld), (oname, ofld) in zip(self._output, last.o.shape()):
            assert (name, fld.offset, fld.width) == (oname, ofld.offset, ofld.width), name
        return _layout(payload_fields(self.unit, self._residual, self._lanes))

    def _core(self):
        raise NotImplementedError

    def _core_stages(self):
        return [(name, probe(stage)) for name, stage in self._core().stages]

    @property
    def latency(self):
        """Rising edges from the transfer of a group's last beat to ``o.valid``."""
        return self._stages - 1

    @property
    def structure(self):
        """What the unit is built from, stage by stage (the manifest's ``structure``): the
        deserializer's beat registers and counter in ``deserializer``, each core stage's
        parts in a block of its name, each register's in ``pipe.<stage>``."""
        out = []
        core = dict(self._core_stages())
        for name, desc, make in self._plan():
            kind = desc["kind"]
            if kind == Register.kind:
                out += entries(f"pipe.{name}", probe(make()).parts())
            elif kind == Deserializer.kind:
                out += entries(name, probe(make()).parts())
            else:
                out += entries(name, core[name].parts())
        return out

    def _plan(self, core=None):
        """``[(name, description, factory)]`` of the stream stages, input to output, around
        the core stages ``core`` (``[(name, component)]``; None: probed ones)."""
        if core is None:
            core = self._core_stages()
        register = {"kind": Register.kind}
        wanted = max(0, self._stages - 2)               # registers after core stages 0, 1
        inside = [b for b in range(wanted) if b < len(core) - 1]
        extra = wanted - len(inside)                    # those the core has no room for
        n = self.ii
        plan = []
        if extra >= 1:
            plan.append(("beat_reg", register, lambda: Register(self._payload)))
        plan.append(("deserializer", {"kind": Deserializer.kind, "beats": n},
                     lambda: Deserializer(self._payload, self._group, beats=n, wide=("x",),
                                          name="deserializer")))
        if extra >= 2:
            plan.append(("group_reg", register, lambda: Register(self._group)))
        for b, (name, stage) in enumerate(core):
            lay_in, lay_out = stage.i.shape(), stage.o.shape()
            plan.append((name, {"kind": Map.kind},
                         lambda s=stage, a=lay_in, z=lay_out, nm=name:
                         Map(a, z, _wrap(s), name=nm)))
            if b in inside:
                plan.append((f"{name}_reg", register, lambda z=lay_out: Register(z)))
        if self._stages >= 2:
            plan.append(("out_reg", register, lambda: Register(self._output)))
        return plan

    @property
    def stateless(self):
        """True when the unit holds no state (``stages == 1`` and one beat per group)."""
        return self._stages == 1 and self.ii == 1

    def verilog_ports(self):
        """The Verilog ports in order when the unit holds no state (``clk`` and ``rst`` are
        then unused inputs, kept so that every unit has the same ports); None otherwise
        (the ports of the signature, and ``clk``/``rst`` of the registers)."""
        if not self.stateless:
            return None
        return [ClockSignal("sync"), ResetSignal("sync"), self.i.valid, self.i.ready,
                self.i.payload.as_value(), self.o.valid, self.o.ready,
                self.o.payload.as_value()]

    def elaborate(self, platform):
        m = Module()
        if self.stateless:
            m.domains.sync = ClockDomain("sync")
        core = list(self._core().stages)
        first, last = chain(m, [(name, make()) for name, _, make in self._plan(core)])
        wiring.connect(m, wiring.flipped(self.i), first.i)
        m.d.comb += [self.o.valid.eq(last.o.valid), last.o.ready.eq(self.o.ready),
                     self.o.payload.eq(last.o.payload)]
        return m


class HiF4QuantUnit(EncoderUnit):
    """BF16 -> HiF4 encoder (``hif4_quant``): the packed 288-bit HiF4 step, with the 2:4 or
    dense Rollout-ResQ residual step (:class:`hwgen.quant_hif4.HiF4Quantizer`)."""

    unit = "hif4_quant"

    def _core(self):
        from .quant_hif4 import HiF4Quantizer
        return HiF4Quantizer(residual=self._residual)


class MXFP4QuantUnit(EncoderUnit):
    """BF16 -> MXFP4 encoder (``mxfp4_quant``): two packed MXFP4 blocks, with the 2:4
    (``docs/mxfp4_residual.md``) or dense residual step
    (:class:`hwgen.quant_mxnv.MXFP4Quantizer`)."""

    unit = "mxfp4_quant"

    def _core(self):
        from .quant_mxnv import MXFP4Quantizer
        return MXFP4Quantizer(residual=self._residual)


class NVFP4QuantUnit(EncoderUnit):
    """BF16 -> NVFP4 encoder (``nvfp4_quant``): four packed NVFP4 blocks for the tensor
    scale T given with each group's last beat (:class:`hwgen.quant_mxnv.NVFP4Quantizer`)."""

    unit = "nvfp4_quant"

    def _core(self):
        from .quant_mxnv import NVFP4Quantizer
        return NVFP4Quantizer()
