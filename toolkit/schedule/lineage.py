"""What a stage result was computed from: the fingerprint of its schedule, recorded at creation and checked by
the stages that read several results together.

``exchange``, ``tiles`` and ``package`` each record ``schedule_fingerprint``, the :func:`schedule_fingerprint`
of the schedule they were lowered from (``None``: not recorded, e.g. a result built by hand or read from an
older case; it is not checked). :func:`check_lineage`, called by ``simulate``, ``check`` and ``size_package``,
refuses results of another schedule by name instead of returning a mixed program's samples or failing deep
inside with an IndexError. The fingerprint is cheap: the heights and integer column sums of four schedule
frames (no hashing of frames), which two schedules of the same program share and others practically never do.
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl

from toolkit.errors import OptionError

FRAMES = ("phases", "commands", "transfers", "objects")


def schedule_fingerprint(schedule: Any) -> str:
    """16 hex digits from the heights and integer column sums of the schedule's phases, commands, transfers
    and objects."""
    parts = []
    for name in FRAMES:
        df = getattr(schedule, name, None)
        if not isinstance(df, pl.DataFrame):   # a partial schedule (a test's namespace): what it has counts
            parts.append(f"{name}:-")
            continue
        ints = [c for c, t in df.schema.items() if t.is_integer()]
        sums = df.select(pl.col(ints).sum()).row(0) if ints and df.height else ()
        parts.append(f"{name}:{df.height}:{sums}")
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


def check_lineage(func: str, schedule: Any, **results: Any) -> None:
    """Refuse a result among ``results`` (stage name -> result) whose recorded schedule is not ``schedule``."""
    recorded = {name: getattr(r, "schedule_fingerprint", None) for name, r in results.items() if r is not None}
    recorded = {name: fp for name, fp in recorded.items() if fp is not None}
    if not recorded:
        return
    mine = schedule_fingerprint(schedule)
    for name, fp in recorded.items():
        if fp != mine:
            verb, redo = ("sized", "size") if name == "package" else ("lowered", "lower")
            msg = (f"{func}: {name} was {verb} from another schedule than the one given (the schedule's "
                   f"fingerprint {mine}, the {name}'s {fp}): pass the stage results of one compilation "
                   f"(c.schedule, c.exchange, c.tiles, ...) or {redo} the {name} again from this schedule")
            raise OptionError(msg, field=name, value=fp)


__all__ = ["check_lineage", "schedule_fingerprint"]
