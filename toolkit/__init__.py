"""toolkit: a compiler-and-exploration toolkit for the Graphcore IPU21 tile machine.

Every compiler stage is a pure function returning polars DataFrames; see
``toolkit.compile`` for the whole pipeline.
"""

from toolkit import costs, report, target
from toolkit.artifacts import load_case as load
from toolkit.calibrate import Calibration, calibrate  # the function shadows its package, as toolkit.sweep does
from toolkit.check import CheckResult, check  # the function shadows its module as an attribute: toolkit.check(c)
from toolkit.errors import FormatError, InfeasibleError, InvalidIRError, ModelError, OptionError, ToolkitError
from toolkit.graph import Graph, Workload, build_graph, workloads
from toolkit.options import Options
from toolkit.pipeline import Compilation, compile
from toolkit.simulate import roofline, simulate
from toolkit.sweep import load_sweep, sweep  # toolkit.sweep is the function, as toolkit.check is
from toolkit.target import Target, ipu21, load_target

__version__ = "0.2.0"

# the public boundary: every argument is checked against its annotation before any work, so a wrong-typed
# call raises OptionError naming the argument (toolkit.fields.typed), not an error from deep inside
from toolkit.exchange import Exchange as _Exchange
from toolkit.fields import typed as _typed
from toolkit.placement import Placement as _Placement
from toolkit.schedule import Schedule as _Schedule

build_graph = _typed(build_graph)
calibrate = _typed(calibrate)
check = _typed(check, schedule=_Schedule | None, placement=_Placement | None, exchange=_Exchange | None)
compile = _typed(compile, target=Target | str | None)
ipu21 = _typed(ipu21)
load = _typed(load)
load_sweep = _typed(load_sweep)
load_target = _typed(load_target)
roofline = _typed(roofline)
simulate = _typed(simulate)
sweep = _typed(sweep)
workloads = _typed(workloads)
del _typed, _Exchange, _Placement, _Schedule

__all__ = [
    "Calibration",
    "CheckResult",
    "Compilation",
    "FormatError",
    "Graph",
    "InfeasibleError",
    "InvalidIRError",
    "ModelError",
    "OptionError",
    "Options",
    "Target",
    "ToolkitError",
    "Workload",
    "__version__",
    "build_graph",
    "calibrate",
    "check",
    "compile",
    "costs",
    "ipu21",
    "load",
    "load_sweep",
    "load_target",
    "report",
    "roofline",
    "simulate",
    "sweep",
    "target",
    "workloads",
]
