"""The real compiler's memory profile (ipu-stack's planner report, JSON versions 2 and 3) in our SRAM frames.

ipu-stack writes one JSON report per planner finalist when asked for a memory
profile directory. It is a per-tile *capacity estimate before address
placement*: per value the aligned bytes it holds on every tile
(``timeline.values[].tile_bytes``, copies included) and its alias root; per
step the live roots (``live``), the scratch per tile and class
(``tile_scratch``, ``[standard, interleaved]`` pairs) and the resulting usage
per tile and class (``tile_usage``, the same pairs). A tile's usage at a step
is, per class, the largest ``tile_bytes`` among each live root's aliases summed
over the live roots, plus that tile's scratch.

:func:`read_memory_profile` reads one (bounded and confined like every reader
in :mod:`toolkit.files`) into the frames our SRAM views draw:

- ``occupancy`` (``OCCUPANCY_SCHEMA``): one row per (tile, step), the step as
  the event; ``live_bytes``, ``standard_bytes`` and ``interleaved_bytes`` are
  the file's ``tile_usage``; ``free_bytes`` is the report's ``budget_bytes``
  minus the live bytes. There are no addresses before placement, so the region
  columns and ``largest_free_bytes`` are null.
- ``objects`` (``OBJECTS_SCHEMA``): one row per (alias root, tile) holding
  bytes there, live from the first to the last step that lists the root, and
  one ``scratch`` row per (step, tile, class) with scratch. Summing the live
  rows of a tile at a step gives its ``tile_usage`` when the file is
  consistent (:meth:`MemoryProfile.reconstructed`).

:func:`synthetic_memory_profile` writes a small version-3 document of the same
shape from our own objects (scope and model say it is synthetic), for
notebooks and tests where no report of the real compiler is at hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import FormatError
from toolkit.files.read import MIB, load_json, read_bytes

#: versions read: 2 (peaks include exchange rows) and 3 (tensor-only peaks, exchange rows apart)
VERSIONS = (2, 3)
#: a memory profile of the whole chip (1,472 tiles, a few hundred values and steps) is tens of MB of JSON
MEMORY_PROFILE_LIMIT = 64 * MIB
#: the planner's memory classes, as its reports spell them, and ours
CLASSES = {"Ipu21Standard": "standard", "Ipu21Interleaved": "interleaved"}
#: what the source of these frames is, as a view's title should say it
SOURCE = "ipu-stack planner memory profile (per-tile estimate before address placement)"
STEPS_SCHEMA: tables.Schema = {
    "step": tables.ID, "operation": tables.STR, "source": tables.BIG, "execution_count": tables.BIG,
    "live_roots": tables.BIG, "peak_tile": tables.ID, "peak_bytes": tables.BIG,
    "scratch_standard_bytes": tables.BIG, "scratch_interleaved_bytes": tables.BIG,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProfile:
    """One planner memory report: our occupancy and objects frames, its steps, and its header."""

    occupancy: pl.DataFrame   # OCCUPANCY_SCHEMA
    objects: pl.DataFrame     # OBJECTS_SCHEMA
    steps: pl.DataFrame       # STEPS_SCHEMA
    version: int
    scope: str
    tile_count: int
    budget_bytes: int
    interleaved_budget_bytes: int | None
    peak: dict[str, int] = field(default_factory=dict)
    peak_steps: dict[str, int | None] = field(default_factory=dict)
    model: str = ""
    file: str | None = None

    @property
    def peaks_include_exchange_rows(self) -> bool:
        """Version 2 counted exchange rows into ``peak.standard`` and ``peak.total``; version 3 keeps them apart."""
        return self.version == 2

    @property
    def synthetic(self) -> bool:
        return self.scope.startswith("synthetic")

    @property
    def label(self) -> str:
        """What these frames are, as a chart title says it."""
        if self.synthetic:   # "synthetic: x" / "synthetic from x" say it once
            rest = self.scope.removeprefix("synthetic").lstrip(": ")
            head = f"synthetic stand-in for an ipu-stack memory profile v{self.version}"
            return head + (f" ({rest})" if rest else "")
        return f"ipu-stack memory profile v{self.version} ({self.scope})"

    def reconstructed(self) -> pl.DataFrame:
        """Per (tile, step), the live bytes summed from ``objects`` beside the file's own ``live_bytes``."""
        o = self.objects
        steps = pl.DataFrame({"event": np.arange(self.steps.height, dtype=np.int32)})
        live = (o.join(steps, how="cross").filter((pl.col("first") <= pl.col("event"))
                                                   & (pl.col("last") >= pl.col("event")))
                .group_by("tile", "event").agg(pl.col("size_bytes").sum().alias("objects_bytes")))
        return (self.occupancy.select("tile", "event", "live_bytes")
                .join(live, on=["tile", "event"], how="left").with_columns(pl.col("objects_bytes").fill_null(0)))

    def __repr__(self) -> str:
        return tables.short_repr(self)


