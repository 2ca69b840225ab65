"""Generators of memory-object frames: a synthetic chip workload and hypothesis strategies.

:func:`synthetic_objects` builds a realistic-looking ``OBJECTS_SCHEMA`` frame for
every tile of a target from a few distinct per-tile templates (weights,
activations, staging, code, support, iterated parameters, bank-separated
operands, auxiliary scratch), in bulk with numpy. :func:`object_frames` is a
hypothesis strategy of small mixed-class frames for property tests
(hypothesis is only imported when it is called).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from toolkit.tables import OBJECTS_SCHEMA
from toolkit.target import Target, ipu21

KINDS = ("weight", "activation", "staging", "exchange_rows", "run_table", "argument_record")


def _template(rng: np.random.Generator, count: int, events: int, budget: int) -> dict[str, Any]:
    """One tile's objects (local ids 0..count-1) whose live bytes stay near ``budget``."""
    kind = rng.choice(KINDS, size=count, p=[0.3, 0.35, 0.1, 0.1, 0.1, 0.05])
    first = rng.integers(0, events, size=count)
    length = np.where(kind == "weight", events, rng.geometric(0.15, size=count))
    last = np.minimum(first + length - 1, events - 1)
    first = np.where(kind == "weight", 0, first)
    size = (rng.lognormal(8.5, 1.2, size=count).astype(np.int64) // 16 + 1) * 16
    interleaved = (kind == "weight") & (rng.random(count) < 0.6)
    align = np.where(interleaved, 16, rng.choice([4, 8, 16], size=count))
    # scale sizes so the busiest event uses about ``budget`` bytes
    t = np.arange(events)
    live = ((first[None, :] <= t[:, None]) & (last[None, :] >= t[:, None])) @ size
    scale = budget / max(int(live.max()), 1)
    size = np.maximum((size * scale).astype(np.int64) // 16 * 16, 16)
    cls = np.where(interleaved, "interleaved", "standard")
    regions = [[1] if i else [0, 1] for i in interleaved]
    repeat = np.ones(count, np.int64)
    rep = (kind == "weight") & (rng.random(count) < 0.1)
    repeat[rep] = rng.integers(2, 4, size=int(rep.sum()))
    size[rep] = np.maximum(size[rep] // repeat[rep], 16)
    separate: list[list[int]] = [[] for _ in range(count)]
    acts = np.flatnonzero((kind == "activation") & (size < 12_000))
    for a, b in zip(acts[:2:2], acts[1:3:2], strict=False):
        separate[a] = [int(b)]
    aux = np.zeros(count, bool)
    aux[-1] = True
    size[-1] = 256
    access = np.full(count, "data", dtype=object)
    kind = kind.astype(object)
    # one code object and one support block, live over the whole program
    access[0], kind[0], cls[0], regions[0], size[0] = "executable", "code", "standard", [0], 12_288
    first[0], last[0], align[0], repeat[0], separate[0] = 0, events - 1, 16, 1, []
    kind[1], cls[1], regions[1], size[1], first[1], last[1], repeat[1] = "support", "standard", [0, 1], 4096, 0, \
        events - 1, 1
    return {"kind": kind, "size_bytes": size, "align": align, "first": first, "last": last, "access": access,
            "class": cls, "regions": regions, "repeat_count": repeat, "separate_from": separate, "auxiliary": aux}


def synthetic_objects(target: Target | None = None, *, signatures: int = 20, objects: tuple[int, int] = (30, 200),
                      events: int = 60, load: float = 0.7, seed: int = 0) -> pl.DataFrame:
    """Objects for every tile of ``target``, drawn from ``signatures`` distinct per-tile templates."""
    target = target or ipu21()
    rng = np.random.default_rng(seed)
    budget = int(load * (target.load_limit - target.memory_start))
    templates = [_template(rng, int(rng.integers(objects[0], objects[1] + 1)), events, budget)
                 for _ in range(signatures)]
    choice = rng.integers(0, signatures, size=target.tiles)
    counts = np.array([len(t["size_bytes"]) for t in templates])
    cols: dict[str, Any] = {}
    for name in templates[0]:
        parts = [np.asarray(t[name], dtype=object if name in ("regions", "separate_from") else None)
                 for t in templates]
        flat = np.concatenate(parts) if name not in ("regions", "separate_from") else [x for p in parts for x in p]
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        index = np.concatenate([starts[c] + np.arange(counts[c]) for c in choice])
        cols[name] = [flat[i] for i in index] if isinstance(flat, list) else flat[index]
    tile = np.repeat(np.arange(target.tiles), counts[choice])
    local = np.concatenate([np.arange(counts[c]) for c in choice])
    stride = 1000
    object_id = tile.astype(np.int64) * stride + local
    base = tile.astype(np.int64) * stride
    cols["separate_from"] = [[int(b + x) for x in s] for s, b in zip(cols["separate_from"], base, strict=True)]
    n = len(tile)
    df = pl.DataFrame({
        "object_id": object_id, "tile": tile, "kind": list(cols["kind"]),
        "name": pl.Series([None] * n, dtype=pl.String), "tensor_id": pl.Series([None] * n, dtype=pl.Int32),
        "size_bytes": cols["size_bytes"], "align": cols["align"], "first": cols["first"], "last": cols["last"],
        "access": list(cols["access"]), "class": list(cols["class"]), "regions": cols["regions"],
        "group": pl.Series([None] * n, dtype=pl.Int64), "alias_of": pl.Series([None] * n, dtype=pl.Int64),
        "repeat_count": cols["repeat_count"], "separate_from": cols["separate_from"],
        "auxiliary": cols["auxiliary"],
    })
    return df.select([pl.col(c).cast(t) for c, t in OBJECTS_SCHEMA.items()])


def objects_frame(rows: list[dict[str, Any]], *, tile: int = 0) -> pl.DataFrame:
    """A small OBJECTS_SCHEMA frame from dicts (defaults: data, standard, regions [0, 1], align 4)."""
    defaults = {"tile": tile, "kind": "activation", "name": None, "tensor_id": None, "align": 4,
                "access": "data", "class": "standard", "regions": [0, 1], "group": None, "alias_of": None,
                "repeat_count": 1, "separate_from": [], "auxiliary": False}
    full = [{**defaults, "object_id": k, **r} for k, r in enumerate(rows)]
    return pl.DataFrame(full, schema=OBJECTS_SCHEMA)


def object_frames(max_objects: int = 24, events: int = 12):  # pragma: no cover - exercised by tests
    """Hypothesis strategy: one tile of mixed-class objects with random lifetimes, sizes and alignments."""
    from hypothesis import strategies as st

    obj = st.fixed_dictionaries({
        "size_bytes": st.integers(1, 40_000),
        "align": st.sampled_from([1, 4, 8, 16]),
        "first": st.integers(0, events - 1),
        "length": st.integers(1, events),
        "class": st.sampled_from(["standard", "interleaved"]),
        "repeat_count": st.sampled_from([1, 1, 1, 2, 3]),
        "auxiliary": st.sampled_from([False, False, False, True]),
    })

    def build(rows: list[dict[str, Any]]) -> pl.DataFrame:
        out = []
        for r in rows:
            inter = r["class"] == "interleaved"
            out.append({"size_bytes": r["size_bytes"], "align": 16 if inter else r["align"], "first": r["first"],
                        "last": min(r["first"] + r["length"] - 1, events - 1), "class": r["class"],
                        "regions": [1] if inter else [0, 1], "repeat_count": r["repeat_count"],
                        "auxiliary": r["auxiliary"]})
        return objects_frame(out)

    return st.lists(obj, min_size=1, max_size=max_objects).map(build)
