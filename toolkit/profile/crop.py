"""Cropping: the `ipu-stack` renderer's default view of a profile, with wrap-aware 32-bit arithmetic.

Counters are unwrapped per tile relative to the tile's first sample (offsets
within a tile are below 2**32), and tiles are related to each other through
the signed wrap-aware difference of their first-sample starts (tiles start
within 2**31 cycles of each other). Then:

- default (the renderer's "crop initial sync entry"): origin = the latest
  first-sample start over tiles; every sample is clipped to start at the origin
  (samples wholly before it get zero length); cropped cycles = the latest
  sample end minus the origin.
- ``shared_clock=True``: origin = the earliest first-sample start, nothing clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.profile.model import HALF, WRAP, Deferred, Profile, require_profile

CROP_SCHEMA: tables.Schema = {
    **tables.SAMPLES_SCHEMA,
    "start_offset_cycles": tables.BIG,  # from the origin, clipped at 0 unless shared clock
    "end_offset_cycles": tables.BIG,
    "duration_cycles": tables.BIG,      # end_offset - start_offset (0 for samples wholly before the origin)
}


@dataclass(frozen=True, kw_only=True, init=False, repr=False)
class Crop:
    """A profile seen from an origin: sample offsets in cycles and the cropped span.

    ``samples`` may be given as a LazyFrame (as :func:`crop` does for a profile whose samples are not collected):
    it is collected on first read, so the cropped span costs only the columns it needs.
    """

    origin_cycle: int     # raw 32-bit counter value of the origin
    cropped_cycles: int   # latest sample end - origin
    shared_clock: bool
    clock_hz: float
    tiles: int
    samples: Deferred = Deferred()  # CROP_SCHEMA, sorted by tile then sample (a descriptor)  # noqa: RUF009

    def __init__(self, *, origin_cycle: int, cropped_cycles: int, shared_clock: bool, clock_hz: float, tiles: int,
                 samples: pl.DataFrame | pl.LazyFrame) -> None:
        put = object.__setattr__
        for name, value in (("origin_cycle", origin_cycle), ("cropped_cycles", cropped_cycles),
                            ("shared_clock", shared_clock), ("clock_hz", clock_hz), ("tiles", tiles),
                            ("samples", samples)):
            put(self, name, value)

    @property
    def cropped_seconds(self) -> float:
        return self.cropped_cycles / self.clock_hz

    def __repr__(self) -> str:
        rows = f"{self.__dict__['samples'].height:,} rows" if Deferred.collected(self, "samples") else "<lazy>"
        return (f"Crop(origin_cycle={self.origin_cycle}, cropped_cycles={self.cropped_cycles}, "
                f"shared_clock={self.shared_clock}, clock_hz={self.clock_hz!r}, tiles={self.tiles}, samples={rows})")


def crop(profile: Profile, shared_clock: bool = False) -> Crop:
    """Crop ``profile`` the way the hardware tool's renderer does (or not at all with ``shared_clock``).

    Reads only the samples' tile and counter columns; the cropped samples (``Crop.samples``) are built when read.
    Anything but a Profile is refused naming the argument (:func:`~toolkit.profile.model.require_profile`); a
    profile without samples crops to an empty Crop of 0 cycles.
    """
    profile = require_profile(profile, "crop")
    lazy = not profile.collected("samples")
    s = profile.lazy("samples").select("tile", "start_cycle", "end_cycle").collect()
    n = s.height
    extra = list(CROP_SCHEMA)[len(tables.SAMPLES_SCHEMA):]
    if n == 0:
        samples = profile.lazy("samples").with_columns(*(pl.lit(0, tables.BIG).alias(c) for c in extra))
        return Crop(origin_cycle=0, cropped_cycles=0, shared_clock=shared_clock, clock_hz=profile.clock_hz, tiles=0,
                    samples=samples if lazy else samples.collect())
    tile = s["tile"].to_numpy()
    start = s["start_cycle"].to_numpy()
    end = s["end_cycle"].to_numpy()
    first = np.flatnonzero(np.r_[True, tile[1:] != tile[:-1]])
    row_tile = np.cumsum(np.r_[True, tile[1:] != tile[:-1]]) - 1
    base = start[first]
    rel = (base - base[0] + HALF) % WRAP - HALF  # signed offset of each tile's first start from tile 0's
    row_rel = rel[row_tile]
    begin = row_rel + (start - base[row_tile]) % WRAP
    finish = begin + (end - start) % WRAP
    origin = int(rel.min() if shared_clock else rel.max())
    begin -= origin
    finish -= origin
    if not shared_clock:
        np.maximum(begin, 0, out=begin)
        np.maximum(finish, 0, out=finish)
    offsets = (pl.Series(extra[0], begin, dtype=tables.BIG), pl.Series(extra[1], finish, dtype=tables.BIG),
               pl.Series(extra[2], finish - begin, dtype=tables.BIG))
    samples = profile.lazy("samples").with_columns(*offsets) if lazy else profile.samples.with_columns(*offsets)
    return Crop(origin_cycle=int((base[0] + origin) % WRAP), cropped_cycles=max(int(finish.max()), 0),
                shared_clock=shared_clock, clock_hz=profile.clock_hz, tiles=len(first), samples=samples)
