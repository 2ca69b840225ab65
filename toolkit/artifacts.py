"""Artifact directories: one case per compiled workload, written atomically, checked for consistency.

Layout of a case (``artifacts/<experiment>/<case>/``):

- ``manifest.json``: workload and its parameters, options, target, toolkit
  version, source (simulated | hardware), clock, cropped cycles, max abs error
  (when checked), summary numbers, created time, and every file with its size;
- ``tables/<stage>.<frame>.parquet``: every stage's tables (zstd-compressed);
- ``profile.capnp`` and ``profile/`` (Parquet) when a profile is attached;
- ``log.txt``: what ran, one ``key=value`` record per line.

Writes go to a temporary sibling directory that is renamed into place at the
end, so an interrupted run leaves no half case. ``check_artifacts`` reports
cases whose directory name, manifest and log disagree (the placement note's
model case: a directory named for batch 4 whose log says batch 1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import FormatError, OptionError
from toolkit.files import check_parent, read_table
from toolkit.graph import PRESETS

MANIFEST = "manifest.json"
LOG = "log.txt"
CHECK_SCHEMA = {"case": pl.String, "field": pl.String, "directory": pl.String, "manifest": pl.String,
                "log": pl.String, "problem": pl.String}
WORKLOAD_FIELDS = ("tokens", "width", "hidden", "heads", "head_dim", "batch", "blocks", "fused_qkv")


CAPNP_FORMATS = {"plain": "profile.capnp", "gzip": "profile.capnp.gz", "none": None}


def write_case(compilation, out: str | Path, *, profile=None, check=None, overwrite: bool = False,
               capnp: str = "plain", extra_log: list[str] | None = None) -> Path:
    """Write ``compilation`` (and optionally its profile and check result) as a case directory.

    ``capnp`` chooses the hardware-format copy of the profile: ``plain``
    (``profile.capnp``), ``gzip`` (``profile.capnp.gz``, for committed cases) or
    ``none``; the Parquet profile is always written.
    """
    from toolkit import __version__
    if capnp not in CAPNP_FORMATS:
        msg = f"capnp={capnp!r} must be one of {sorted(CAPNP_FORMATS)}"
        raise OptionError(msg, field="capnp", value=capnp)
    out = check_out(out, overwrite=overwrite)
    _clean_stale(out)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise OptionError(f"cannot write a case under {out.parent}: {exc.strerror}", field="out",
                          value=str(out)) from exc
    try:
        files = _write_tables(compilation, tmp)
        cropped = clock = None
        if profile is not None:
            from toolkit.profile import crop, write_capnp, write_parquet
            if CAPNP_FORMATS[capnp]:
                write_capnp(profile, tmp / CAPNP_FORMATS[capnp])
            write_parquet(profile, tmp / "profile")
            c = crop(profile)
            cropped, clock = int(c.cropped_cycles), float(profile.clock_hz)
        params = {k: compilation.graph.params.get(k) for k in WORKLOAD_FIELDS}
        summary = compilation.summary().row(0, named=True)
        manifest = {
            "workload": compilation.workload,
            "params": params,
            "options": _jsonable(compilation.options.to_dict()),
            "target": _jsonable(compilation.target.to_dict()),
            "toolkit_version": __version__,
            "source": getattr(profile, "source", None) or "simulated",
            "clock_hz": clock or float(compilation.target.clock_hz),
            "cropped_cycles": cropped,
            "max_abs_error": None if check is None else float(check.max_abs_error),
            "max_abs_deviation": None if check is None else float(check.max_abs_deviation),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "summary": _jsonable(summary),
        }
        log = [f"workload={compilation.workload}", *(f"{k}={v}" for k, v in params.items()),
               *(f"stage={k} seconds={v:.3f}" for k, v in compilation.timings.items()),
               f"est_cycles={summary['est_cycles']}", f"placed={summary['placed']}"]
        if cropped is not None:
            log.append(f"cropped_cycles={cropped}")
        if check is not None:
            log.append(f"max_abs_error={check.max_abs_error}")
            log.append(f"max_abs_deviation={check.max_abs_deviation}")
        (tmp / LOG).write_text("\n".join([*log, *(extra_log or [])]) + "\n")
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        manifest["files"] = {f: {"bytes": (tmp / f).stat().st_size, "sha256": _digest(tmp / f)} for f in files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        tmp.chmod(0o755)
        _move_into_place(tmp, out, overwrite)
    except OSError as exc:   # a full disk, a name too long, a folder gone: nothing half-written is left
        shutil.rmtree(tmp, ignore_errors=True)
        raise OptionError(f"cannot write case {out}: {exc.strerror or exc}", field="out", value=str(out)) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_out(out: str | Path, *, overwrite: bool) -> Path:
    """Refuse, before any work, an output path a case cannot be written to (or must not replace)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file, not a case directory", field="out", value=str(out))
    if out.exists() and not overwrite:
        msg = f"case directory {out} already exists; pass overwrite=True (CLI: --overwrite) to replace it"
        raise OptionError(msg, field="out", value=str(out))
    if out.exists() and not _is_case(out):
        msg = (f"--out {out} exists and is not a case directory (no readable {MANIFEST} written by the toolkit); "
               f"refusing to replace it: choose a new directory")
        raise OptionError(msg, field="out", value=str(out))
    return check_parent(out, "out", create=True, reserve=40)   # room for ".<name>.<pid>.<random>.tmp"


