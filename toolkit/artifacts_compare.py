"""Committed cases side by side: their headline numbers, where their cycles go, and whether they pass their checks.

A directory of cases (``artifacts/<experiment>/``, see :mod:`toolkit.artifacts`)
reads back into one frame per question:

- :func:`check_cases`: one row per case, its integrity problems
  (:func:`~toolkit.artifacts.verify_case`: manifest schema, every file's size
  and SHA-256) and its consistency problems
  (:func:`~toolkit.artifacts.check_artifacts`: directory name, manifest and
  log agree); :func:`verdict` says the result in one sentence;
- :func:`compare_cases`: one row per case (COMPARE_SCHEMA), the numbers its
  manifest and tables hold, beside the hardware measurement of the workload
  where one exists; :func:`describe` gives every column's unit and meaning;
- :func:`case_cycles`: per case and category, the cycles its profile spends
  (CASE_CYCLES_SCHEMA), drawn by :func:`toolkit.viz.cases.case_cycles_chart`.

Every cycle count here comes from a case's own files: ``source`` says whether
the profile was simulated or measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import polars as pl

from toolkit import tables
from toolkit.artifacts import MANIFEST, Case, check_artifacts, load_case, read_manifest, verify_case
from toolkit.errors import OptionError
from toolkit.profile import CATEGORIES, category_cycles, crop, query, timeline_categories
from toolkit.report import hardware_figure
from toolkit.schedule import block_instances

#: check_cases: one row per case directory
CHECK_SCHEMA: tables.Schema = {
    "case": tables.STR, "files": tables.BIG, "integrity_problems": tables.BIG, "consistency_problems": tables.BIG,
    "passed": pl.Boolean, "problems": tables.STR,   # every problem, "; "-separated ("" when the case passes)
    "stale": pl.Boolean,     # compiled by another toolkit or under another definition (Case.stale); null: unread
    "provenance": tables.STR,   # Staleness.short: "current" or "stale: <first reason> (+N more)"
}
#: compare_cases: one row per case; the unit and meaning of every column are in COLUMNS
COMPARE_SCHEMA: tables.Schema = {
    "case": tables.STR, "provenance": tables.STR, "workload": tables.STR, "source": tables.STR,
    "tiles_used": tables.BIG,
    "simulated_cycles": tables.BIG, "simulated_us": pl.Float64, "hardware_cycles": tables.BIG,
    "vs_hardware": pl.Float64, "lowered_cycles": tables.BIG, "lowered_compute_cycles": tables.BIG,
    "lowered_exchange_cycles": tables.BIG, "lowered_sync_cycles": tables.BIG, "max_abs_error": pl.Float64,
    "peak_sram_bytes": tables.BIG, "lowered_launches": tables.BIG, "exchange_steps": tables.BIG,
    "exchange_sent_bytes": tables.BIG, "exchange_delivered_bytes": tables.BIG,
}
#: column -> (unit, what the number is)
COLUMNS: dict[str, tuple[str, str]] = {
    "case": ("", "the case directory's name"),
    "provenance": ("", "current, or stale: compiled by another toolkit version or under other options, target, "
                       "cost model or workload definition than this toolkit would use (the first reason; "
                       "Case.provenance_report and toolkit.artifacts.stale_artifacts list them all)"),
    "workload": ("", "the preset the case compiled (manifest workload)"),
    "source": ("", "where the profile came from: simulated (this toolkit's simulator) or hardware"),
    "tiles_used": ("tiles", "tiles with any step"),
    "simulated_cycles": ("cycles", "the profile's cycles, cropped as the hardware renderer crops them "
                                   "(manifest cropped_cycles); simulated when source is simulated"),
    "simulated_us": ("microseconds", "simulated_cycles at the manifest's clock"),
    "hardware_cycles": ("cycles", "the real compiler's own program for the workload measured on a C600, "
                                  "renderer-cropped (toolkit.report.hardware_programs); null when none exists"),
    "vs_hardware": ("ratio", "simulated_cycles / hardware_cycles (below 1: the simulation is faster)"),
    **{k: ("cycles", f"{tables.SUMMARY_MEANINGS[k]} (manifest summary {k})")
       for k in ("lowered_cycles", "lowered_compute_cycles", "lowered_exchange_cycles", "lowered_sync_cycles")},
    "max_abs_error": ("output units", "the functional check: largest |device result - float64 reference| over "
                                      "every output element (manifest max_abs_error); null when not checked"),
    "peak_sram_bytes": ("bytes", f"{tables.SUMMARY_MEANINGS['peak_sram_bytes']} (manifest summary peak_sram_bytes)"),
    "lowered_launches": ("launches", f"{tables.SUMMARY_MEANINGS['lowered_launches']} (manifest summary "
                                     f"lowered_launches)"),
    "exchange_steps": ("steps", "lowered exchange steps, repeat instances expanded"),
    "exchange_sent_bytes": ("bytes", "bytes the sending tiles put on the exchange (each message once), "
                                     "repeat instances expanded (tables/exchange.summary words)"),
    "exchange_delivered_bytes": ("bytes", "bytes the receiving tiles take in (a multicast counted once per "
                                          "receiver), repeat instances expanded (exchange.summary delivered_words)"),
}
#: case_cycles: per case and category
CASE_CYCLES_SCHEMA: tables.Schema = {
    "case": tables.STR, "category": tables.STR,
    "cycles": tables.BIG,               # summed over the profile's tiles (tile-cycles)
    "per_tile_cycles": pl.Float64,      # cycles / tiles: a row's per_tile_cycles add up to cropped_cycles
    "share": pl.Float64,                # of the case's tiles x cropped cycles
    "tiles": tables.BIG,                # tiles of the profile
    "cropped_cycles": tables.BIG,
}
#: case_cycles groupings: the profile's sample kinds, or the hardware renderer's timeline categories
#: (stacking order: compute first, idle last)
GROUPINGS: dict[str, tuple[str, ...]] = {"kind": ("compute", "exchange", "synchronization", "idle"),
                                         "category": CATEGORIES}

Cases = Mapping[str, Case]


def case_dirs(root: str | Path) -> list[Path]:
    """The case directories under ``root`` (every directory holding a manifest, not following links nor entering
    the temporaries of interrupted writes), by name."""
    from toolkit.artifacts.check import walk_cases
    if not isinstance(root, str | Path):
        raise OptionError(f"root={root!r} must be a path, not {type(root).__name__}", field="root", value=root)
    root = Path(root)
    if not root.is_dir():
        msg = f"{root} is not a directory of cases; pass e.g. artifacts/joint-placement"
        raise OptionError(msg, field="root", value=str(root))
    dirs = sorted(walk_cases(root)[0], key=lambda p: (p.name, p.as_posix()))
    if not dirs:
        msg = f"no case (no {MANIFEST}) under {root}"
        raise OptionError(msg, field="root", value=str(root))
    return dirs


def load_cases(root: str | Path) -> dict[str, Case]:
    """Every case under ``root`` read back (:func:`~toolkit.artifacts.load_case`), keyed by directory name."""
    return {d.name: load_case(d) for d in case_dirs(root)}


def check_cases(root: str | Path) -> pl.DataFrame:
    """One row per case under ``root`` (CHECK_SCHEMA): its integrity and consistency problems."""
    dirs = case_dirs(root)
    consistency = check_artifacts(root)
    rows = []
    for d in dirs:
        found = verify_case(d)
        integrity = [p for _, p in found]
        mine = consistency.filter(pl.col("case") == d.as_posix())   # check_artifacts repeats the integrity ones
        other = [p for f, p in zip(mine["field"], mine["problem"], strict=True) if (f, p) not in found]
        files = _manifest_files(d)
        prov = _staleness(d) if not integrity else None
        rows.append({"case": d.name, "files": files, "integrity_problems": len(integrity),
                     "consistency_problems": len(other), "passed": not integrity and not other,
                     "problems": "; ".join([*integrity, *other]), "stale": None if prov is None else prov.stale,
                     "provenance": None if prov is None else prov.short})
    return tables.frame({k: [r[k] for r in rows] for k in CHECK_SCHEMA}, CHECK_SCHEMA, what="check_cases")


def verdict(checks: pl.DataFrame) -> str:
    """:func:`check_cases` in one sentence a reader can act on."""
    n, failed = checks.height, checks.filter(~pl.col("passed"))
    files = int(checks["files"].sum())
    stale = checks.filter(pl.col("stale").fill_null(False))
    first = "" if stale.height == 0 else f"{stale['case'][0]}: {stale['provenance'][0].removeprefix('stale: ')}"
    note = "" if stale.height == 0 else (
        f" {f'All {n}' if stale.height == n else f'{stale.height} of {n}'} are stale, though (compiled by another "
        f"toolkit or under another definition; first, {first}): their numbers are not what this toolkit computes; "
        f"regenerate them (artifacts/README.md).")
    if failed.height == 0:
        return (f"All {n} cases pass: every one of their {files:,} files matches the size and SHA-256 its manifest "
                f"records, and every case's directory name, manifest and log agree.{note}")
    worst = failed.row(0, named=True)
    return (f"{failed.height} of {n} cases fail ({', '.join(failed['case'])}): "
            f"{int(failed['integrity_problems'].sum())} integrity and {int(failed['consistency_problems'].sum())} "
            f"consistency problems; first, {worst['case']}: {worst['problems'].split('; ')[0]}. "
            f"Regenerate the case (artifacts/README.md) or restore its files.{note}")


def compare_cases(cases: Cases | str | Path) -> pl.DataFrame:
    """One row per case (COMPARE_SCHEMA), by case name: the manifest's numbers, the exchange bytes of its
    tables and the hardware measurement of its workload where one exists. ``cases``: :func:`load_cases`'s
    result, or a directory of cases."""
    cases = _as_cases(cases)
    rows = [_compared(name, case) for name, case in cases.items()]
    return tables.frame({k: [r[k] for r in rows] for k in COMPARE_SCHEMA}, COMPARE_SCHEMA, what="compare_cases")


def describe(columns: list[str] | None = None) -> pl.DataFrame:
    """The unit and meaning of every :func:`compare_cases` column (or of ``columns``), one row each."""
    names = list(COLUMNS) if columns is None else columns
    unknown = [c for c in names if c not in COLUMNS]
    if unknown:
        msg = f"no description for columns {unknown}; compare_cases columns are {list(COLUMNS)}"
        raise OptionError(msg, field="columns", value=unknown)
    return pl.DataFrame({"column": names, "unit": [COLUMNS[c][0] for c in names],
                         "meaning": [COLUMNS[c][1] for c in names]})


def case_cycles(cases: Cases | str | Path, by: str = "kind") -> pl.DataFrame:
    """Where each case's cropped cycles go (CASE_CYCLES_SCHEMA), per sample kind (``by="kind"``) or per
    hardware-renderer timeline category (``by="category"``, slower: it cuts every exchange sample).

    Cycles are summed over the profile's tiles; time a tile spends between or after its samples (inside the
    crop) is ``idle``, so each case's ``per_tile_cycles`` add up to its cropped cycles exactly."""
    if by not in GROUPINGS:
        msg = f"by={by!r} is not a case_cycles grouping; use one of {list(GROUPINGS)}"
        raise OptionError(msg, field="by", value=by)
    cases = _as_cases(cases)
    parts = []
    for name, case in cases.items():
        if case.profile is None:
            msg = f"case {name} has no profile (no profile/ or profile.capnp); write it with a profile attached"
            raise OptionError(msg, field="cases", value=name)
        parts.append(_cycles_of(name, case, by))
    return pl.concat(parts)