def read_memory_profile(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
                        limit: int = MEMORY_PROFILE_LIMIT) -> MemoryProfile:
    """Read an ipu-stack planner memory profile (JSON version 2 or 3) into our SRAM frames (module docstring).

    The file must be a regular file of at most ``limit`` bytes (with ``root``: inside it, no symlink out),
    UTF-8 JSON nested at most ``toolkit.files.MAX_DEPTH`` deep. Any other version, a missing or mistyped
    field, or arrays of the wrong length raise :class:`FormatError` naming the field and its value."""
    file = os.fspath(path)
    doc = load_json(read_bytes(path, limit=limit, root=root, what="memory profile"), file, what="memory profile")
    return parse_memory_profile(doc, file=file)


def parse_memory_profile(doc: Any, *, file: str | None = None) -> MemoryProfile:
    """:func:`read_memory_profile` on an already parsed document."""
    r = _Reader(file)
    r.mapping(doc, "the document")
    version = doc.get("version")
    if isinstance(version, bool) or version not in VERSIONS:
        raise FormatError(f"version={version!r}: not a memory profile version this reads (versions "
                          f"{', '.join(map(str, VERSIONS))})", file=file, field="version", value=version)
    tiles = r.count(doc, "tile_count", "", low=1)
    budget = r.count(doc, "budget_bytes", "")
    inter_budget = r.count(doc, "interleaved_budget_bytes", "") if "interleaved_budget_bytes" in doc else None
    peak = r.mapping(doc.get("peak"), "peak")
    peaks = {k: r.count(peak, k, "peak.") for k in ("standard", "interleaved", "total")}
    peaks.update({k: r.count(peak, k, "peak.") for k in peak if k not in peaks and isinstance(peak[k], int)})
    timeline = r.mapping(doc.get("timeline"), "timeline")
    values = r.array(timeline.get("values"), "timeline.values")
    steps = r.array(timeline.get("steps"), "timeline.steps")

    # values: alias roots, per-tile aligned bytes, class
    roots = np.empty(len(values), np.int64)
    names: list[str] = []
    classes: list[str] = []
    ids = np.empty(len(values), np.int64)
    tile_bytes = np.zeros((len(values), tiles), np.int64)
    for i, v in enumerate(values):
        where = f"timeline.values[{i}]"
        r.mapping(v, where)
        roots[i] = r.count(v, "root", where + ".")
        ids[i] = r.count(v, "id", where + ".") if "id" in v else i
        cls = v.get("class")
        if cls not in CLASSES:
            raise FormatError(f"{where}.class={cls!r} is not a memory class (one of {list(CLASSES)})", file=file,
                              field=f"{where}.class", value=cls)
        classes.append(CLASSES[cls])
        names.append(str(v.get("name") or f"value {ids[i]}"))
        tile_bytes[i] = r.vector(v.get("tile_bytes"), f"{where}.tile_bytes", tiles)

    # steps: live roots, usage and scratch per tile and class
    n = len(steps)
    usage = np.zeros((n, tiles, 2), np.int64)
    scratch = np.zeros((n, tiles, 2), np.int64)
    known = set(roots.tolist())
    live_first: dict[int, int] = {}
    live_last: dict[int, int] = {}
    rows: dict[str, list[Any]] = {k: [] for k in ("operation", "source", "execution_count", "live_roots")}
    for s, step in enumerate(steps):
        where = f"timeline.steps[{s}]"
        r.mapping(step, where)
        live = r.array(step.get("live"), where + ".live")
        for j, root in enumerate(live):
            if isinstance(root, bool) or not isinstance(root, int) or root not in known:
                raise FormatError(f"{where}.live[{j}]={root!r} is no value's root", file=file,
                                  field=f"{where}.live", value=root)
            live_first.setdefault(root, s)
            live_last[root] = s
        usage[s] = r.pairs(step.get("tile_usage"), where + ".tile_usage", tiles)
        scratch[s] = r.pairs(step.get("tile_scratch"), where + ".tile_scratch", tiles)
        rows["operation"].append(str(step.get("operation", "")))
        src = step.get("source")
        rows["source"].append(src if isinstance(src, int) and not isinstance(src, bool) else None)
        count = step.get("execution_count", 1)
        rows["execution_count"].append(count if isinstance(count, int) and not isinstance(count, bool) else None)
        rows["live_roots"].append(len(live))

    occupancy = _occupancy(usage, budget)
    objects = _objects(roots, ids, names, classes, tile_bytes, live_first, live_last, scratch)
    total = usage.sum(axis=2)
    step_frame = tables.frame({
        "step": np.arange(n), **rows,
        "peak_tile": total.argmax(axis=1) if n else np.zeros(0, np.int64),
        "peak_bytes": total.max(axis=1) if n else np.zeros(0, np.int64),
        "scratch_standard_bytes": scratch[:, :, 0].max(axis=1) if n else np.zeros(0, np.int64),
        "scratch_interleaved_bytes": scratch[:, :, 1].max(axis=1) if n else np.zeros(0, np.int64),
    }, STEPS_SCHEMA, what="memory profile steps")
    peak_steps = {k: doc.get(f"{k}_peak_step") for k in ("total", "standard", "interleaved")}
    return MemoryProfile(
        occupancy=occupancy, objects=objects, steps=step_frame, version=int(version),
        scope=str(doc.get("scope", "")), tile_count=tiles, budget_bytes=budget, interleaved_budget_bytes=inter_budget,
        peak=peaks, peak_steps={k: v if isinstance(v, int) and not isinstance(v, bool) else None
                                for k, v in peak_steps.items()},
        model=str(doc.get("model", "")), file=file)