def _is_case(path: Path) -> bool:
    try:
        data = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "toolkit_version" in data and "workload" in data


def _move_into_place(tmp: Path, out: Path, overwrite: bool) -> None:
    """Rename the finished case into place; an old case (overwrite) is moved aside first and removed after."""
    if out.exists() and overwrite:
        if not _is_case(out):
            raise OptionError(f"--out {out} is no longer a case directory; refusing to replace it", field="out",
                              value=str(out))
        old = out.with_name(f".{out.name}.{os.getpid()}.old")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
        return
    try:
        os.rename(tmp, out)   # fails if another run wrote the case meanwhile (a non-empty directory)
    except OSError as exc:
        if out.exists():
            msg = f"case directory {out} was written by another run meanwhile; pass --overwrite to replace it"
            raise OptionError(msg, field="out", value=str(out)) from exc
        raise


def _clean_stale(out: Path) -> None:
    """Remove temporary directories of this case left by runs that were killed (their process is gone)."""
    for p in out.parent.glob(f".{out.name}.*.tmp") if out.parent.is_dir() else ():
        parts = p.name[len(out.name) + 2:].split(".")
        if parts and parts[0].isdigit() and not _alive(int(parts[0])):
            shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_tables(compilation, root: Path) -> list[str]:
    tables = root / "tables"
    tables.mkdir()
    names = []
    for name, df in compilation.frames().items():
        path = tables / f"{name}.parquet"
        df.write_parquet(path, compression="zstd", compression_level=9)
        names.append(path.name)
    return names


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return str(value)


@dataclass(frozen=True, slots=True)
class Case:
    """A case directory read back: its manifest, log records, stage tables and profile."""

    path: Path
    manifest: dict
    log: dict[str, str]
    tables: dict[str, pl.DataFrame]
    profile: Any = None

    def frames(self) -> dict[str, pl.DataFrame]:
        return dict(self.tables)


def load_case(case: str | Path) -> Case:
    """Read a case directory written by :func:`write_case` (``toolkit.load``)."""
    case = Path(case)
    manifest = read_manifest(case)
    problems = verify_case(case)
    if problems:
        field, problem = problems[0]
        more = f" (and {len(problems) - 1} more; toolkit artifacts check lists them)" if len(problems) > 1 else ""
        raise FormatError(f"case fails its integrity check: {problem}{more}", file=str(case), field=field)
    tables = {}
    for path in sorted((case / "tables").glob("*.parquet")):
        tables[path.stem] = read_table(path)
    profile = None
    if (case / "profile").is_dir():
        from toolkit.profile import read_parquet
        profile = read_parquet(case / "profile")
    else:
        from toolkit.profile import read_capnp
        for name in ("profile.capnp", "profile.capnp.gz"):
            if (case / name).exists():
                profile = read_capnp(case / name)
                break
    return Case(path=case, manifest=manifest, log=read_log(case), tables=tables, profile=profile)


def read_manifest(case: str | Path) -> dict:
    path = Path(case) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FormatError(f"cannot read the manifest: {exc}", file=str(path)) from exc
    if not isinstance(data, dict) or "workload" not in data:
        raise FormatError("manifest has no 'workload' field", file=str(path), field="workload")
    return data


