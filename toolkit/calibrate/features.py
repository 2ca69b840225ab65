"""Per-program feature counts: how many simulated cycles each fitted cost constant contributes.

A measured program is compiled once. Its chosen layout (the plan the search or
the pinned options gave) is then re-scheduled, re-lowered and re-simulated with
one cost constant moved down and up by a step (everything else as compiled),
so ``feature_i = d simulated cycles / d theta_i`` is the count of that
constant's uses on the program's critical path: AMP calls, coefficient panels,
supervisor launches, reductions, local copy calls, syncs, exchange phases and
receive cutovers, taken from the schedule's commands and phases as each
constant enters their ``est_cycles`` and the exchange horizon. The simulated
cycles are piecewise linear in the constants (a phase lasts as long as its
slowest tile), so a central difference gives the slope around the current
values; :func:`toolkit.calibrate.verify` recompiles with fitted constants and
reports how far that linearization is from the real recompile.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from toolkit.target import Target

#: step of the central difference, as a fraction of the constant's current value (at least 1 cycle)
STEP = 0.15


#: constants the exchange horizon and the simulator's barriers read (the schedule's commands do not)
SIMULATOR_CONSTANTS = ("sync_cycles", "exchange_phase_cycles", "exchange_arrival_cycles",
                       "exchange_arrival_row_cycles", "exchange_send_cycles", "exchange_receive_cycles",
                       "exchange_reset_cycles", "exchange_run_cycles")


def rescheduled_cycles(c: Any, target: Target, name: str | None = None) -> int:
    """Simulated, renderer-cropped cycles of compilation ``c``'s chosen layout on ``target``. A kernel constant
    (``name`` not in SIMULATOR_CONSTANTS) re-schedules the layout (its commands' ``est_cycles``) and reuses
    the compiled exchange lowering when the transfers are unchanged (lowered again otherwise); an exchange or
    sync constant only re-simulates. The layout search and placement are not redone."""
    from toolkit.exchange import lower_exchanges
    from toolkit.profile import crop
    from toolkit.schedule import schedule
    from toolkit.schedule.lineage import schedule_fingerprint
    from toolkit.simulate import simulate
    from toolkit.tiles import lower_tiles
    if name in SIMULATOR_CONSTANTS:
        return int(crop(simulate(c.schedule, c.exchange, c.tiles, target)).cropped_cycles)
    sched = schedule(c.layout.graph, c.layout.chosen, target, tiles=c.layout.tiles)
    same = sched.transfers.equals(c.schedule.transfers)
    # the same transfers lower to the same exchange: it is this schedule's too (its lineage says so)
    ex = (dataclasses.replace(c.exchange, schedule_fingerprint=schedule_fingerprint(sched)) if same
          else lower_exchanges(sched.transfers, target, slices=sched.slices, segments=sched.segments))
    return int(crop(simulate(sched, ex, lower_tiles(sched), target)).cropped_cycles)


def program_features(c: Any, parameters: tuple[str, ...]) -> dict[str, float]:
    """``{"base": simulated cycles at the compiled constants, <parameter>: cycles per unit of it, ...}`` of
    compilation ``c`` (its own target: the kernel build it was compiled with)."""
    target = c.target
    base = rescheduled_cycles(c, target, "sync_cycles")
    out: dict[str, float] = {"base": float(base)}
    for name in parameters:
        value = getattr(target.costs, name)
        step = max(1, math.ceil(STEP * value))
        lo = max(0, value - step)
        hi = value + step
        up = rescheduled_cycles(c, target.replace(costs={name: hi}), name)
        down = rescheduled_cycles(c, target.replace(costs={name: lo}), name)
        out[name] = (up - down) / (hi - lo)
    return out
