"""Write, load and verify one case directory (see the package docstring for the layout)."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.artifacts.provenance import PROVENANCE, Staleness, compilation_provenance, jsonable, refusals, staleness
from toolkit.errors import FormatError, OptionError
from toolkit.files import (
    check_name_lengths,
    check_parent,
    load_json,
    open_regular,
    read_table,
    read_text,
    write_table,
)
from toolkit.files.replace import make_tmp, recover, remove, replace_dir
from toolkit.files.write import refuse_link

MANIFEST = "manifest.json"
LOG = "log.txt"
UNLISTED = "unlisted"   # the problem field of a file in a case that its manifest does not list
WORKLOAD_FIELDS = ("tokens", "width", "hidden", "heads", "head_dim", "batch", "blocks", "fused_qkv")
CAPNP_FORMATS = {"plain": "profile.capnp", "gzip": "profile.capnp.gz", "none": None}


def write_case(compilation, out: str | Path, *, profile=None, check=None, overwrite: bool = False,
               capnp: str = "plain", extra_log: list[str] | None = None) -> Path:
    """Write ``compilation`` (and optionally its profile and check result) as a case directory.

    ``capnp`` chooses the hardware-format copy of the profile: ``plain``
    (``profile.capnp``), ``gzip`` (``profile.capnp.gz``, for committed cases) or
    ``none``; the Parquet profile is always written. An existing case is
    replaced (``overwrite``) so that a complete case is at ``out`` at every moment.
    """
    from toolkit import __version__
    if capnp not in CAPNP_FORMATS:
        msg = f"capnp={capnp!r} must be one of {sorted(CAPNP_FORMATS)}"
        raise OptionError(msg, field="capnp", value=capnp)
    out = check_out(out, overwrite=overwrite)
    try:
        tmp = make_tmp(out)
    except OSError as exc:
        raise OptionError(f"cannot write a case under {out.parent}: {exc.strerror}", field="out",
                          value=str(out)) from exc
    try:
        _write_tables(compilation, tmp)
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
            PROVENANCE: compilation_provenance(compilation),
        }
        log = [f"workload={compilation.workload}", *(f"{k}={v}" for k, v in params.items()),
               *(f"stage={k} seconds={v:.3f}" for k, v in compilation.timings.items()),
               f"lowered_cycles={summary['lowered_cycles']}", f"placed={summary['placed']}"]
        if cropped is not None:
            log.append(f"cropped_cycles={cropped}")
        if check is not None:
            log.append(f"max_abs_error={check.max_abs_error}")
            log.append(f"max_abs_deviation={check.max_abs_deviation}")
        text = "\n".join([*log, *(extra_log or [])]) + "\n"
        (tmp / LOG).write_bytes(text.encode("utf-8", "backslashreplace"))
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        manifest["files"] = {f: {"bytes": (tmp / f).stat().st_size, "sha256": _digest(tmp / f, tmp)} for f in files}
        import json
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        tmp.chmod(0o755)
        _move_into_place(tmp, out, overwrite)
    except (OSError, pl.exceptions.ComputeError) as exc:   # a full disk, a name too long, a folder gone
        remove(tmp)
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise OptionError(f"cannot write case {out}: {reason}; nothing was written (an existing case is "
                          f"unchanged)", field="out", value=str(out)) from exc
    except BaseException:
        remove(tmp)
        raise
    return out


def check_out(out: str | Path, *, overwrite: bool) -> Path:
    """Refuse, before any work, an output path a case cannot be written to (or must not replace); finish or
    roll back a replacement of it that a killed run left (:func:`toolkit.files.replace.recover`)."""
    if not isinstance(out, str | os.PathLike):
        raise OptionError(f"out={out!r} must be a path, not {type(out).__name__}", field="out", value=out)
    out = Path(out)
    refuse_link(out, "--out")
    here, real = os.path.realpath(os.getcwd()), os.path.realpath(out)
    if not out.name or out.name in (".", "..") or here == real or here.startswith(real.rstrip(os.sep) + os.sep):
        msg = (f"--out {out} is the current directory or holds it; a case directory is replaced whole: give a new "
               f"path such as runs/{Path(here).name or 'case'}")
        raise OptionError(msg, field="out", value=str(out))
    recover(out, _complete)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file, not a case directory", field="out", value=str(out))
    if out.exists() and not overwrite:
        msg = f"case directory {out} already exists; pass overwrite=True (CLI: --overwrite) to replace it"
        raise OptionError(msg, field="out", value=str(out))
    if out.exists() and not _is_case(out):
        msg = (f"--out {out} exists and is not a case directory (no readable {MANIFEST} written by the toolkit); "
               f"refusing to replace it: choose a new directory")
        raise OptionError(msg, field="out", value=str(out))
    return check_parent(out, "out", create=True, reserve=40)   # room for ".<name>.<pid>.r<random>.tmp"


def _is_case(path: Path) -> bool:
    try:
        data = read_manifest(path)
    except FormatError:
        return False
    return "toolkit_version" in data


def _complete(path: Path) -> bool:
    return _is_case(path) and not verify_case(path)


def _move_into_place(tmp: Path, out: Path, overwrite: bool) -> None:
    """Put the finished case at ``out``: a new name by one rename; an existing case (overwrite) replaced in one
    exchange (:func:`toolkit.files.replace.replace_dir`)."""
    if overwrite and os.path.lexists(out):
        if not _is_case(out):
            raise OptionError(f"--out {out} is no longer a case directory; refusing to replace it", field="out",
                              value=str(out))
        replace_dir(tmp, out)
        return
    try:
        os.rename(tmp, out)   # fails if another run wrote the case meanwhile (a non-empty directory)
    except OSError as exc:
        if out.exists():
            msg = f"case directory {out} was written by another run meanwhile; pass --overwrite to replace it"
            raise OptionError(msg, field="out", value=str(out)) from exc
        raise


def _digest(path: Path, root: Path) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path, root=root, what="case file"), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_tables(compilation, root: Path) -> None:
    tables = root / "tables"
    tables.mkdir()
    for name, df in compilation.frames().items():
        write_table(df, tables / f"{name}.parquet", compression="zstd", compression_level=9)


_jsonable = jsonable   # one conversion for the manifest and its digests


@dataclass(frozen=True, slots=True)
class Case:
    """A case directory read back: its manifest, log records, stage tables and profile.

    ``staleness`` says whether this toolkit would compile the same case for its manifest (same version,
    options, target, cost model and workload definition) and, when not, what differs
    (:func:`toolkit.artifacts.staleness`); ``stale`` and ``provenance_report`` are its verdict and sentence."""

    path: Path
    manifest: dict
    log: dict[str, str]
    tables: dict[str, pl.DataFrame]
    profile: Any = None

    def frames(self) -> dict[str, pl.DataFrame]:
        return dict(self.tables)

    @property
    def staleness(self) -> Staleness:
        return staleness(self.manifest)

    @property
    def stale(self) -> bool:
        """Whether the case was compiled by another toolkit version or under another options, target, cost
        model or workload definition than this toolkit would use for its manifest."""
        return self.staleness.stale

    @property
    def provenance_report(self) -> str:
        """One line: ``current: ...`` or ``stale: <every difference>`` (the label the notebooks and reports
        show beside the case's numbers)."""
        return str(self.staleness)

    def __repr__(self) -> str:   # its manifest lists every file's digest: tens of thousands of characters
        from toolkit.tables import short_repr
        return short_repr(self, workload=self.manifest.get("workload"), source=self.manifest.get("source"))


#: how many times a load starts again when the case directory is replaced while it is read
LOAD_ATTEMPTS = 8


def load_case(case: str | Path) -> Case:
    """Read a case directory written by :func:`write_case` (``toolkit.load``): only the files its manifest
    lists, after every one passes its size and SHA-256 check.

    A manifest this toolkit must not read is refused by name (:func:`toolkit.artifacts.refusals`: a newer
    ``toolkit_version``, unknown or ill-typed options). The case is one whole case or a FormatError: the
    directory is held open while it is read, and a read during which another directory took its name (a
    ``compile --overwrite`` replacing it) starts again, up to ``LOAD_ATTEMPTS`` times."""
    if not isinstance(case, str | os.PathLike):
        raise OptionError(f"case={case!r} must be a path to a case directory, not {type(case).__name__}",
                          field="case", value=case)
    case = check_name_lengths(case, "case", error=FormatError)
    for _ in range(LOAD_ATTEMPTS):
        try:
            held = os.open(case, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return _load_once(case)   # not a directory (or gone): the read names the problem
        try:   # while held, the directory's inode cannot be reused: the same identity is the same directory
            before = _identity(os.fstat(held))
            try:
                loaded, error = _load_once(case), None
            except FormatError as exc:
                loaded, error = None, exc
            try:
                after = _identity(os.stat(case))
            except OSError:
                after = None
        finally:
            os.close(held)
        if after == before:
            if error is not None:
                raise error
            return loaded
    msg = (f"the case directory was replaced while it was read, {LOAD_ATTEMPTS} times in a row (another run is "
           f"writing it with --overwrite); nothing was returned: read it again when the writer is done")
    raise FormatError(msg, file=str(case), field="case")


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    """A directory's identity: its device and inode, and its change time (a rename out and back changes it)."""
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _load_once(case: Path) -> Case:
    manifest = read_manifest(case)
    refused = refusals(manifest)
    if refused:
        r = refused[0]
        raise FormatError(r.problem, file=str(case / MANIFEST), field=r.field, value=r.value)
    problems = [p for p in verify_case(case) if p[0] != UNLISTED]   # unlisted files are only never read
    if problems:
        field, problem = problems[0]
        more = f" (and {len(problems) - 1} more; toolkit artifacts check lists them)" if len(problems) > 1 else ""
        raise FormatError(f"case fails its integrity check: {problem}{more}", file=str(case), field=field)
    listed = sorted(manifest["files"])
    tables = {name[len("tables/"):-len(".parquet")]: read_table(case / name, root=case)
              for name in listed if name.startswith("tables/") and name.endswith(".parquet") and name.count("/") == 1}
    profile = None
    if "profile/profile.json" in listed:
        from toolkit.profile import read_parquet
        profile = read_parquet(case / "profile")
    else:
        from toolkit.profile.capnp_io import read_capnp
        for name in ("profile.capnp", "profile.capnp.gz"):
            if name in listed:
                profile = read_capnp(case / name, root=case)
                break
    manifest["summary"] = _summary(manifest["summary"], case)
    return Case(path=case, manifest=manifest, log=read_log(case), tables=tables, profile=profile)


def _summary(summary: dict, case: Path) -> dict:
    """The manifest's summary in today's names (a case written before they said which figure they are holds
    ``est_cycles`` for ``lowered_cycles`` and so on: :func:`toolkit.tables.upgrade_summary`)."""
    from toolkit.tables import upgrade_summary
    if not summary:
        return summary
    return upgrade_summary(pl.DataFrame([summary]), file=str(case / MANIFEST)).row(0, named=True)


def read_manifest(case: str | Path) -> dict:
    path = Path(case) / MANIFEST
    data = load_json(read_text(path, root=case, what=MANIFEST), str(path), MANIFEST)
    if not isinstance(data, dict) or "workload" not in data:
        raise FormatError("manifest has no 'workload' field", file=str(path), field="workload")
    return data


#: manifest fields and the JSON types they must hold (a tuple: any of them)
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "workload": (str,), "params": (dict,), "options": (dict,), "target": (dict,), "toolkit_version": (str,),
    "source": (str,), "clock_hz": (int, float), "cropped_cycles": (int, type(None)),
    "max_abs_error": (int, float, type(None)), "created": (str,), "summary": (dict,), "files": (dict,),
}


def bad_name(name: Any) -> str | None:
    """Why a manifest file name is not a relative, normalized path inside the case (None: it is)."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if name.startswith("/") or "\\" in name or "\0" in name:
        return "is not a relative path inside the case"
    if posixpath.normpath(name) != name or name.split("/")[0] in ("..", ".") or "/../" in f"/{name}/":
        return "is not a normalized path inside the case (no '..', '.', '//')"
    if name == MANIFEST:
        return "is the manifest itself"
    return None


def verify_case(case: str | Path) -> list[tuple[str, str]]:
    """Problems of one case directory as (field, problem): the manifest's schema; every file it lists (a
    relative normalized path, a regular file inside the case, its recorded size and SHA-256); and every file
    in the case that it does not list (reported, never loaded)."""
    case = Path(case)
    try:
        manifest = load_json(read_text(case / MANIFEST, root=case, what=MANIFEST), str(case / MANIFEST), MANIFEST)
    except FormatError as exc:
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
    if PROVENANCE in manifest and not isinstance(manifest[PROVENANCE], dict):
        problems.append((PROVENANCE, f"manifest {PROVENANCE}={manifest[PROVENANCE]!r} must be dict"))
    problems += [(r.field, r.problem) for r in refusals(manifest)]   # a newer toolkit's, options refused
    clock = manifest.get("clock_hz")
    if isinstance(clock, int | float) and not isinstance(clock, bool):
        from toolkit.profile.model import CLOCK_RANGE_HZ
        if not CLOCK_RANGE_HZ[0] <= clock <= CLOCK_RANGE_HZ[1]:
            problems.append(("clock_hz", f"manifest clock_hz={clock!r} is not a tile clock (from "
                                         f"{CLOCK_RANGE_HZ[0]:g} to {CLOCK_RANGE_HZ[1]:g} Hz)"))
    params = manifest.get("params") if isinstance(manifest.get("params"), dict) else {}
    for key, value in params.items():
        if value is not None and not isinstance(value, int):
            problems.append((f"params.{key}", f"manifest params.{key}={value!r} must be an integer or null"))
    files = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    for name, rec in files.items():
        why = bad_name(name)
        if why is not None:
            problems.append(("files", f"manifest entry {name!r} {why}; it is not read"))
            continue
        problems += _check_file(case, name, rec)
    for name in _present(case):
        if name not in files:
            problems.append((UNLISTED, f"{name} is in the case but not listed in the manifest (it is not loaded)"))
    return problems


def _check_file(case: Path, name: str, rec: Any) -> list[tuple[str, str]]:
    path = case / name
    if not (isinstance(rec, dict) and isinstance(rec.get("bytes"), int) and isinstance(rec.get("sha256"), str)):
        return [("files", f"{name}: no size and content hash recorded (written before hashes were kept; "
                          "regenerate the case)")]
    if not os.path.lexists(path):
        return [("files", f"{name} is listed in the manifest but missing")]
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
            return [("files", f"{name} is not a regular file (a link, FIFO or device); it is not read")]
        size = path.stat().st_size
        if size != rec["bytes"]:
            return [("files", f"{name} has {size} bytes, the manifest says {rec['bytes']}")]
        if _digest(path, case) != rec["sha256"]:
            return [("files", f"{name} does not match its recorded SHA-256 (changed since it was written)")]
    except (OSError, FormatError) as exc:
        return [("files", f"{name} cannot be read: {exc}")]
    return []


def _present(case: Path) -> list[str]:
    """Every file and link in the case (not following links), as relative paths, except the manifest."""
    found = []
    for top, dirs, names in os.walk(case, followlinks=False):
        rel = Path(top).relative_to(case)
        found += [(rel / n).as_posix() for n in names]
        found += [(rel / d).as_posix() for d in dirs if os.path.islink(os.path.join(top, d))]
    return sorted(n for n in found if n != MANIFEST)


def read_log(case: str | Path) -> dict[str, str]:
    """The ``key=value`` records of a case log (the last value of each key wins)."""
    path = Path(case) / LOG
    if not os.path.lexists(path):
        return {}
    records: dict[str, str] = {}
    for line in read_text(path, root=case, what=LOG).splitlines():
        for key, value in re.findall(r"(\w+)=(\S+)", line):
            records[key] = value
    return records
