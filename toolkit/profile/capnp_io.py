"""Read (schema versions 1..5) and write (version 5) `ipu-stack` Cap'n Proto profiles.

The schema lives beside this module (``profile.capnp`` importing
``steps.capnp``, ordinals as in the hardware format) and is loaded with
pycapnp; its compiled field offsets drive the bulk numpy decoder in
:mod:`toolkit.profile.wire`, so one schema file is the single source of the
layout. Older versions simply have fewer fields (smaller structs): missing
fields read as defaults, and version gates apply on top (metadata from 2,
synchronization/idle kinds from 3, exchange activities and event cycles from
4, partnerBusy from 5; fanout and paired are read whenever present).

The writer emits one segment laid out in bulk: root, tiles, per-tile sample
lists, steps, activity and metadata lists, then each distinct text once
(several pointers may share one text, which the encoding allows).

The format does not say whether a profile was measured or simulated. The
writer records it as one metadata entry (``SOURCE_KEY``) on the first step of
the first tile, and the reader takes it back out; a file without the entry
(every file the hardware tool writes) reads as ``source="hardware"``.
"""

from __future__ import annotations

import functools
import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from toolkit import tables
from toolkit.errors import FormatError
from toolkit.files import atomic_write, gunzip, read_bytes
from toolkit.profile import wire
from toolkit.profile.model import DEFAULT_CLOCK_HZ, SCHEMA_VERSIONS, SOURCES, Profile, validate
from toolkit.profile.wire import Wire

SCHEMA_DIR = Path(__file__).resolve().parent
WRITE_VERSION = 5
KIND_SINCE = {"exchange": 1, "compute": 1, "synchronization": 3, "idle": 3}
ACTIVITY_SINCE = {"send": 4, "receive": 4, "partnerBusy": 5}
#: the metadata entry that records a written profile's source (hardware | simulated)
SOURCE_KEY = "toolkit.source"


GZIP_MAGIC = b"\x1f\x8b"
#: the largest profile file read (plain or compressed): one Cap'n Proto segment holds at most 2**29 words
MAX_BYTES = 4 << 30


@functools.cache
def schema() -> Any:
    """The pycapnp module of ``profile.capnp`` (``.Profile``, ``.TileProfile``, ``.CycleSample``, ``.Steps``)."""
    import capnp

    return capnp.load(str(SCHEMA_DIR / "profile.capnp"), imports=[str(SCHEMA_DIR)])


@functools.cache
def steps_schema() -> Any:
    """The pycapnp module of ``steps.capnp`` (``.Step``, ``.Metadata``, ``.ExchangeActivity``)."""
    import capnp

    return capnp.load(str(SCHEMA_DIR / "steps.capnp"), imports=[str(SCHEMA_DIR)])


@dataclass(frozen=True, slots=True)
class _Struct:
    dw: int
    pw: int
    slot: dict[str, int]  # data fields: offset in units of the field width; pointers: pointer index


@functools.cache
def layout() -> dict[str, _Struct]:
    """Compiled layout of every struct of the schema, read from pycapnp."""
    p, s = schema(), steps_schema()
    out = {}
    for name, st in (("Profile", p.Profile), ("TileProfile", p.TileProfile), ("CycleSample", p.CycleSample),
                     ("Step", s.Step), ("Metadata", s.Metadata), ("ExchangeActivity", s.ExchangeActivity)):
        node = st.schema.node.struct
        out[name] = _Struct(node.dataWordCount, node.pointerCount, {f.name: f.slot.offset for f in node.fields})
    return out