def _occupancy(usage: np.ndarray, budget: int) -> pl.DataFrame:
    n, tiles, _ = usage.shape
    live = usage.sum(axis=2)
    null = pl.Series([None] * (n * tiles), dtype=tables.BIG)
    return tables.frame({
        "tile": np.tile(np.arange(tiles), n), "event": np.repeat(np.arange(n), tiles),
        "live_bytes": live.ravel(), "standard_bytes": usage[:, :, 0].ravel(),
        "interleaved_bytes": usage[:, :, 1].ravel(), "region0_bytes": null, "region1_bytes": null,
        "free_bytes": budget - live.ravel(), "largest_free_bytes": null,
    }, tables.OCCUPANCY_SCHEMA, what="memory profile occupancy").sort("tile", "event")


def _objects(roots: np.ndarray, ids: np.ndarray, names: list[str], classes: list[str], tile_bytes: np.ndarray,
             first: dict[int, int], last: dict[int, int], scratch: np.ndarray) -> pl.DataFrame:
    """One object per (live alias root, tile with bytes): the largest of its aliases' bytes there; scratch apart."""
    order = sorted(first)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("tile", "size", "first", "last", "root")}
    labels: list[str] = []
    kinds: list[str] = []
    cls: list[str] = []
    for k, root in enumerate(order):
        members = np.flatnonzero(roots == root)
        size = tile_bytes[members].max(axis=0)
        on = np.flatnonzero(size > 0)
        named = members[ids[members] == root]
        head = int(named[0] if len(named) else members[0])
        parts["tile"].append(on)
        parts["size"].append(size[on])
        parts["first"].append(np.full(len(on), first[root]))
        parts["last"].append(np.full(len(on), last[root]))
        parts["root"].append(np.full(len(on), k))
        labels.append(names[head])
        kinds.append(_kind(names[head]))
        cls.append(classes[head])
    # scratch: one object per (step, tile, class) with bytes, live at its step alone
    s, t, c = np.nonzero(scratch)
    tile = np.concatenate([*parts["tile"], t]).astype(np.int64)
    ref = np.concatenate([*parts["root"], len(order) + c]).astype(np.int64)
    label = pl.Series([*labels, "scratch (standard)", "scratch (interleaved)"]).gather(ref)
    kind = pl.Series([*kinds, "scratch", "scratch"]).gather(ref)
    klass = pl.Series([*cls, "standard", "interleaved"]).gather(ref)
    rows = len(tile)
    return tables.frame({
        "object_id": np.arange(rows), "tile": tile, "kind": kind, "name": label, "tensor_id": None,
        "size_bytes": np.concatenate([*parts["size"], scratch[s, t, c]]),
        "align": np.ones(rows, np.int64),
        "first": np.concatenate([*parts["first"], s]), "last": np.concatenate([*parts["last"], s]),
        "access": "data", "class": klass,
        "regions": pl.Series([[] for _ in range(rows)], dtype=pl.List(pl.Int8)),
        "group": None, "alias_of": None, "repeat_count": np.ones(rows, np.int64),
        "separate_from": pl.Series([[] for _ in range(rows)], dtype=pl.List(pl.Int64)), "auxiliary": False,
    }, tables.OBJECTS_SCHEMA, what="memory profile objects").sort("tile", "first", "object_id")


