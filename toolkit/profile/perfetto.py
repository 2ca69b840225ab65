"""Chrome trace / Perfetto JSON export of a profile.

One process (pid 0, named after the profile's source) with one thread track per
tile (tid = physical tile, named "tile N", sorted by tile). On each track,
complete ("X") events nest three deep: a phase event spanning the tile's
samples of that phase, the samples inside it (named by kernel, else
operation, else kind; category = kind), and an exchange sample's activities
inside the sample (send / receive / partnerBusy, clipped to the sample).
Cycles become microseconds through the profile's ``clock_hz``.

Events are built as polars frames and serialized with ``write_json`` (no
per-event Python). Past ``max_events_per_file`` the trace is split into
several files by whole tiles (a track never spans files): ``out`` becomes
``<stem>.000<suffix>``, ``<stem>.001<suffix>``, ... Each file is written under
a temporary name and renamed (a temporary left by a killed export is removed by
the next export of the same file), and an export into fewer chunks than the one
before removes that one's other chunk files (only files that begin as this
exporter's traces do).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.files import atomic_write
from toolkit.files.write import clean_stale
from toolkit.profile.crop import Crop, crop
from toolkit.profile.model import WRAP, Profile, check_clock

DEFAULT_MAX_EVENTS = 1_000_000


def export_perfetto(profile: Profile, out: str | os.PathLike[str], max_events_per_file: int = DEFAULT_MAX_EVENTS,
                    shared_clock: bool = False) -> list[Path]:
    """Write ``profile`` as Chrome trace JSON for Perfetto / chrome://tracing; return the files written.

    Offsets are from the crop origin (``shared_clock``: the earliest start).
    """
    if not isinstance(profile, Profile):
        msg = f"profile must be a toolkit.profile.Profile, not {type(profile).__name__}"
        raise OptionError(msg, field="profile", value=type(profile).__name__)
    if not isinstance(out, str | os.PathLike):
        raise OptionError(f"out={out!r} must be a path, not {type(out).__name__}", field="out", value=out)
    if isinstance(max_events_per_file, bool) or not isinstance(max_events_per_file, int):
        msg = f"max_events_per_file={max_events_per_file!r} must be an integer"
        raise OptionError(msg, field="max_events_per_file", value=max_events_per_file)
    check_clock(profile.clock_hz, "profile")
    if max_events_per_file < 1:
        msg = f"max_events_per_file={max_events_per_file} must be at least 1"
        raise OptionError(msg, field="max_events_per_file", value=max_events_per_file)
    c = crop(profile, shared_clock=shared_clock)
    families = _events(profile, c)
    per_tile = pl.concat([f.group_by("tid").len() for f in families]).group_by("tid").agg(pl.col("len").sum())
    per_tile = per_tile.sort("tid")
    chunk = _pack(per_tile["len"].to_numpy(), max_events_per_file)
    tile_chunk = pl.DataFrame({"tid": per_tile["tid"], "_chunk": chunk})
    n_chunks = int(chunk.max()) + 1 if len(chunk) else 1
    target = Path(out)
    paths = [target] if n_chunks == 1 else [
        target.with_name(f"{target.stem}.{k:03d}{target.suffix or '.json'}") for k in range(n_chunks)]
    process = (f'{{"name":"process_name","ph":"M","pid":0,"tid":0,'
               f'"args":{{"name":"IPU tiles ({profile.source}, {profile.clock_hz / 1e6:g} MHz)"}}}}')
    tagged = [f.join(tile_chunk, on="tid", how="left") for f in families]
    clean_stale(target)   # a killed export's temporary of the single file
    stale = _old_chunks(target, keep=paths)
    for k, path in enumerate(paths):
        parts = [process]
        for f in tagged:
            body = f.filter(pl.col("_chunk") == k).drop("_chunk")
            if body.height:
                parts.append(body.write_json()[1:-1])
        text = '{"displayTimeUnit":"ns","traceEvents":[\n' + ",\n".join(parts) + "\n]}\n"
        atomic_write(path, lambda tmp, text=text: tmp.write_text(text))
    for p in stale:   # an earlier export into more chunks (or one file): its other files go
        p.unlink(missing_ok=True)
    return paths


HEADER = b'{"displayTimeUnit":"ns","traceEvents":['


def _old_chunks(target: Path, keep: list[Path]) -> list[Path]:
    """Files of an earlier export of ``target`` that this one does not rewrite: ``target`` itself and its
    ``<stem>.NNN<suffix>`` chunks, only those that begin as this exporter's traces do (never another file)."""
    import re
    suffix = target.suffix or ".json"
    pattern = re.compile(re.escape(target.stem) + r"\.\d{3}" + re.escape(suffix))
    found = [target]
    if target.parent.is_dir():
        found += [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    old = []
    for p in found:
        if p in keep or p.is_symlink() or not p.is_file():
            continue
        try:
            with p.open("rb") as f:
                if f.read(len(HEADER)) == HEADER:
                    old.append(p)
        except OSError:
            continue
    return old


def _pack(counts: np.ndarray, limit: int) -> np.ndarray:
    """Greedy chunk number of each tile: consecutive tiles while the chunk stays within ``limit`` events.

    A sequential scan over per-tile totals (one integer per tile, microseconds); a
    tile with more than ``limit`` events gets a chunk of its own.
    """
    chunk = np.zeros(len(counts), np.int64)
    k, used = 0, 0
    for i, n in enumerate(counts.tolist()):
        if used and used + n > limit:
            k, used = k + 1, 0
        chunk[i] = k
        used += n
    return chunk


def _events(profile: Profile, c: Crop) -> list[pl.DataFrame]:
    """Event frames: thread names, thread order, phases, samples, activities (each its own columns)."""
    us = 1e6 / profile.clock_hz
    s = c.samples
    tiles = s.select(pl.col("tile").unique().sort().cast(pl.Int64).alias("tid"))
    names = tiles.select(
        pl.lit("thread_name").alias("name"), pl.lit("M").alias("ph"), pl.lit(0).alias("pid"), "tid",
        pl.struct(pl.format("tile {}", "tid").alias("name")).alias("args"))
    order = tiles.select(
        pl.lit("thread_sort_index").alias("name"), pl.lit("M").alias("ph"), pl.lit(0).alias("pid"), "tid",
        pl.struct(pl.col("tid").alias("sort_index")).alias("args"))
    start, end = pl.col("start_offset_cycles"), pl.col("end_offset_cycles")
    phases = s.group_by("tile", "phase").agg(start.min().alias("_s"), end.max().alias("_e")).select(
        pl.format("phase {}", "phase").alias("name"), pl.lit("phase").alias("cat"), pl.lit("X").alias("ph"),
        (pl.col("_s") * us).round(4).alias("ts"), ((pl.col("_e") - pl.col("_s")) * us).round(4).alias("dur"),
        pl.lit(0).alias("pid"), pl.col("tile").cast(pl.Int64).alias("tid"),
        pl.struct("phase").alias("args"))
    label = (pl.when(pl.col("kernel") != "").then("kernel")
             .when(pl.col("operation") != "").then("operation").otherwise("kind"))
    samples = s.select(
        label.alias("name"), pl.col("kind").alias("cat"), pl.lit("X").alias("ph"), (start * us).round(4).alias("ts"),
        (pl.col("duration_cycles") * us).round(4).alias("dur"), pl.lit(0).alias("pid"),
        pl.col("tile").cast(pl.Int64).alias("tid"),
        pl.struct("sample", "phase", "epoch", "local_index", "operation", "kernel",
                  pl.col("exchange_event_cycles")).alias("args"))
    # activity offsets count from the unclipped sample start: end - raw duration
    raw = (pl.col("end_cycle") - pl.col("start_cycle")) % WRAP
    acts = profile.activities.join(
        s.select("tile", "sample", "start_offset_cycles", "end_offset_cycles", (end - raw).alias("_base")),
        on=["tile", "sample"], how="inner")
    a_start = (pl.col("_base") + pl.col("start_cycle")).clip(start, end)
    a_end = (pl.col("_base") + pl.col("end_cycle")).clip(a_start, end)
    activities = acts.select(
        pl.col("kind").alias("name"), pl.lit("activity").alias("cat"), pl.lit("X").alias("ph"),
        (a_start * us).round(4).alias("ts"), ((a_end - a_start) * us).round(4).alias("dur"), pl.lit(0).alias("pid"),
        pl.col("tile").cast(pl.Int64).alias("tid"), pl.struct("sample", "fanout", "paired").alias("args"))
    return [names, order, phases, samples, activities]
