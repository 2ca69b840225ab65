"""Sweeps: a grid of options over workloads, run in local processes or on a Dask cluster.

``sweep(["mlp-single-b1"], {"row_block": [18, 36]})`` compiles every
(workload, option combination) and returns one row per run: the grid values,
the compilation summary, wall time, and an ``error`` column (a failed run is a
row with its error message, never a lost sweep). ``out`` writes the rows as
one Parquet dataset (one file per workload). With ``scheduler`` (a Dask
address such as ``tcp://10.0.0.5:8786``, or a ``distributed.Client``) the runs
go to that cluster; otherwise to a local process pool.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import OptionError, ToolkitError
from toolkit.files import atomic_write
from toolkit.options import as_options


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values (validated as compile options)."""
    axes: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence | set | frozenset):
            msg = (f"grid {key}={values!r} must be a list of values (a generator or iterator would be used up "
                   f"once; pass list(...))")
            raise OptionError(msg, field=key, value=values)
        axes[key] = list(values)
        if not axes[key]:
            msg = f"grid {key}={values!r} must be a non-empty list of values"
            raise OptionError(msg, field=key, value=values)
    keys = list(axes)
    points = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(axes[k] for k in keys))]
    for p in points:
        as_options(p)  # unknown names and bad values fail before anything runs
    return points or [{}]


def run_one(workload: str, point: dict[str, Any]) -> dict[str, Any]:
    """Compile one grid point; errors become a row, not an exception."""
    import toolkit
    start = time.perf_counter()
    row: dict[str, Any] = {"workload": workload, **{f"opt_{k}": str(v) for k, v in point.items()}}
    try:
        c = toolkit.compile(workload, options=point)
        row.update(c.summary().drop("workload").row(0, named=True))
        row["error"] = None
    except ToolkitError as exc:
        row["error"] = str(exc).splitlines()[0]
    row["seconds"] = time.perf_counter() - start
    return row


def sweep(workloads: Sequence[str], grid: Mapping[str, Sequence[Any]] | None = None, *,
          scheduler: Any = None, workers: int = 2, out: str | Path | None = None) -> pl.DataFrame:
    """Compile every workload at every grid point; see the module docstring."""
    if isinstance(workloads, str):
        workloads = [workloads]
    from toolkit.graph import PRESETS
    unknown = [w for w in workloads if w not in PRESETS]
    if unknown:   # before any point runs, not as error rows
        msg = f"unknown workload(s) {unknown}; presets: {sorted(PRESETS)}"
        raise OptionError(msg, field="workloads", value=unknown[0])
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        msg = f"sweep --out {out} is a file; give a directory for the dataset"
        raise OptionError(msg, field="out", value=str(out))
    points = grid_points(grid or {})
    jobs = [(w, p) for w in workloads for p in points]
    if scheduler is not None:
        rows = _on_dask(jobs, scheduler)
    elif workers <= 1:
        rows = [run_one(w, p) for w, p in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(run_one, *zip(*jobs, strict=True)))
    df = pl.DataFrame(rows, infer_schema_length=None)
    if out is not None:
        write_dataset(df, out)
    return df


def _on_dask(jobs: list[tuple[str, dict]], scheduler: Any) -> list[dict]:
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        msg = "a Dask scheduler was given but dask.distributed is not installed: pip install 'toolkit[distributed]'"
        raise OptionError(msg, field="scheduler", value=scheduler) from exc
    if isinstance(scheduler, Client):
        client = scheduler
    else:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            msg = f"cannot reach the Dask scheduler at {scheduler!r} within 10 s: {exc}"
            raise OptionError(msg, field="scheduler", value=scheduler) from None
    try:
        futures = [client.submit(run_one, w, p, pure=False) for w, p in jobs]
        return client.gather(futures)
    finally:
        if client is not scheduler:
            client.close()


def write_dataset(df: pl.DataFrame, out: str | Path) -> Path:
    """One Parquet file per workload under ``out`` (written to temporary names, then renamed)."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"cannot create the sweep dataset {out}: {exc.strerror}", field="out",
                          value=str(out)) from exc
    for (workload,), part in df.group_by("workload"):
        atomic_write(out / f"workload={workload}.parquet", lambda tmp, p=part: p.write_parquet(tmp, compression="zstd"))
    return out