def _as_cases(cases: Cases | str | Path) -> Cases:
    if isinstance(cases, str | Path):
        return load_cases(cases)
    if not cases:
        msg = "cases is empty; pass load_cases(root) or a directory of cases"
        raise OptionError(msg, field="cases", value=0)
    return cases


def _manifest_files(case: Path) -> int:
    from toolkit.errors import FormatError
    try:
        files = read_manifest(case).get("files", {})
    except FormatError:
        return 0
    return len(files) if isinstance(files, dict) else 0


def _staleness(case: Path):
    from toolkit.artifacts import staleness
    from toolkit.errors import FormatError
    try:
        return staleness(read_manifest(case))
    except FormatError:
        return None


def _compared(name: str, case: Case) -> dict:
    m, s = case.manifest, case.manifest.get("summary", {})
    hw = hardware_figure(m["workload"], SimpleNamespace(**m.get("options", {})))
    cropped = m.get("cropped_cycles")
    hw_cycles = None if hw is None else int(hw["hardware_cycles"])
    sent, delivered = _exchange_bytes(case)
    return {
        "case": name, "provenance": case.staleness.short, "workload": m["workload"], "source": m.get("source"),
        "tiles_used": s.get("tiles_used"),
        "simulated_cycles": cropped,
        "simulated_us": None if cropped is None else cropped / float(m["clock_hz"]) * 1e6,
        "hardware_cycles": hw_cycles,
        "vs_hardware": None if cropped is None or hw_cycles is None else cropped / hw_cycles,
        **{k: s.get(k) for k in ("lowered_cycles", "lowered_compute_cycles", "lowered_exchange_cycles",
                                 "lowered_sync_cycles")},
        "max_abs_error": m.get("max_abs_error"), "peak_sram_bytes": s.get("peak_sram_bytes"),
        "lowered_launches": s.get("lowered_launches"), "exchange_steps": s.get("exchange_steps"),
        "exchange_sent_bytes": sent, "exchange_delivered_bytes": delivered,
    }