def _kind(name: str) -> str:
    """Our object kind from the planner's value name: operation results are activations, body arguments
    arguments, the rest graph inputs (parameters and host inputs, which the report does not tell apart)."""
    if name.endswith("(body argument)"):
        return "argument"
    if name.startswith("operation ") and " result " in name:
        return "activation"
    return "input"


class _Reader:
    """Checks of the document's parts that raise FormatError naming the field and its value."""

    def __init__(self, file: str | None) -> None:
        self.file = file

    def _fail(self, field: str, value: Any, want: str) -> FormatError:
        shown = value if not isinstance(value, (list, dict)) else f"{type(value).__name__} of {len(value)}"
        return FormatError(f"{field}={shown!r}: expected {want}", file=self.file, field=field, value=shown)

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self._fail(field, type(value).__name__, "an object")
        return value

    def array(self, value: Any, field: str) -> list:
        if not isinstance(value, list):
            raise self._fail(field, value if value is None else type(value).__name__, "an array")
        return value

    def count(self, doc: dict, key: str, prefix: str, *, low: int = 0) -> int:
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._fail(prefix + key, value, f"an integer >= {low}")
        return value

    def vector(self, value: Any, field: str, tiles: int) -> np.ndarray:
        arr = self._ints(value, field)
        if arr.shape != (tiles,):
            raise self._fail(field, value, f"{tiles} non-negative integers, one per tile")
        return arr

    def pairs(self, value: Any, field: str, tiles: int) -> np.ndarray:
        arr = self._ints(value, field)
        if arr.shape != (tiles, 2):
            raise self._fail(field, value, f"{tiles} [standard, interleaved] pairs, one per tile")
        return arr

    def _ints(self, value: Any, field: str) -> np.ndarray:
        if not isinstance(value, list):
            raise self._fail(field, value, "an array")
        try:
            arr = np.asarray(value, dtype=object)
            flat = arr.ravel() if arr.dtype == object else arr
            if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in flat):
                raise ValueError
            return np.asarray(value, dtype=np.int64)
        except (ValueError, OverflowError, TypeError):
            raise self._fail(field, value, "non-negative integers") from None


