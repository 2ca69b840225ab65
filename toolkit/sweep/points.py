"""Sweep points: a grid (from ``-g`` flags, a mapping or a TOML file) expanded into validated, identified points.

A point is one workload (with its ``batch`` and ``blocks``) and one canonical
:class:`~toolkit.options.Options` value. Its id is a hash of the resolved
workload fields, the canonical options, the target's fields and the toolkit
version, so the same point always gets the same id and a dataset directory can
tell which points it already holds. Every check here runs before any point
does: a bad grid costs no compile.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import FormatError, OptionError
from toolkit.files import TEXT_LIMIT, load_toml, read_bytes
from toolkit.layout.constraints import check_plan_texts
from toolkit.options import Options, as_options
from toolkit.target import Target

#: the most points one sweep may have (README: Limits); a bigger grid is refused before it is expanded
MAX_POINTS = 10_000
WORKLOAD_KEYS = ("batch", "blocks")   # grid keys that are workload parameters, not compile options
GRID_FILE_KEYS = ("workloads", "grid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One compile of a sweep: a preset with its parameters, canonical options and the point's stable id."""

    id: str
    workload: str
    batch: int
    blocks: int
    weight_dtype: str          # the matmul weight format compiled (the option, else the preset's)
    options: Options
    target_digest: str = ""    # SHA-256 (16 hex digits) of the target's fields: which machine it compiled for


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values; names and values are checked (as compile options, or as the
    workload parameters ``batch`` / ``blocks``) before anything runs."""
    if not isinstance(grid, Mapping):
        msg = f"a sweep grid must map keys to lists of values, got {type(grid).__name__}"
        raise OptionError(msg, field="grid", value=grid)
    axes = {key: _axis(key, values) for key, values in grid.items()}
    _check_size(math.prod(len(v) for v in axes.values()), {k: len(v) for k, v in axes.items()})
    keys = list(axes)
    points = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes.values())]
    for p in points:
        for key in WORKLOAD_KEYS:
            if key in p:
                _check_workload_value(key, p[key])
        options = as_options({k: v for k, v in p.items() if k not in WORKLOAD_KEYS})  # unknown names, bad values
        check_plan_texts(options.plans)   # every plan label and ipu-stack line read before any point runs
    return points or [{}]


def _check_size(n: int, what: dict[str, int]) -> None:
    if n > MAX_POINTS:
        sizes = " x ".join(f"{v} {k}" for k, v in what.items())
        msg = (f"the sweep has {n:,} points ({sizes}); the limit is {MAX_POINTS:,} points per sweep: split the "
               f"grid into several sweeps into the same --out")
        raise OptionError(msg, field="grid", value=n)


def _axis(key: Any, values: Any) -> list[Any]:
    if not isinstance(key, str):
        raise OptionError(f"grid key {key!r} must be an option name (a string)", field=str(key), value=key)
    if len(str(key)) > 200:
        raise OptionError(f"grid key {str(key)[:40]!r}... is {len(str(key))} characters; not an option name",
                          field="grid", value=str(key)[:40])
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | set | frozenset):
        msg = (f"grid {key}={values!r} must be a list of values (a generator or iterator would be used up "
               f"once; pass list(...))")
        raise OptionError(msg, field=key, value=values)
    axis = list(values)
    if not axis:
        raise OptionError(f"grid {key}={values!r} must be a non-empty list of values", field=key, value=values)
    seen: list[Any] = []
    for v in axis:
        if any(v == s and type(v) is type(s) for s in seen):
            msg = f"grid {key} lists {v!r} twice; give every value once"
            raise OptionError(msg, field=key, value=v)
        seen.append(v)
    return axis


def _check_workload_value(key: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        msg = f"grid {key}={value!r} must be a positive integer (a workload parameter)"
        raise OptionError(msg, field=key, value=value)


def sweep_points(workloads: Sequence[str], grid: Mapping[str, Sequence[Any]] | None,
                 target: Target) -> list[Point]:
    """The points of ``workloads`` x ``grid`` in order, each with its id; unknown workloads, repeated
    workloads and bad grids fail here."""
    from toolkit import __version__
    from toolkit.graph import PRESETS, get_workload
    if isinstance(workloads, str):
        workloads = [workloads]
    if not isinstance(workloads, Sequence) or not all(isinstance(w, str) for w in workloads):
        msg = f"workloads={workloads!r} must be a list of preset names (see toolkit.workloads())"
        raise OptionError(msg, field="workloads", value=workloads)
    workloads = list(workloads)
    if not workloads:
        msg = ("a sweep needs at least one workload: name presets (see `toolkit workloads`) or give "
               "workloads = [...] in a grid file")
        raise OptionError(msg, field="workloads", value=workloads)
    unknown = [w for w in workloads if w not in PRESETS]
    if unknown:
        msg = f"unknown workload(s) {unknown}; presets: {sorted(PRESETS)}"
        raise OptionError(msg, field="workloads", value=unknown[0])
    twice = sorted({w for w in workloads if workloads.count(w) > 1})
    if twice:
        raise OptionError(f"workload {twice[0]!r} is given twice; give it once", field="workloads", value=twice[0])
    if not isinstance(target, Target):
        raise OptionError(f"target must be a Target, not {type(target).__name__}", field="target", value=target)
    if grid is not None and isinstance(grid, Mapping):
        _check_size(len(workloads) * math.prod(len(v) if isinstance(v, Sequence | set | frozenset) else 1
                                               for v in grid.values()), {"workloads": len(workloads)} | {
            k: len(v) for k, v in grid.items() if isinstance(v, Sequence | set | frozenset)})
    combos = grid_points(grid or {})
    target_digest = digest(target.to_dict())
    points: dict[str, Point] = {}
    for name in workloads:
        for combo in combos:
            params = {k: combo[k] for k in WORKLOAD_KEYS if k in combo}
            options = as_options({k: v for k, v in combo.items() if k not in WORKLOAD_KEYS})
            workload = get_workload(name, **params)
            pid = digest({"workload": dataclasses.asdict(workload), "options": canonical(options),
                          "target": target_digest, "toolkit": __version__})[:16]
            points.setdefault(pid, Point(id=pid, workload=name, batch=workload.batch, blocks=workload.blocks,
                                         weight_dtype=options.weight_dtype or workload.weight_dtype,
                                         options=options, target_digest=target_digest[:16]))
    return list(points.values())


def canonical(options: Options) -> dict[str, Any]:
    """The options as plain JSON values (tuples as lists, plans sorted by the Options parser)."""
    return json.loads(json.dumps(dataclasses.asdict(options)))


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def read_grid_file(path: str | Path) -> tuple[list[str], dict[str, list[Any]]]:
    """``workloads = [...]`` and a ``[grid]`` table from a TOML file (TOML itself refuses a repeated key)."""
    if not isinstance(path, str | Path):
        raise OptionError(f"path={path!r} must be a path to a TOML grid file, not {type(path).__name__}",
                          field="path", value=path)
    p = Path(path)
    data = load_toml(read_bytes(p, limit=TEXT_LIMIT, what="grid file"), str(p), "the grid file")
    extra = sorted(set(data) - set(GRID_FILE_KEYS))
    if extra:
        msg = f"unknown key {extra[0]!r}; a grid file holds {' and '.join(GRID_FILE_KEYS)} (a [grid] table)"
        raise FormatError(msg, file=str(p), field=extra[0])
    workloads = data.get("workloads", [])
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        msg = f"workloads = {workloads!r} must be a list of preset names, e.g. workloads = [\"mlp-single-b1\"]"
        raise FormatError(msg, file=str(p), field="workloads")
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise FormatError("grid must be a table: [grid] with key = [values] lines", file=str(p), field="grid")
    for key, values in grid.items():
        if not isinstance(values, list):
            msg = f"grid {key} = {values!r} must be an array of values, e.g. {key} = [{values!r}]"
            raise OptionError(msg, field=key, value=values)
    return workloads, grid


def merge_grids(*grids: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """One grid from several sources (``-g`` flags, a grid file); a key in two of them is refused by name."""
    out: dict[str, Sequence[Any]] = {}
    for grid in grids:
        for key, values in grid.items():
            if key in out:
                msg = f"grid key {key!r} is given twice; give every value once: {key}=v1,v2"
                raise OptionError(msg, field=key, value=values)
            out[key] = values
    return out
