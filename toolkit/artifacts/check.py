"""``check_artifacts``: every problem of a tree of cases, including the debris of killed writes."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from toolkit.artifacts.case import MANIFEST, read_log, read_manifest, verify_case
from toolkit.artifacts.provenance import refusals, staleness
from toolkit.errors import FormatError, OptionError
from toolkit.files import check_name_lengths
from toolkit.files.replace import SUFFIXES, debris_under
from toolkit.graph import PRESETS

CHECK_SCHEMA = {"case": pl.String, "field": pl.String, "directory": pl.String, "manifest": pl.String,
                "log": pl.String, "problem": pl.String}
#: stale_artifacts: one row per difference between a case and what this toolkit would compile for it
STALE_SCHEMA = {"case": pl.String, "workload": pl.String, "toolkit_version": pl.String, "part": pl.String,
                "reason": pl.String}


def walk_cases(root: Path) -> tuple[list[Path], list[Path]]:
    """Case directories (with a manifest) and bare ones (tables/ without a manifest) under ``root``, not
    following links and not entering the hidden temporaries of writes."""
    cases, bare = [], []
    for top, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not (d.startswith(".") and d.endswith(SUFFIXES))]
        here = Path(top)
        if MANIFEST in names:
            cases.append(here)
        elif "tables" in dirs:
            bare.append(here)
    return sorted(cases), sorted(bare)


def check_artifacts(root: str | Path) -> pl.DataFrame:
    """One row per problem of the cases under ``root``: integrity (manifest schema, every listed file's path,
    kind, size and SHA-256, files not listed), disagreement between a case's directory name, manifest and log,
    and debris of interrupted writes (empty when every case passes)."""
    if not isinstance(root, str | os.PathLike):
        raise OptionError(f"root={root!r} must be a path, not {type(root).__name__}", field="root", value=root)
    root = check_name_lengths(root, "artifact directory")
    if not root.exists():
        raise OptionError(f"artifact directory {root} does not exist", field="root", value=str(root))
    if not root.is_dir():
        raise OptionError(f"{root} is a file; pass a directory of cases (or one case directory)", field="root",
                          value=str(root))
    rows: list[dict] = []
    cases, bare = walk_cases(root)
    rows += [_row(c, "manifest", c.name, None, None, f"a case directory (it has tables/) without {MANIFEST}")
             for c in bare]
    for d in debris_under(root):
        state = f"its writer (process {d.pid}) is still running" if d.running else (
            f"left by process {d.pid}, which is gone")
        fate = ("the case itself is missing: the next write of it restores the complete copy, or rename it back"
                if not os.path.lexists(d.target) else "the next write of the case removes it")
        rows.append(_row(d.target, "debris", d.target.name, None, None,
                         f"{d.path.name}: a temporary .{d.kind} of an interrupted write ({state}); {fate}"))
    if not cases and not bare and not rows:
        rows.append(_row(root, "manifest", root.name, None, None, f"no case (no {MANIFEST}) under {root}"))
    for case in cases:
        rows += _case_rows(case)
    return pl.DataFrame(rows, schema=CHECK_SCHEMA)


def _case_rows(case: Path) -> list[dict]:
    name = case.name
    problems = verify_case(case)
    rows = [_row(case, field, name, None, None, problem) for field, problem in problems]
    if any(f in ("workload", "params", "manifest") for f, _ in problems):
        return rows   # the consistency checks below read these fields
    manifest = read_manifest(case)
    try:
        log = read_log(case)
    except FormatError as exc:
        rows.append(_row(case, "log", name, None, None, str(exc)))
        log = {}
    params = manifest.get("params", {})
    preset = PRESETS.get(name)
    if preset is not None and manifest["workload"] != name:
        rows.append(_row(case, "workload", name, manifest["workload"], log.get("workload"),
                         "directory is named for a different preset than the manifest's workload"))
    if "workload" in log and log["workload"] != manifest["workload"]:
        rows.append(_row(case, "workload", name, manifest["workload"], log["workload"],
                         "log and manifest name different workloads"))
    for field in ("batch", "blocks"):
        want = getattr(preset, field) if preset is not None else None
        got = params.get(field)
        logged = log.get(field)
        if want is not None and got is not None and int(got) != int(want):
            rows.append(_row(case, field, str(want), str(got), logged,
                             f"directory '{name}' implies {field}={want} but the manifest says {got}"))
        if logged is not None and got is not None and str(got) != logged:
            rows.append(_row(case, field, None if want is None else str(want), str(got), logged,
                             f"log says {field}={logged} but the manifest says {got}"))
    return rows


def _row(case: Path, field: str, directory, manifest, log, problem: str) -> dict:
    return {"case": case.as_posix(), "field": field, "directory": directory, "manifest": manifest, "log": log,
            "problem": problem}


def stale_artifacts(root: str | Path) -> pl.DataFrame:
    """One row per reason a case under ``root`` is stale (STALE_SCHEMA; :func:`toolkit.artifacts.staleness`):
    compiled by another toolkit version, or under other options, target, cost model or workload definition than
    this toolkit would use for its manifest, or written before provenance was recorded. Empty when every case is
    current. Cases whose manifest cannot be read or is refused are :func:`check_artifacts`' problems, not listed
    here. Only manifests are read (no file is hashed)."""
    if not isinstance(root, str | os.PathLike):
        raise OptionError(f"root={root!r} must be a path, not {type(root).__name__}", field="root", value=root)
    root = Path(root)
    if not root.is_dir():
        raise OptionError(f"artifact directory {root} does not exist or is not a directory", field="root",
                          value=str(root))
    rows = []
    for case in walk_cases(root)[0]:
        try:
            manifest = read_manifest(case)
        except FormatError:
            continue
        if refusals(manifest):
            continue
        found = staleness(manifest)
        version = manifest.get("toolkit_version")
        rows += [{"case": case.as_posix(), "workload": str(manifest.get("workload")),
                  "toolkit_version": version if isinstance(version, str) else None, "part": part, "reason": reason}
                 for part, reason in zip(found.parts, found.reasons, strict=True)]
    return pl.DataFrame(rows, schema=STALE_SCHEMA)