def synthetic_memory_profile(objects: pl.DataFrame, tiles: int, *, scope: str = "synthetic",
                             budget_bytes: int = 0, interleaved_budget_bytes: int = 0) -> dict[str, Any]:
    """A version-3 memory profile document built from our objects (``OBJECTS_SCHEMA``): **synthetic**, not a
    report of the real compiler. Objects that share a name, class and lifetime are one value (its
    ``tile_bytes`` their sizes per tile, iterated parameters times their instances); aliases are left out
    (their root holds the storage); events are the steps; there is no scratch. ``scope`` starts with
    ``synthetic`` so :attr:`MemoryProfile.synthetic` says what it is."""
    if not scope.startswith("synthetic"):
        scope = f"synthetic: {scope}"
    o = objects.filter(pl.col("alias_of").is_null() | (pl.col("alias_of") == pl.col("object_id")))
    o = o.with_columns((pl.col("size_bytes") * pl.col("repeat_count").fill_null(1).clip(1, None)).alias("_bytes"))
    groups = (o.group_by("name", "class", "first", "last", maintain_order=True)
              .agg(pl.col("tile"), pl.col("_bytes")).sort("first", "name"))
    steps = int(o["last"].max()) + 1 if o.height else 0
    tb = np.zeros((groups.height, tiles), np.int64)
    for g, (t, b) in enumerate(zip(groups["tile"].to_list(), groups["_bytes"].to_list(), strict=True)):
        np.add.at(tb[g], np.asarray(t, np.int64), np.asarray(b, np.int64))
    cls = groups["class"].to_numpy()
    first, last = groups["first"].to_numpy(), groups["last"].to_numpy()
    values = [{"id": g, "origin": g, "root": g, "name": name, "group": name, "class": f"Ipu21{c.capitalize()}",
               "copies": 1, "tile_bytes": tb[g].tolist()}
              for g, (name, c) in enumerate(zip(groups["name"].to_list(), cls.tolist(), strict=True))]
    step_rows = []
    peak = {"standard": 0, "interleaved": 0, "total": 0, "exchange_rows": 0, "maximum_standard_allocation": 0}
    for e in range(steps):
        live = np.flatnonzero((first <= e) & (last >= e))
        std = tb[live[cls[live] == "standard"]].sum(axis=0)
        inter = tb[live[cls[live] == "interleaved"]].sum(axis=0)
        peak["standard"] = max(peak["standard"], int(std.max(initial=0)))
        peak["interleaved"] = max(peak["interleaved"], int(inter.max(initial=0)))
        peak["total"] = max(peak["total"], int((std + inter).max(initial=0)))
        step_rows.append({"index": e, "source": None, "operation": f"event {e}", "execution_count": 1,
                          "live": live.tolist(), "tile_usage": np.column_stack([std, inter]).tolist(),
                          "tile_scratch": [[0, 0]] * tiles})
    return {"version": 3, "scope": scope, "model": "synthetic: built by toolkit from its own objects, not by the "
            "ipu-stack planner", "tile_count": tiles, "budget_bytes": budget_bytes,
            "interleaved_budget_bytes": interleaved_budget_bytes, "peak": peak,
            "timeline": {"values": values, "steps": step_rows}}


def write_memory_profile(doc: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a memory profile document (:func:`synthetic_memory_profile`'s) as JSON, through a temporary
    sibling (no half-written file); returns the path."""
    import json

    from toolkit.files.write import atomic_write
    return atomic_write(path, lambda tmp: tmp.write_text(json.dumps(doc)))


def compilation_memory_profile(compilation: Any, path: str | os.PathLike[str]) -> MemoryProfile:
    """The **synthetic** memory profile of ``compilation`` (a :class:`toolkit.pipeline.Compilation`): its
    schedule's and package's objects as a version-3 document (:func:`synthetic_memory_profile`, budget the
    target's loadable bytes) written to ``path`` and read back as a real report is, for a view that shows a
    memory profile beside our placement of the same program when no report of the real compiler is at hand."""
    target = compilation.target
    every = pl.concat([compilation.schedule.objects, compilation.package.objects], how="vertical_relaxed")
    doc = synthetic_memory_profile(every, target.tiles, scope=f"synthetic from toolkit's objects of "
                                   f"{compilation.workload}", budget_bytes=target.load_limit - target.memory_start)
    return read_memory_profile(write_memory_profile(doc, path))


__all__ = ["MEMORY_PROFILE_LIMIT", "STEPS_SCHEMA", "VERSIONS", "MemoryProfile", "compilation_memory_profile",
           "parse_memory_profile", "read_memory_profile", "synthetic_memory_profile", "write_memory_profile"]
