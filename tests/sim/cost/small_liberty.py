"""A small Liberty library the tests write themselves: no cell has a Nangate name.

Cells: ``iv`` (inverter), ``bf`` (buffer), ``nd`` (2-input NAND), ``nr`` (2-input NOR),
``xo`` (2-input XOR), ``ao`` (AND-OR ``(A & B) | C``) and ``fl`` (rising-edge D flip-flop
with outputs ``Q`` and ``QB``). Delay tables are 2 x 2 (input slew x output load); every
cell has leakage and internal power. Options drop parts to make the libraries that the flow
must refuse.
"""

from pathlib import Path

__all__ = ["small_liberty", "write_small_liberty"]

_HEAD = """library (tinylib) {
  delay_model : table_lookup;
  time_unit : "1ps";
  voltage_unit : "1V";
  current_unit : "1mA";
  leakage_power_unit : "1nW";
  capacitive_load_unit (1, ff);
  nom_voltage : 0.9;
  nom_temperature : 25.0;
  nom_process : 1.0;
  default_wire_load : "wl";
  wire_load ("wl") {
    capacitance : 0.2;
    resistance : 0.0;
    slope : 2.0;
    fanout_length (1, 1.0);
    fanout_length (2, 2.0);
  }
  lu_table_template (t22) {
    variable_1 : input_net_transition;
    variable_2 : total_output_net_capacitance;
    index_1 ("5, 50");
    index_2 ("1, 20");
  }
  lu_table_template (c22) {
    variable_1 : constrained_pin_transition;
    variable_2 : related_pin_transition;
    index_1 ("5, 50");
    index_2 ("5, 50");
  }
  power_lut_template (p22) {
    variable_1 : input_transition_time;
    variable_2 : total_output_net_capacitance;
    index_1 ("5, 50");
    index_2 ("1, 20");
  }
  power_lut_template (p2) {
    variable_1 : input_transition_time;
    index_1 ("5, 50");
  }
"""


def _arc(related, sense, base, timing=True):
    if not timing:
        return ""
    d0, d1 = base, base * 4
    return f"""      timing () {{
        related_pin : "{related}";
        timing_sense : {sense};
        cell_rise (t22) {{ values ("{d0}, {d1}", "{d0 + 10}, {d1 + 10}"); }}
        cell_fall (t22) {{ values ("{d0 - 2}, {d1 - 4}", "{d0 + 8}, {d1 + 6}"); }}
        rise_transition (t22) {{ values ("8, 60", "12, 64"); }}
        fall_transition (t22) {{ values ("7, 50", "11, 54"); }}
      }}
"""


def _power(related):
    return f"""      internal_power () {{
        related_pin : "{related}";
        rise_power (p22) {{ values ("0.5, 0.6", "0.7, 0.8"); }}
        fall_power (p22) {{ values ("0.4, 0.5", "0.6, 0.7"); }}
      }}
"""


def _comb(name, area, inputs, function, sense, base, timing):
    pins = "".join(f"""    pin ({p}) {{ direction : input; capacitance : {1.0 + 0.5 * i}; }}
""" for i, p in enumerate(inputs))
    arcs = "".join(_arc(p, sense, base, timing) + _power(p) for p in inputs)
    return f"""  cell ({name}) {{
    area : {area};
    cell_leakage_power : {area * 10};
{pins}    pin (Y) {{
      direction : output;
      function : "{function}";
{arcs}    }}
  }}
"""


def small_liberty(*, timing=True, flop=True, inverter=True):
    """The library's text; ``timing=False`` drops every delay table, ``flop=False`` the
    flip-flop, ``inverter=False`` the inverter and the buffer (left: NAND, NOR, ...)."""
    cells = []
    if inverter:
        cells.append(_comb("iv", 1.0, ["A"], "!A", "negative_unate", 10, timing))
        cells.append(_comb("bf", 1.5, ["A"], "A", "positive_unate", 18, timing))
    cells.append(_comb("nd", 1.5, ["A", "B"], "!(A & B)", "negative_unate", 14, timing))
    cells.append(_comb("nr", 1.5, ["A", "B"], "!(A | B)", "negative_unate", 16, timing))
    cells.append(_comb("xo", 3.0, ["A", "B"], "(A ^ B)", "non_unate", 25, timing))
    cells.append(_comb("ao", 2.5, ["A", "B", "C"], "((A & B) | C)", "positive_unate", 22,
                       timing))
    if flop:
        ck = "" if not timing else """      timing () {
        related_pin : "CK";
        timing_type : rising_edge;
        cell_rise (t22) { values ("40, 80", "45, 85"); }
        cell_fall (t22) { values ("42, 82", "47, 87"); }
        rise_transition (t22) { values ("9, 55", "9, 55"); }
        fall_transition (t22) { values ("8, 50", "8, 50"); }
      }
"""
        setup = "" if not timing else """      timing () {
        related_pin : "CK";
        timing_type : setup_rising;
        rise_constraint (c22) { values ("20, 25", "30, 35"); }
        fall_constraint (c22) { values ("22, 27", "32, 37"); }
      }
"""
        cells.append(f"""  cell (fl) {{
    area : 6.0;
    cell_leakage_power : 40;
    ff ("IQ", "IQN") {{ next_state : "D"; clocked_on : "CK"; }}
    pin (D) {{
      direction : input;
      capacitance : 1.2;
{setup}      internal_power () {{
        rise_power (p2) {{ values ("0.2, 0.3"); }}
        fall_power (p2) {{ values ("0.1, 0.2"); }}
      }}
    }}
    pin (CK) {{
      direction : input;
      clock : true;
      capacitance : 1.1;
      internal_power () {{
        rise_power (p2) {{ values ("1.0, 1.2"); }}
        fall_power (p2) {{ values ("0.9, 1.1"); }}
      }}
    }}
    pin (Q) {{
      direction : output;
      function : "IQ";
{ck}{_power("CK")}    }}
    pin (QB) {{
      direction : output;
      function : "IQN";
{ck}{_power("CK")}    }}
  }}
""")
    return _HEAD + "".join(cells) + "}\n"


def write_small_liberty(path, **options):
    """Write :func:`small_liberty` to ``path``; returns the path."""
    path = Path(path)
    path.write_text(small_liberty(**options))
    return path
