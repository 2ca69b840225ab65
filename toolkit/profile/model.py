"""The one profile data model shared by hardware (``ipu-stack``) and simulated profiles.

A :class:`Profile` is three frames and three attributes:

- ``samples`` (``tables.SAMPLES_SCHEMA``): one row per cycle sample, sorted by
  tile then by ``sample`` (its position in the tile's list); ``start_cycle`` and
  ``end_cycle`` are raw 32-bit counter values, so every difference is taken
  modulo 2**32 (see :func:`wrap_delta`).
- ``activities`` (``tables.ACTIVITIES_SCHEMA``): exchange activity intervals of
  exchange samples, offsets within the exchange step; joined on (tile, sample).
- ``metadata`` (``tables.METADATA_SCHEMA``): per-sample name/value rows.
- ``clock_hz``, ``schema_version`` (of the file it came from; 5 when written),
  ``source`` ("hardware" | "simulated").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import FormatError

WRAP = 1 << 32
HALF = 1 << 31
DEFAULT_CLOCK_HZ = 1.5e9
SCHEMA_VERSIONS = (1, 2, 3, 4, 5)
SOURCES = ("hardware", "simulated")
#: what each source means, in the words reports use
SOURCE_MEANING = {"simulated": "simulated (this toolkit's cycle simulator)",
                  "hardware": "measured on hardware (a profile file that does not say it was simulated)"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """A cycle profile: per-tile samples, exchange activities and metadata."""

    samples: pl.DataFrame  # tables.SAMPLES_SCHEMA
    activities: pl.DataFrame = field(default_factory=lambda: tables.empty(tables.ACTIVITIES_SCHEMA))
    metadata: pl.DataFrame = field(default_factory=lambda: tables.empty(tables.METADATA_SCHEMA))
    clock_hz: float = DEFAULT_CLOCK_HZ
    schema_version: int = 5
    source: str = "hardware"

    @property
    def tiles(self) -> int:
        """Number of tiles with at least one sample."""
        return self.samples["tile"].n_unique()


def wrap_delta(end: np.ndarray, start: np.ndarray) -> np.ndarray:
    """(end - start) mod 2**32 for raw 32-bit counters, as int64."""
    return (np.asarray(end, np.int64) - np.asarray(start, np.int64)) % WRAP


def validate(profile: Profile, *, file: str) -> Profile:
    """Check a freshly read profile; raise :class:`FormatError` naming the file, tile and problem.

    Checks the schemas, the clock, the kinds, that counters fit 32 bits and that
    no sample or activity ends before it starts (a wrap-aware duration of 2**31
    cycles or more cannot be real).
    """
    samples = _conform(profile.samples, tables.SAMPLES_SCHEMA, "samples", file)
    activities = _conform(profile.activities, tables.ACTIVITIES_SCHEMA, "activities", file)
    metadata = _conform(profile.metadata, tables.METADATA_SCHEMA, "metadata", file)
    if not np.isfinite(profile.clock_hz) or profile.clock_hz <= 0:
        msg = f"clock_hz={profile.clock_hz!r} is not a positive frequency"
        raise FormatError(msg, file=file, field="clock_hz", value=profile.clock_hz)
    if profile.schema_version not in SCHEMA_VERSIONS:
        lo, hi = SCHEMA_VERSIONS[0], SCHEMA_VERSIONS[-1]
        msg = f"schema_version={profile.schema_version!r} is not a profile schema this reader knows ({lo}..{hi})"
        raise FormatError(msg, file=file, field="schema_version", value=profile.schema_version)
    if profile.source not in SOURCES:
        msg = f"source={profile.source!r} is not one of {SOURCES}"
        raise FormatError(msg, file=file, field="source", value=profile.source)
    _check_kinds(samples, "kind", tables.SAMPLE_KINDS, "sample", file)
    _check_kinds(activities, "kind", tables.ACTIVITY_KINDS, "activity", file)
    for name, df, what in (("samples", samples, "sample"), ("activities", activities, "activity")):
        start, end = df["start_cycle"].to_numpy(), df["end_cycle"].to_numpy()
        for col, v in (("start_cycle", start), ("end_cycle", end)):
            bad = (v < 0) | (v >= WRAP)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                tile = int(df["tile"][i])
                msg = f"tile {tile}, {what} {df['sample'][i]}: {name}.{col}={v[i]} is not a 32-bit counter value"
                raise FormatError(msg, file=file, tile=tile, field=col, value=int(v[i]))
        bad = wrap_delta(end, start) >= HALF
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            tile = int(df["tile"][i])
            msg = (f"tile {tile}, {what} {df['sample'][i]}: impossible {what}: end_cycle={end[i]} is before "
                   f"start_cycle={start[i]} (wrap-aware duration {wrap_delta(end[i], start[i])} >= 2**31); "
                   f"{bad.sum()} such {name} in total")
            raise FormatError(msg, file=file, tile=tile, field="end_cycle", value=int(end[i]))
    _check_activity_samples(samples, activities, file)
    if not _sorted(samples):
        samples = samples.sort("tile", "sample", maintain_order=True)
        tile, sample = samples["tile"].to_numpy(), samples["sample"].to_numpy()
        dup = np.flatnonzero((np.diff(tile) == 0) & (np.diff(sample) == 0))
        if len(dup):
            t, s = int(tile[dup[0]]), int(sample[dup[0]])
            msg = f"tile {t}: sample {s} appears twice (is the tile listed twice?)"
            raise FormatError(msg, file=file, tile=t, field="tile", value=t)
    return Profile(samples=samples, activities=activities, metadata=metadata, clock_hz=float(profile.clock_hz),
                   schema_version=int(profile.schema_version), source=profile.source)


def _check_activity_samples(samples: pl.DataFrame, activities: pl.DataFrame, file: str) -> None:
    """Every activity belongs to a sample of its tile (an exchange activity inside an exchange sample)."""
    if not activities.height:
        return
    orphans = activities.join(samples.select("tile", "sample"), on=["tile", "sample"], how="anti")
    if orphans.height:
        r = orphans.row(0, named=True)
        msg = (f"tile {r['tile']}: an activity points at sample {r['sample']}, which the tile does not have; "
               f"{orphans.height} such activities in total")
        raise FormatError(msg, file=file, tile=int(r["tile"]), field="sample", value=int(r["sample"]))


def _sorted(samples: pl.DataFrame) -> bool:
    tile, sample = samples["tile"].to_numpy(), samples["sample"].to_numpy()
    if len(tile) < 2:
        return True
    dt = np.diff(tile.astype(np.int64))
    return bool(np.all((dt > 0) | ((dt == 0) & (np.diff(sample) > 0))))


def _conform(df: pl.DataFrame, schema: tables.Schema, name: str, file: str) -> pl.DataFrame:
    have = dict(df.schema)
    missing = [c for c in schema if c not in have]
    if missing:
        msg = f"{name}: missing columns {missing}"
        raise FormatError(msg, file=file, field=missing[0])
    try:
        out = df.select([pl.col(c).cast(t, strict=True) for c, t in schema.items()])
    except pl.exceptions.PolarsError as exc:
        msg = f"{name}: columns do not have the expected types ({str(exc).splitlines()[0]})"
        raise FormatError(msg, file=file, field=name) from None
    nulls = [c for c, n in zip(out.columns, out.null_count().row(0), strict=True) if n]
    if nulls:
        msg = f"{name}: column {nulls[0]!r} has {out[nulls[0]].null_count()} null values"
        raise FormatError(msg, file=file, field=nulls[0])
    return out


def _check_kinds(df: pl.DataFrame, col: str, kinds: tuple[str, ...], what: str, file: str) -> None:
    bad = df.filter(~pl.col(col).is_in(list(kinds)) | pl.col(col).is_null())
    if bad.height:
        row = bad.row(0, named=True)
        msg = f"tile {row['tile']}, {what} {row['sample']}: kind={row[col]!r} is not one of {kinds}"
        raise FormatError(msg, file=file, tile=row["tile"], field=col, value=row[col])