#: manifest fields and the JSON types they must hold (a tuple: any of them)
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "workload": (str,), "params": (dict,), "options": (dict,), "target": (dict,), "toolkit_version": (str,),
    "source": (str,), "clock_hz": (int, float), "cropped_cycles": (int, type(None)),
    "max_abs_error": (int, float, type(None)), "created": (str,), "summary": (dict,), "files": (dict,),
}


def verify_case(case: str | Path) -> list[tuple[str, str]]:
    """Problems of one case directory as (field, problem): the manifest's schema, and every file it lists
    against its recorded size and SHA-256 (a flipped byte, a truncated table, a missing file)."""
    case = Path(case)
    try:
        manifest = json.loads((case / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return [("manifest", f"cannot read {MANIFEST}: {exc}")]
    if not isinstance(manifest, dict):
        return [("manifest", f"{MANIFEST} is not an object")]
    problems = []
    for key, types in MANIFEST_TYPES.items():
        if key not in manifest:
            problems.append((key, f"manifest has no {key!r}"))
        elif not isinstance(manifest[key], types) or (isinstance(manifest[key], bool) and bool not in types):
            kinds = " or ".join(t.__name__ for t in types)
            problems.append((key, f"manifest {key}={manifest[key]!r} must be {kinds}"))
    params = manifest.get("params") if isinstance(manifest.get("params"), dict) else {}
    for key, value in params.items():
        if value is not None and not isinstance(value, int):
            problems.append((f"params.{key}", f"manifest params.{key}={value!r} must be an integer or null"))
    files = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    for name, rec in files.items():
        path = case / name
        if not (isinstance(rec, dict) and isinstance(rec.get("bytes"), int) and isinstance(rec.get("sha256"), str)):
            problems.append(("files", f"{name}: no size and content hash recorded (written before hashes were "
                                      "kept; regenerate the case)"))
        elif not path.is_file():
            problems.append(("files", f"{name} is listed in the manifest but missing"))
        elif path.stat().st_size != rec["bytes"]:
            problems.append(("files", f"{name} has {path.stat().st_size} bytes, the manifest says {rec['bytes']}"))
        elif _digest(path) != rec["sha256"]:
            problems.append(("files", f"{name} does not match its recorded SHA-256 (changed since it was written)"))
    return problems


def read_log(case: str | Path) -> dict[str, str]:
    """The ``key=value`` records of a case log (the last value of each key wins)."""
    path = Path(case) / LOG
    if not path.exists():
        return {}
    records: dict[str, str] = {}
    for line in path.read_text().splitlines():
        for key, value in re.findall(r"(\w+)=(\S+)", line):
            records[key] = value
    return records


def check_artifacts(root: str | Path) -> pl.DataFrame:
    """One row per problem of the cases under ``root``: integrity (manifest schema, every file's size and
    SHA-256) and disagreement between a case's directory name, manifest and log (empty when every case passes)."""
    root = Path(root)
    if not root.exists():
        raise OptionError(f"artifact directory {root} does not exist", field="root", value=str(root))
    if not root.is_dir():
        raise OptionError(f"{root} is a file; pass a directory of cases (or one case directory)", field="root",
                          value=str(root))
    rows: list[dict] = []
    cases = sorted({p.parent for p in root.rglob(MANIFEST)})
    bare = sorted({p.parent for p in root.rglob("tables") if p.is_dir() and not (p.parent / MANIFEST).exists()})
    rows += [_row(c, "manifest", c.name, None, None, f"a case directory (it has tables/) without {MANIFEST}")
             for c in bare]
    if not cases and not bare:
        rows.append(_row(root, "manifest", root.name, None, None, f"no case (no {MANIFEST}) under {root}"))
    for case in cases:
        name = case.name
        problems = verify_case(case)
        rows += [_row(case, field, name, None, None, problem) for field, problem in problems]
        if any(f in ("workload", "params", "manifest") for f, _ in problems):
            continue   # the consistency checks below read these fields
        manifest = read_manifest(case)
        log = read_log(case)
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
    return pl.DataFrame(rows, schema=CHECK_SCHEMA)


def _row(case: Path, field: str, directory, manifest, log, problem: str) -> dict:
    return {"case": case.as_posix(), "field": field, "directory": directory, "manifest": manifest, "log": log,
            "problem": problem}
