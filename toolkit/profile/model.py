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

A frame may be given as a ``pl.LazyFrame``: it is collected the first time the
attribute is read and kept (a simulated profile of repeated blocks holds its
expanded samples, activities and metadata this way, so a 27-layer profile is not
materialised unless asked). :meth:`Profile.lazy` gives a frame as a LazyFrame
without collecting it, for readers that need a few columns or an aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import FormatError, OptionError

WRAP = 1 << 32
HALF = 1 << 31
DEFAULT_CLOCK_HZ = 1.5e9
SCHEMA_VERSIONS = (1, 2, 3, 4, 5)
#: clocks a profile may state: a tile clock is a few GHz; outside this range cycle-to-time conversions are
#: meaningless (1e-300 Hz gives infinite microseconds, which a Perfetto export writes as null)
CLOCK_RANGE_HZ = (1e3, 1e12)
SOURCES = ("hardware", "simulated")
#: what each source means, in the words reports use
SOURCE_MEANING = {"simulated": "simulated (this toolkit's cycle simulator)",
                  "hardware": "measured on hardware (a profile file that does not say it was simulated)"}


Frame = pl.DataFrame | pl.LazyFrame


class Deferred:
    """A frame attribute given as a DataFrame or a LazyFrame; a LazyFrame is collected on first read and kept.

    A data descriptor: the frozen dataclass's ``__init__`` stores through it, readers always get a DataFrame.
    """

    __slots__ = ("name",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> pl.DataFrame:
        if obj is None:
            raise AttributeError(self.name)  # no class-level default: the dataclass sees a required field
        value = obj.__dict__[self.name]
        if isinstance(value, pl.LazyFrame):
            value = obj.__dict__[self.name] = value.collect()
        return value

    def __set__(self, obj: object, value: Frame) -> None:
        if not isinstance(value, pl.DataFrame | pl.LazyFrame):
            msg = (f"{type(obj).__name__}.{self.name} must be a polars DataFrame or LazyFrame, "
                   f"not {type(value).__name__}")
            raise TypeError(msg)
        obj.__dict__[self.name] = value

    @staticmethod
    def lazy(obj: object, name: str) -> pl.LazyFrame:
        """The frame ``name`` of ``obj`` as a LazyFrame, without collecting it."""
        value = obj.__dict__[name]
        return value if isinstance(value, pl.LazyFrame) else value.lazy()

    @staticmethod
    def collected(obj: object, name: str) -> bool:
        return isinstance(obj.__dict__[name], pl.DataFrame)


@dataclass(frozen=True, kw_only=True, init=False, repr=False)
class Profile:
    """A cycle profile: per-tile samples, exchange activities and metadata (each a DataFrame when read)."""

    # descriptors, not defaults: each frame is required by __init__ and read back as a DataFrame
    samples: Deferred = Deferred()     # tables.SAMPLES_SCHEMA
    activities: Deferred = Deferred()  # tables.ACTIVITIES_SCHEMA
    metadata: Deferred = Deferred()    # tables.METADATA_SCHEMA
    clock_hz: float
    schema_version: int
    source: str

    def __init__(self, *, samples: Frame, activities: Frame | None = None, metadata: Frame | None = None,
                 clock_hz: float = DEFAULT_CLOCK_HZ, schema_version: int = 5, source: str = "hardware") -> None:
        put = object.__setattr__
        put(self, "samples", samples)
        put(self, "activities", tables.empty(tables.ACTIVITIES_SCHEMA) if activities is None else activities)
        put(self, "metadata", tables.empty(tables.METADATA_SCHEMA) if metadata is None else metadata)
        put(self, "clock_hz", clock_hz)
        put(self, "schema_version", schema_version)
        put(self, "source", source)

    def lazy(self, name: str) -> pl.LazyFrame:
        """``samples``, ``activities`` or ``metadata`` as a LazyFrame, collecting nothing (a collected frame is
        reused); select the columns you need and the rest is never built."""
        if name not in FRAMES:
            msg = f"profile frame {name!r} does not exist; use one of {FRAMES}"
            raise KeyError(msg)
        return Deferred.lazy(self, name)

    def collected(self, name: str) -> bool:
        """Whether the frame ``name`` is held as a DataFrame (read, or given so) rather than still a LazyFrame."""
        return Deferred.collected(self, name)

    @property
    def tiles(self) -> int:
        """Number of tiles with at least one sample."""
        return int(self.lazy("samples").select(pl.col("tile").n_unique()).collect().item())

    def __repr__(self) -> str:
        frames = ", ".join(f"{n}={self.__dict__[n].height:,} rows" if self.collected(n) else f"{n}=<lazy>"
                           for n in FRAMES)
        return (f"Profile(source={self.source!r}, clock_hz={self.clock_hz!r}, "
                f"schema_version={self.schema_version!r}, {frames})")


FRAMES = ("samples", "activities", "metadata")


def require_profile(profile: Any, func: str, *, field: str = "profile", also: tuple[type, ...] = (),
                    need: tuple[str, ...] = ("tile", "start_cycle", "end_cycle")) -> Any:
    """``profile`` if it is a :class:`Profile` (or one of ``also``) whose samples have every column crop reads;
    an OptionError naming ``func``, the field and what was given otherwise (a DataFrame is not a profile: wrap
    it, ``Profile(samples=df)``). A samples frame with no columns at all (``pl.DataFrame()``) is an empty
    profile: a Profile with empty samples of the schema is returned."""
    if isinstance(profile, also):
        return profile
    if not isinstance(profile, Profile):
        kinds = " or ".join(t.__name__ for t in (Profile, *also))
        hint = (": wrap a samples frame as toolkit.profile.Profile(samples=df)"
                if isinstance(profile, pl.DataFrame | pl.LazyFrame) else "")
        msg = f"{func}({field}=...) takes a {kinds}, not {type(profile).__name__}{hint}"
        raise OptionError(msg, field=field, value=type(profile).__name__)
    names = profile.lazy("samples").collect_schema().names()
    if not names:
        return Profile(samples=tables.empty(tables.SAMPLES_SCHEMA), activities=profile.lazy("activities"),
                       metadata=profile.lazy("metadata"), clock_hz=profile.clock_hz,
                       schema_version=profile.schema_version, source=profile.source)
    missing = [c for c in need if c not in names]
    if missing:
        msg = (f"{func}: the profile's samples lack the columns {missing} (they have {names[:8]}); a profile's "
               f"samples follow tables.SAMPLES_SCHEMA")
        raise OptionError(msg, field="samples", value=missing)
    return profile


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
    check_clock(profile.clock_hz, file)
    if isinstance(profile.schema_version, bool) or not isinstance(profile.schema_version, int | np.integer) \
            or profile.schema_version not in SCHEMA_VERSIONS:
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


def check_clock(clock_hz: object, file: str) -> None:
    """A clock is a real number of Hz within ``CLOCK_RANGE_HZ`` (not a bool, not NaN)."""
    lo, hi = CLOCK_RANGE_HZ
    ok = isinstance(clock_hz, int | float | np.integer | np.floating) and not isinstance(clock_hz, bool)
    if not ok or not np.isfinite(clock_hz) or not lo <= clock_hz <= hi:
        msg = f"clock_hz={clock_hz!r} is not a tile clock frequency (a number of Hz from {lo:g} to {hi:g})"
        raise FormatError(msg, file=file, field="clock_hz", value=clock_hz)


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