def _exchange_bytes(case: Case) -> tuple[int | None, int | None]:
    """Sent and delivered exchange bytes, each phase times the instances of the repeated block it lies in."""
    summary = case.tables.get("exchange.summary")
    if summary is None:
        return None, None
    word = int(case.manifest.get("target", {}).get("word_bytes", 4))
    phases = case.tables["schedule.phases"].select("phase", "block")
    times = block_instances(case.tables["schedule.repeats"])
    total = (summary.join(phases, on="phase", how="left")
             .select((pl.col("words") * times).sum().alias("sent"),
                     (pl.col("delivered_words") * times).sum().alias("delivered")).row(0))
    return int(total[0]) * word, int(total[1]) * word


def _cycles_of(name: str, case: Case, by: str) -> pl.DataFrame:
    c = crop(case.profile)
    if by == "kind":
        got = query(c, by="kind").select(pl.col("kind").alias("category"), pl.col("work_cycles").alias("cycles"))
    else:
        got = category_cycles(timeline_categories(case.profile)).select("category", "cycles")
    total = int(c.tiles) * int(c.cropped_cycles)
    gap = total - int(got["cycles"].sum())
    got = (pl.concat([got.cast({"cycles": tables.BIG}),
                      pl.DataFrame({"category": ["idle"], "cycles": [gap]}, schema={"category": tables.STR,
                                                                                      "cycles": tables.BIG})])
           .group_by("category").agg(pl.col("cycles").sum()))
    order = {k: i for i, k in enumerate(GROUPINGS[by])}
    return (got.with_columns(pl.lit(name).alias("case"),
                             (pl.col("cycles") / c.tiles).alias("per_tile_cycles"),
                             (pl.col("cycles") / total).alias("share"),
                             pl.lit(c.tiles, tables.BIG).alias("tiles"),
                             pl.lit(c.cropped_cycles, tables.BIG).alias("cropped_cycles"),
                             pl.col("category").replace_strict(order, default=len(order)).alias("_at"))
            .sort("_at", "category").drop("_at").cast(CASE_CYCLES_SCHEMA).select(list(CASE_CYCLES_SCHEMA)))


__all__ = ["CASE_CYCLES_SCHEMA", "CHECK_SCHEMA", "COLUMNS", "COMPARE_SCHEMA", "GROUPINGS", "case_cycles",
           "case_dirs", "check_cases", "compare_cases", "describe", "load_cases", "verdict"]