# -- reading ------------------------------------------------------------------
def read_capnp(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Profile:
    """Read a Cap'n Proto profile of schema version 1..5 (plain or gzip-compressed).

    Raises :class:`FormatError` (naming the file, tile and problem) for unreadable,
    truncated or corrupt files, unknown schema versions and impossible samples; a
    FIFO or device, a file past ``MAX_BYTES``, a gzip stream that expands past its
    limit (:func:`toolkit.files.gunzip`) and texts or lists that reference far more
    than the message holds (:mod:`toolkit.profile.wire`) are refused by name.
    ``root``: the file must lie inside that directory (a case).
    """
    if not isinstance(path, str | os.PathLike):
        raise FormatError(f"path={path!r} must be a path, not {type(path).__name__}", field="path", value=path)
    file = str(path)
    data = read_bytes(path, limit=MAX_BYTES, root=root, what="profile")
    if data[:2] == GZIP_MAGIC:  # a gzip-compressed message (``.capnp.gz``)
        data = gunzip(data, file)
    w = Wire(data, file)
    if w.seg_end[0] == w.seg_start[0]:
        w.fail("the first segment is empty: there is no root pointer", offset=0)
    lay = layout()

    def root_where(_: int) -> tuple[str, int | None]:
        return "root", None

    ps, pdw, ppw = w.structs(w.seg_start[:1], root_where, "Profile")
    P = lay["Profile"]
    version = int(w.u32(ps, pdw, P.slot["schemaVersion"])[0])
    if version not in SCHEMA_VERSIONS:
        lo, hi = SCHEMA_VERSIONS[0], SCHEMA_VERSIONS[-1]
        msg = f"unknown schema version {version} (this toolkit reads versions {lo}..{hi})"
        raise FormatError(msg, file=file, field="schemaVersion", value=version)
    clock = int(w.u64(ps, pdw, P.slot["clockHz"])[0])
    tfirst, tcount, tdw, tpw = w.struct_lists(w.pointer(ps, pdw, ppw, P.slot["tiles"]), root_where, "tiles")
    n_tiles = int(tcount[0])
    tpos = tfirst[0] + np.arange(n_tiles) * (tdw[0] + tpw[0])
    tdw_, tpw_ = np.full(n_tiles, tdw[0]), np.full(n_tiles, tpw[0])
    T = lay["TileProfile"]
    physical = w.u32(tpos, tdw_, T.slot["physicalTile"])

    def tile_where(i: int) -> tuple[str, int | None]:
        return f"tile {physical[i]}", int(physical[i])

    sfirst, scount, sdw, spw = w.struct_lists(w.pointer(tpos, tdw_, tpw_, T.slot["samples"]), tile_where, "samples")
    spos, owner, within = wire.expand(sfirst, scount, sdw + spw)
    tile = physical[owner]

    def sample_where(i: int) -> tuple[str, int | None]:
        return f"tile {tile[i]}, sample {within[i]}", int(tile[i])

    C, S = lay["CycleSample"], lay["Step"]
    cdw, cpw = sdw[owner], spw[owner]
    start = w.u32(spos, cdw, C.slot["startCycle"])
    end = w.u32(spos, cdw, C.slot["endCycle"])
    st, stdw, stpw = w.structs(w.pointer(spos, cdw, cpw, C.slot["step"]), sample_where, "step")
    kind_code = w.u16(st, stdw, S.slot["kind"])
    _check_codes(w, kind_code, tables.SAMPLE_KINDS, KIND_SINCE, version, sample_where, "step.kind")
    v4 = version >= 4
    samples = tables.frame({
        "tile": tile, "sample": within,
        "local_index": w.u32(st, stdw, S.slot["localIndex"]),
        "phase": w.u32(st, stdw, S.slot["phase"]),
        "epoch": w.u32(st, stdw, S.slot["epoch"]),
        "operation": w.texts(w.pointer(st, stdw, stpw, S.slot["operation"]), sample_where, "step.operation"),
        "kind": pl.Series(tables.SAMPLE_KINDS).gather(kind_code),
        "kernel": w.texts(w.pointer(st, stdw, stpw, S.slot["kernel"]), sample_where, "step.kernel"),
        "start_cycle": start, "end_cycle": end,
        "exchange_event_cycles": w.u32(st, stdw, S.slot["exchangeEventCycles"]) if v4 else 0,
    }, tables.SAMPLES_SCHEMA, what="samples")
    if version >= 2:
        metadata = _read_metadata(w, st, stdw, stpw, tile, within, sample_where)
    else:
        metadata = tables.empty(tables.METADATA_SCHEMA)
    if v4:
        activities = _read_activities(w, st, stdw, stpw, tile, within, sample_where, version)
    else:
        activities = tables.empty(tables.ACTIVITIES_SCHEMA)
    source, metadata = _source(metadata, file)
    profile = Profile(samples=samples, activities=activities, metadata=metadata,
                      clock_hz=float(clock) if clock else DEFAULT_CLOCK_HZ, schema_version=version, source=source)
    return validate(profile, file=file)


def _source(metadata: pl.DataFrame, file: str) -> tuple[str, pl.DataFrame]:
    """The source the writer recorded (``hardware`` when none is), and the metadata without that entry."""
    marked = metadata.filter(pl.col("name") == SOURCE_KEY)
    if marked.height == 0:
        return "hardware", metadata
    values = marked["value"].unique().to_list()
    if len(values) != 1 or values[0] not in SOURCES:
        msg = f"metadata {SOURCE_KEY}={values!r} must be one of {SOURCES} (once)"
        raise FormatError(msg, file=file, field=SOURCE_KEY, value=values)
    return values[0], metadata.filter(pl.col("name") != SOURCE_KEY)


def _check_codes(w: Wire, code: np.ndarray, names: tuple[str, ...], since: dict[str, int], version: int,
                 where: wire.Where, field: str) -> None:
    allowed = np.array([since[n] <= version for n in names] + [False])
    bad = ~allowed[np.minimum(code, len(names))]
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        c = int(code[i])
        what = f"{names[c]!r} needs schema version {since[names[c]]}" if c < len(names) else "unknown enumerant"
        text, tile = where(i)
        w.fail(f"{text}: {field}={c}: {what} (file has version {version})", tile=tile, field=field)


def _read_metadata(w: Wire, st, stdw, stpw, tile, within, sample_where) -> pl.DataFrame:
    S, M = layout()["Step"], layout()["Metadata"]
    first, count, dw, pw = w.struct_lists(w.pointer(st, stdw, stpw, S.slot["metadata"]), sample_where,
                                          "step.metadata")
    pos, owner, _ = wire.expand(first, count, dw + pw)
    mdw, mpw = dw[owner], pw[owner]

    def where(i: int) -> tuple[str, int | None]:
        return sample_where(int(owner[i]))

    return tables.frame({
        "tile": tile[owner], "sample": within[owner],
        "name": w.texts(w.pointer(pos, mdw, mpw, M.slot["name"]), where, "metadata.name"),
        "value": w.texts(w.pointer(pos, mdw, mpw, M.slot["value"]), where, "metadata.value"),
    }, tables.METADATA_SCHEMA, what="metadata")


def _read_activities(w: Wire, st, stdw, stpw, tile, within, sample_where, version: int) -> pl.DataFrame:
    S, A = layout()["Step"], layout()["ExchangeActivity"]
    first, count, dw, _pw = w.struct_lists(w.pointer(st, stdw, stpw, S.slot["exchangeActivities"]), sample_where,
                                           "step.exchangeActivities")
    pos, owner, _ = wire.expand(first, count, dw + _pw)
    adw = dw[owner]

    def where(i: int) -> tuple[str, int | None]:
        return sample_where(int(owner[i]))

    code = w.u16(pos, adw, A.slot["kind"])
    _check_codes(w, code, tables.ACTIVITY_KINDS, ACTIVITY_SINCE, version, where, "exchangeActivity.kind")
    return tables.frame({
        "tile": tile[owner], "sample": within[owner],
        "kind": pl.Series(tables.ACTIVITY_KINDS).gather(code),
        "fanout": w.u16(pos, adw, A.slot["fanout"]),
        "paired": w.bit(pos, adw, A.slot["paired"]),
        "start_cycle": w.u32(pos, adw, A.slot["startCycle"]),
        "end_cycle": w.u32(pos, adw, A.slot["endCycle"]),
    }, tables.ACTIVITIES_SCHEMA, what="activities")


# -- writing ------------------------------------------------------------------
def write_capnp(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as a schema-version-5 Cap'n Proto message, atomically (temporary file, then rename).

    A path ending in ``.gz`` gets the same message gzip-compressed (``read_capnp`` reads both).
    """
    data = encode(profile)
    out = Path(path)
    if out.suffix.lower() == ".gz":
        data = gzip.compress(data, compresslevel=9, mtime=0)
    return atomic_write(out, lambda tmp: tmp.write_bytes(data))


def encode(profile: Profile) -> bytes:
    """The framed version-5 message of ``profile`` (one segment)."""
    lay = layout()
    P, T, C, S, M, A = (lay[k] for k in ("Profile", "TileProfile", "CycleSample", "Step", "Metadata",
                                         "ExchangeActivity"))
    samples = profile.samples.sort("tile", "sample", maintain_order=True)
    n = samples.height
    tile = samples["tile"].to_numpy().astype(np.int64)
    tile_ids, tile_first, tile_count = np.unique(tile, return_index=True, return_counts=True)
    order = np.argsort(tile_first, kind="stable")
    tile_ids, tile_count = tile_ids[order], tile_count[order]
    n_tiles = len(tile_ids)
    row = samples.select("tile", "sample").with_row_index("_row")
    act = _attach_rows(profile.activities, row)
    meta = _attach_rows(_marked(profile, samples), row)
    n_act, n_meta = np.bincount(act["_row"], minlength=n), np.bincount(meta["_row"], minlength=n)

    texts = pa.chunked_array([s.to_arrow().cast(pa.large_string()) for s in (
        samples["operation"], samples["kernel"], meta["name"], meta["value"])], type=pa.large_string())
    encoded = pc.dictionary_encode(texts.combine_chunks())
    text_index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    dictionary = encoded.dictionary
    offs = np.frombuffer(dictionary.buffers()[1], np.int64, len(dictionary) + 1, offset=dictionary.offset * 8)
    blob = np.frombuffer(dictionary.buffers()[2], np.uint8) if dictionary.buffers()[2] else np.zeros(0, np.uint8)
    text_len = np.diff(offs)
    text_words = (text_len + 8) // 8  # bytes plus the NUL terminator, padded to words

    # word layout of the whole message
    tsz, csz, ssz = T.dw + T.pw, C.dw + C.pw, S.dw + S.pw
    at_profile = 1
    at_tiles = at_profile + P.dw + P.pw
    at_lists = at_tiles + 1 + n_tiles * tsz
    list_words = 1 + tile_count * csz
    list_at = at_lists + np.cumsum(list_words) - list_words
    at_steps = at_lists + int(list_words.sum())
    step_at = at_steps + np.arange(n) * ssz
    asz, msz = A.dw + A.pw, M.dw + M.pw
    alist_words = np.where(n_act > 0, 1 + n_act * asz, 0)
    at_alists = at_steps + n * ssz
    alist_at = at_alists + np.cumsum(alist_words) - alist_words
    mlist_words = np.where(n_meta > 0, 1 + n_meta * msz, 0)
    at_mlists = at_alists + int(alist_words.sum())
    mlist_at = at_mlists + np.cumsum(mlist_words) - mlist_words
    at_texts = at_mlists + int(mlist_words.sum())
    text_at = at_texts + np.cumsum(text_words) - text_words
    total = at_texts + int(text_words.sum())
    if total >= 1 << 29:
        msg = f"profile needs {total} words, more than one Cap'n Proto segment of 2**29 words holds"
        raise FormatError(msg, field="samples", value=n)
    words = np.zeros(total, np.uint64)
    one = np.zeros(1, np.int64)

    words[0] = wire.struct_pointer(one, one + at_profile, P.dw, P.pw)[0]
    wire.put_bits(words, one + at_profile, 32 * P.slot["schemaVersion"], 32, np.array([WRITE_VERSION]))
    wire.put_bits(words, one + at_profile, 64 * P.slot["clockHz"], 64, np.array([round(profile.clock_hz)]))
    p_tiles = one + at_profile + P.dw + P.slot["tiles"]
    words[p_tiles] = wire.list_pointer(p_tiles, one + at_tiles, wire.LIST_COMPOSITE, one + n_tiles * tsz)
    words[at_tiles] = wire.composite_tag(np.array([n_tiles]), T.dw, T.pw)[0]
    tile_at = at_tiles + 1 + np.arange(n_tiles) * tsz
    wire.put_bits(words, tile_at, 32 * T.slot["physicalTile"], 32, tile_ids)
    p_samples = tile_at + T.dw + T.slot["samples"]
    words[p_samples] = wire.list_pointer(p_samples, list_at, wire.LIST_COMPOSITE, tile_count * csz)
    words[list_at] = wire.composite_tag(tile_count, C.dw, C.pw)

    within = np.arange(n) - np.repeat(np.cumsum(tile_count) - tile_count, tile_count)
    sample_at = np.repeat(list_at + 1, tile_count) + within * csz
    wire.put_bits(words, sample_at, 32 * C.slot["startCycle"], 32, samples["start_cycle"].to_numpy())
    wire.put_bits(words, sample_at, 32 * C.slot["endCycle"], 32, samples["end_cycle"].to_numpy())
    p_step = sample_at + C.dw + C.slot["step"]
    words[p_step] = wire.struct_pointer(p_step, step_at, S.dw, S.pw)

    kind = samples["kind"].replace_strict({k: i for i, k in enumerate(tables.SAMPLE_KINDS)},
                                          return_dtype=pl.Int64).to_numpy()
    for name, col in (("localIndex", "local_index"), ("phase", "phase"), ("epoch", "epoch"),
                      ("exchangeEventCycles", "exchange_event_cycles")):
        wire.put_bits(words, step_at, 32 * S.slot[name], 32, samples[col].to_numpy())
    wire.put_bits(words, step_at, 16 * S.slot["kind"], 16, kind)

    def put_text(ptr: np.ndarray, index: np.ndarray) -> None:
        words[ptr] = wire.list_pointer(ptr, text_at[index], wire.LIST_BYTE, text_len[index] + 1)

    put_text(step_at + S.dw + S.slot["operation"], text_index[:n])
    put_text(step_at + S.dw + S.slot["kernel"], text_index[n:2 * n])

    has = n_act > 0
    p_act = step_at[has] + S.dw + S.slot["exchangeActivities"]
    words[p_act] = wire.list_pointer(p_act, alist_at[has], wire.LIST_COMPOSITE, n_act[has] * asz)
    words[alist_at[has]] = wire.composite_tag(n_act[has], A.dw, A.pw)
    a_at = np.repeat(alist_at[has] + 1, n_act[has]) + _within(n_act[has]) * asz
    akind = act["kind"].replace_strict({k: i for i, k in enumerate(tables.ACTIVITY_KINDS)},
                                       return_dtype=pl.Int64).to_numpy()
    wire.put_bits(words, a_at, 16 * A.slot["kind"], 16, akind)
    wire.put_bits(words, a_at, 32 * A.slot["startCycle"], 32, act["start_cycle"].to_numpy())
    wire.put_bits(words, a_at, 32 * A.slot["endCycle"], 32, act["end_cycle"].to_numpy())
    wire.put_bits(words, a_at, 16 * A.slot["fanout"], 16, act["fanout"].to_numpy())
    wire.put_bits(words, a_at, A.slot["paired"], 1, act["paired"].to_numpy())

    has = n_meta > 0
    p_meta = step_at[has] + S.dw + S.slot["metadata"]
    words[p_meta] = wire.list_pointer(p_meta, mlist_at[has], wire.LIST_COMPOSITE, n_meta[has] * msz)
    words[mlist_at[has]] = wire.composite_tag(n_meta[has], M.dw, M.pw)
    m_at = np.repeat(mlist_at[has] + 1, n_meta[has]) + _within(n_meta[has]) * msz
    n_md = meta.height
    put_text(m_at + M.dw + M.slot["name"], text_index[2 * n:2 * n + n_md])
    put_text(m_at + M.dw + M.slot["value"], text_index[2 * n + n_md:])

    raw = words.view(np.uint8)
    dest = np.repeat(text_at * 8, text_len) + _within(text_len)
    raw[dest] = blob[offs[0]:offs[-1]]
    return wire.frame_message(words)


def _marked(profile: Profile, samples: pl.DataFrame) -> pl.DataFrame:
    """The metadata to write: the profile's own, then its source on the first sample of the first tile."""
    own = profile.metadata.filter(pl.col("name") != SOURCE_KEY)
    if samples.height == 0:
        return own
    first = samples.row(0, named=True)
    mark = pl.DataFrame({"tile": [first["tile"]], "sample": [first["sample"]], "name": [SOURCE_KEY],
                         "value": [profile.source]}).cast(tables.METADATA_SCHEMA)
    return pl.concat([own.cast(tables.METADATA_SCHEMA), mark])


def _within(count: np.ndarray) -> np.ndarray:
    return np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)


def _attach_rows(df: pl.DataFrame, row: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``df`` with the global sample row they belong to, ordered by it (stable)."""
    out = df.join(row, on=["tile", "sample"], how="left", maintain_order="left")
    orphan = out.filter(pl.col("_row").is_null())
    if orphan.height:
        t, s = orphan.row(0)[0], orphan.row(0)[1]
        msg = f"tile {t}: {orphan.height} rows refer to sample {s}, which is not in samples"
        raise FormatError(msg, tile=int(t), field="sample", value=int(s))
    return out.sort("_row", maintain_order=True)
