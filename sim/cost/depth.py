"""Logic depth of a dot unit, stage by stage: the accumulator loop apart from the
feed-forward path.

The unit's flat ``ltp -noff`` (:mod:`sim.cost.synth`) is the longest register-to-register
path, wherever it is. Pipelining can shorten every path but one: the accumulator's, from its
register back to it (a step's sum needs the previous step's rounded word). This module
synthesizes each stage of the manifest's ``timing.pipeline`` alone (Verilog module
``<module>.<stage>``, the same gate flow as the unit's up to ``opt_clean``) and measures,
in cells on the longest path (flip-flops excluded):

* ``loop``: the accumulator stage's register-to-register paths: its cells both fed by a
  flip-flop and feeding one through combinational cells only (``%coe*`` / ``%cie*`` from
  the flip-flops' wires); in an interleaved unit's ring (``hwgen.ring``) these are the
  paths between its L register stages;
* ``in``: the accumulator stage's paths from its input (the registered terms) into its
  register;
* ``path`` of every other combinational stage (``comb``, ``sequencer``): its ``ltp -noff``.

``feed_forward`` is the longest path outside the loop: the largest of ``in`` and the other
stages' paths. Each stage also gets its area alone (``nand2``, ``stat -tech cmos``: the
front end / terms / accumulator breakdown). Register stages have no logic and are left out. Results are cached under
``build/synth/`` like the synthesis runs, keyed by the Verilog text, the stage and the flow.
"""

import json
import os
import re
import tempfile
from pathlib import Path

from . import synth

__all__ = ["DEPTH_FLOW", "stage_depths", "unit_depths"]

#: The synthesis flow of :data:`sim.cost.synth.FLOW` up to ``opt_clean``, then the path
#: reports (one ``ltp`` per selection).
DEPTH_FLOW = ("read_verilog {src}; synth -flatten -top {top}; dfflegalize -cell $_DFF_P_ 01; "
              "abc -g cmos2; opt_clean")
# The combinational cells fed by flip-flop outputs (fo) and feeding flip-flop inputs (fi).
_CONES = ("select -set ff t:$_DFF_*\n"
          "select -set fo @ff %co1 @ff %d %coe*\n"
          "select -set fi @ff %ci1 @ff %d %cie*\n")
_REPORTS = {
    "path": "",
    "loop": _CONES + "select -set loop @fo @fi %i\n",
    "in": _CONES + "select -set in i:* %coe* @fi %i\n",
}
_SEL = {"path": "", "loop": " @loop", "in": " @in"}
#: Logic-free stages (no path of their own).
_NO_LOGIC = ("register", "deserializer")


def _script(top, reports):
    lines = [s.strip() for s in DEPTH_FLOW.format(src="M.v", top=top).split(";")]
    for name in reports:
        lines += _REPORTS[name].splitlines()
        lines.append(f"tee -q -o {name}.txt ltp -noff{_SEL[name]}")
    lines.append("tee -q -o stat.txt stat -tech cmos")
    return "\n".join(lines) + "\n"


def stage_depths(text, top, reports, *, cache_dir=synth.DEFAULT_CACHE, timeout=3600,
                 backend=None):
    """``{report: cells}`` of the Verilog module ``top`` in ``text`` for each name of
    ``reports`` (``"path"``, ``"loop"``, ``"in"``; see the module docstring; a selection
    without cells gives 0), and ``"nand2"``: the module's area in NAND2 equivalents."""
    backend = backend or synth.default_backend()
    reports = tuple(reports)
    script = _script(top, reports)
    key = synth.verilog_sha256("|".join(("depth", synth.verilog_sha256(text), script)))
    cached = Path(cache_dir, f"{key}.depth.json") if cache_dir is not None else None
    if cached is not None and cached.is_file():
        return json.loads(cached.read_text())
    with tempfile.TemporaryDirectory(prefix="hif4-depth-") as work:
        Path(work, "M.v").write_text(text)
        Path(work, "flow.ys").write_text(script)
        synth._run_yosys("flow.ys", work, timeout, backend)
        out = {name: _ltp_or_zero(Path(work, f"{name}.txt").read_text()) for name in reports}
        stat = synth.parse_stat(Path(work, "stat.txt").read_text())
        out["nand2"] = stat[top]["transistors"] / 4
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, sort_keys=True))
        os.replace(tmp, cached)
    return out


def _ltp_or_zero(report):
    if not re.search(r"Longest topological path", report):
        return 0                        # an empty selection: no path
    return synth.parse_ltp(report)


def unit_depths(text, manifest, *, progress=None, **kwargs):
    """The depths of a generated dot unit (its Verilog ``text`` and manifest):
    ``{"loop", "feed_forward", "stages": {stage: {report: cells}}}``. ``progress`` is
    called with each stage's Verilog module name before it is synthesized."""
    if manifest.get("kind") != "dot":
        raise ValueError(f"{manifest.get('module')}: depths are measured for dot units only")
    stages = {}
    for st in manifest["timing"]["pipeline"]:
        if st["kind"] in _NO_LOGIC:
            continue
        top = f"{manifest['module']}.{st['stage']}"
        if progress:
            progress(top)
        reports = ("loop", "in") if st["kind"] in ("accumulator", "ring") else ("path",)
        stages[st["stage"]] = stage_depths(text, top, reports, **kwargs)
    loop = max(d.get("loop", 0) for d in stages.values())
    ff = max(d.get("in", d.get("path", 0)) for d in stages.values())
    return {"loop": loop, "feed_forward": ff, "stages": stages}
