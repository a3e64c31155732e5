"""Does an alignment shifter cost more when its data arrives late, in the same cone?

A single-stage unit (``stages=1``) feeds each term's significand to its alignment shifter
straight from the front end's adder trees, in the same clock cycle; with two or more stages
a pipeline register sits in between. This script synthesizes, with the fixed flow of
:data:`sim.cost.synth.FLOW`, two terms that are each a sum of ``n`` operands shifted into a
``W``-bit window and added:

* ``comb``: tree -> shift -> window add -> register (the shifters' data arrives late);
* ``reg``:  tree -> register -> shift -> window add -> register.

It prints the area the ``comb`` version spends beyond the ``reg`` version (less the extra
flip-flops of ``reg``) as a multiple of the model's cost of the two shifters. It tests one
candidate cause of the single-stage excess that the area model's ``comb_align`` factor
(``benchmarks/fit_area_model.py``) calibrates on the units themselves: it comes out at
0.06x-0.3x, a small part of the about 1x seen in single-stage MXFP4 units.
Run: ``python benchmarks/late_shift.py`` (about a minute; cached).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim import area_model  # noqa: E402
from sim.cost import synth  # noqa: E402

#: (operands per tree, operand bits, shift range, window bits)
CASES = [(2, 12, 128, 280), (8, 12, 128, 280), (32, 12, 128, 280), (32, 12, 512, 525)]
TERMS = 2


def late_shift_verilog(n, w, r, window, registered):
    """Verilog of the two-term test circuit (module ``late_shift``)."""
    s = w + (n - 1).bit_length()            # tree output bits
    e = (r - 1).bit_length()
    ports = [f"input signed [{w - 1}:0] x{t}_{i}" for t in range(TERMS) for i in range(n)]
    ports += [f"input [{e - 1}:0] e{t}" for t in range(TERMS)]
    ports += ["input clk", f"output reg signed [{window - 1}:0] o"]
    body = []
    for t in range(TERMS):
        body.append(f"  wire signed [{s - 1}:0] s{t} = "
                    + " + ".join(f"x{t}_{i}" for i in range(n)) + ";")
        if registered:
            body.append(f"  reg signed [{s - 1}:0] d{t};")
            body.append(f"  always @(posedge clk) d{t} <= s{t};")
        else:
            body.append(f"  wire signed [{s - 1}:0] d{t} = s{t};")
        body.append(f"  wire signed [{window - 1}:0] a{t} = d{t};")
        body.append(f"  wire signed [{window - 1}:0] b{t} = a{t} << e{t};")
    body.append("  always @(posedge clk) o <= " + " + ".join(f"b{t}" for t in range(TERMS))
                + ";")
    return ("module late_shift(" + ", ".join(ports) + ");\n" + "\n".join(body)
            + "\nendmodule\n"), s


def main():
    print(f"{'operands':>8s} {'range':>5s} {'window':>6s} {'comb':>8s} {'reg - ffs':>9s} "
          f"{'extra':>7s} {'shifters':>8s} {'extra/shifters':>14s}")
    ffs_cost = area_model.component_cost("regp", (1,))     # plain flip-flops
    for n, w, r, window in CASES:
        area = {}
        for registered in (False, True):
            text, s = late_shift_verilog(n, w, r, window, registered)
            area[registered] = synth.synthesize_text(text, "late_shift", timeout=1800).nand2
        ffs = TERMS * s * ffs_cost
        extra = area[False] - (area[True] - ffs)
        shifters = TERMS * area_model.component_cost("wshl", (s, r, window))
        print(f"{n:8d} {r:5d} {window:6d} {area[False]:8.0f} {area[True] - ffs:9.0f} "
              f"{extra:7.0f} {shifters:8.0f} {extra / shifters:14.2f}")


if __name__ == "__main__":
    main()
