"""Profiles as a directory of Parquet files, and :func:`read_profile`, which dispatches on the path.

Layout of a profile directory (conventionally named ``*.parquet``; each file is
flat and readable by any Parquet tool):

- ``samples.parquet`` (``tables.SAMPLES_SCHEMA``)
- ``activities.parquet`` (``tables.ACTIVITIES_SCHEMA``)
- ``metadata.parquet`` (``tables.METADATA_SCHEMA``)
- ``profile.json``: ``{"format": "toolkit-profile", "format_version": 1,
  "clock_hz", "schema_version", "source"}``

Flat files read about three times faster than one file with nested
activity/metadata columns (measured in ``benchmarks/bench_profile.py``'s
development). The directory is written beside the target under a temporary
name and renamed into place, so a reader never sees half a profile.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from toolkit import tables
from toolkit.errors import FormatError
from toolkit.files import read_table
from toolkit.profile.capnp_io import read_capnp
from toolkit.profile.model import Profile, validate

FORMAT = "toolkit-profile"
FORMAT_VERSION = 1
ATTRIBUTES = "profile.json"
FRAMES = {"samples": tables.SAMPLES_SCHEMA, "activities": tables.ACTIVITIES_SCHEMA,
          "metadata": tables.METADATA_SCHEMA}


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a profile: a ``.capnp`` file (hardware format, versions 1..5) or a Parquet profile directory."""
    p = Path(path)
    if p.suffix.lower() == ".capnp" or p.name.lower().endswith(".capnp.gz"):
        return read_capnp(p)
    if p.suffix.lower() == ".parquet" or (p / ATTRIBUTES).is_file():
        return read_parquet(p)
    msg = f"unknown profile suffix {p.suffix!r}; expected a .capnp (or .capnp.gz) file or a .parquet profile directory"
    raise FormatError(msg, file=str(path), field="suffix", value=p.suffix)


def write_parquet(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as a Parquet profile directory (zstd), atomically; replaces an existing one."""
    out = Path(path)
    if out.exists() and not (out / ATTRIBUTES).is_file():
        msg = f"{out} exists and is not a profile directory (no {ATTRIBUTES}); refusing to replace it"
        raise FormatError(msg, file=str(out), field="path")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    old = out.with_name(f".{out.name}.{os.getpid()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        for name in FRAMES:
            getattr(profile, name).write_parquet(tmp / f"{name}.parquet", compression="zstd")
        attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "clock_hz": profile.clock_hz,
                 "schema_version": profile.schema_version, "source": profile.source}
        (tmp / ATTRIBUTES).write_text(json.dumps(attrs, indent=1) + "\n")
        if out.exists():
            out.replace(old)
        tmp.replace(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return out


def read_parquet(path: str | os.PathLike[str]) -> Profile:
    """Read a profile directory written by :func:`write_parquet`; bad files raise :class:`FormatError`."""
    root = Path(path)
    file = str(root)
    if not root.is_dir():
        msg = "not a Parquet profile directory (expected samples.parquet, activities.parquet, metadata.parquet, "
        msg += f"{ATTRIBUTES})"
        raise FormatError(msg, file=file)
    try:
        attrs = json.loads((root / ATTRIBUTES).read_text())
        if attrs.get("format") != FORMAT:
            msg = f"{ATTRIBUTES}: format={attrs.get('format')!r}, expected {FORMAT!r}"
            raise FormatError(msg, file=file, field="format", value=attrs.get("format"))
        clock_hz, version, source = float(attrs["clock_hz"]), int(attrs["schema_version"]), str(attrs["source"])
    except FormatError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{ATTRIBUTES} is missing or invalid ({type(exc).__name__}: {exc})"
        raise FormatError(msg, file=file, field=ATTRIBUTES) from None
    frames = {}
    for name in FRAMES:
        part = root / f"{name}.parquet"
        try:
            frames[name] = read_table(part)
        except FormatError as exc:
            detail = str(exc).split(": ", 1)[-1]   # drop the file prefix: the directory is named instead
            raise FormatError(f"{part.name}: {detail}", file=file, field=name) from None
    profile = Profile(**frames, clock_hz=clock_hz, schema_version=version, source=source)
    return validate(profile, file=file)
