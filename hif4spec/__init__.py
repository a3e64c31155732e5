"""The design space of the toolkit, stated once (standard library only; no NumPy).

- :mod:`hif4spec.formats`: element types, formats, packed block layouts (``docs/formats.md``,
  ``docs/mxfp4_residual.md``);
- :mod:`hif4spec.steps`: the packed 64-element step of every operand and residual;
- :mod:`hif4spec.units`: the unit registry (residual modes, stages, lanes, defaults, the
  standard set, module names, payload fields).

The golden model (``sim.formats``, ``sim.dot``), the generators (``hwgen``), the benches,
the cost models and the CLI derive every mode list, range, width and offset from here.
"""

from .formats import *  # noqa: F401,F403
from .formats import __all__ as _formats_all
from .steps import *  # noqa: F401,F403
from .steps import __all__ as _steps_all
from .units import *  # noqa: F401,F403
from .units import __all__ as _units_all

__version__ = "0.1.0"
__all__ = [*_formats_all, *_steps_all, *_units_all, "__version__"]
