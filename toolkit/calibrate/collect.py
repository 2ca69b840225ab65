"""Compile every measured program once and take its feature counts (FEATURES_SCHEMA rows)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import polars as pl

from toolkit.calibrate.features import program_features

#: one row per measured program compiled: its identity, hardware cycles, the simulated cycles as compiled
#: (``simulated``), the plan kinds of its chosen layout (``kinds``, ``;``-separated evidence keys), the seconds it
#: took, and the feature count of each fitted constant in a struct column ``features`` (``base``: the
#: re-scheduled simulated cycles at the compiled constants)
FEATURE_COLUMNS = {"workload": pl.String, "families": pl.String, "control_of": pl.String, "pinned": pl.Boolean,
                   "kernel_build": pl.String, "hardware_cycles": pl.Int64, "simulated": pl.Int64,
                   "kinds": pl.String, "seconds": pl.Float64, "error": pl.String}


def collect_features(programs: pl.DataFrame, parameters: tuple[str, ...],
                     progress: Callable[[str, int, int], None] | None = None) -> pl.DataFrame:
    """Feature counts of every row of ``programs`` (hardware_programs() rows); a row that fails to compile keeps
    its ``error`` and null features."""
    import toolkit
    from toolkit.errors import ToolkitError
    from toolkit.evidence import compilation_kinds
    from toolkit.graph import get_workload
    from toolkit.profile import crop
    from toolkit.report import hardware_program
    rows = []
    for i, row in enumerate(programs.iter_rows(named=True)):
        if progress is not None:
            progress(row["workload"], i, programs.height)
        preset, overrides, options = hardware_program(row)
        rec = {"workload": row["workload"], "families": row["families"], "control_of": row["control_of"],
               "pinned": "plans" in options, "kernel_build": options.get("kernel_build", "current"),
               "hardware_cycles": row["hardware_cycles"], "simulated": None, "kinds": None, "seconds": None,
               "error": None, **{p: None for p in ("base", *parameters)}}
        t = time.perf_counter()
        try:
            c = toolkit.compile(get_workload(preset, **overrides), options=options)
            rec["simulated"] = int(crop(c.profile).cropped_cycles)
            rec["kinds"] = ";".join(compilation_kinds(c)["kind"].unique(maintain_order=True).to_list())
            rec.update(program_features(c, parameters))
        except ToolkitError as exc:
            rec["error"] = str(exc).splitlines()[0]
        rec["seconds"] = time.perf_counter() - t
        rows.append(rec)
    schema = {**FEATURE_COLUMNS, "base": pl.Float64, **{p: pl.Float64 for p in parameters}}
    return pl.DataFrame(rows, schema=schema, orient="row")


def options_of(row: dict) -> dict:
    return json.loads(row["options"] or "{}")
