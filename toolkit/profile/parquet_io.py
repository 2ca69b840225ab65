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
from pathlib import Path
from typing import Any

from toolkit import tables
from toolkit.errors import FormatError
from toolkit.files import check_name_lengths, check_tables, load_json, read_table, read_text, write_table
from toolkit.files.replace import make_tmp, recover, remove, replace_dir
from toolkit.files.write import refuse_link
from toolkit.profile.capnp_io import read_capnp
from toolkit.profile.model import SCHEMA_VERSIONS, SOURCES, Profile, check_clock, validate

FORMAT = "toolkit-profile"
FORMAT_VERSION = 1
ATTRIBUTES = "profile.json"
FRAMES = {"samples": tables.SAMPLES_SCHEMA, "activities": tables.ACTIVITIES_SCHEMA,
          "metadata": tables.METADATA_SCHEMA}


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a profile: a ``.capnp`` file (hardware format, versions 1..5) or a Parquet profile directory."""
    if not isinstance(path, str | os.PathLike):
        raise FormatError(f"path={path!r} must be a path, not {type(path).__name__}", field="path", value=path)
    p = check_name_lengths(path, "profile", error=FormatError)
    if p.suffix.lower() == ".capnp" or p.name.lower().endswith(".capnp.gz"):
        return read_capnp(p)
    if p.suffix.lower() == ".parquet" or (p / ATTRIBUTES).is_file():
        return read_parquet(p)
    msg = f"unknown profile suffix {p.suffix!r}; expected a .capnp (or .capnp.gz) file or a .parquet profile directory"
    raise FormatError(msg, file=str(path), field="suffix", value=p.suffix)


def _complete(path: Path) -> bool:
    return all((path / f"{name}.parquet").is_file() for name in FRAMES) and (path / ATTRIBUTES).is_file()


def write_parquet(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as a Parquet profile directory (zstd); an existing one is replaced so that a complete
    profile is at ``path`` at every moment (:mod:`toolkit.files.replace`), and what a killed write left is
    recovered first."""
    out = Path(path)
    refuse_link(out, "path")
    recover(out, _complete)
    if out.exists() and not (out / ATTRIBUTES).is_file():
        msg = f"{out} exists and is not a profile directory (no {ATTRIBUTES}); refusing to replace it"
        raise FormatError(msg, file=str(out), field="path")
    import polars as pl

    from toolkit.errors import OptionError
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_tmp(out)
    except OSError as exc:
        raise OptionError(f"cannot write a profile under {out.parent}: {exc.strerror}", field="path",
                          value=str(out)) from None
    try:
        for name in FRAMES:
            write_table(getattr(profile, name), tmp / f"{name}.parquet", compression="zstd")
        attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "clock_hz": profile.clock_hz,
                 "schema_version": profile.schema_version, "source": profile.source}
        (tmp / ATTRIBUTES).write_text(json.dumps(attrs, indent=1) + "\n")
        tmp.chmod(0o755)
        replace_dir(tmp, out)
    except (OSError, pl.exceptions.ComputeError) as exc:   # a full disk: nothing half-written, the old one kept
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise OptionError(f"cannot write the profile {out}: {reason}", field="path", value=str(out)) from None
    finally:
        remove(tmp)
    return out


#: profile.json: every field, its JSON type and what it must be (strict: no coercion of true to 1 or 5.9 to 5)
ATTRIBUTE_RULES: dict[str, tuple[tuple[type, ...], str]] = {
    "format": ((str,), f"the string {FORMAT!r}"),
    "format_version": ((int,), f"the integer {FORMAT_VERSION}"),
    "clock_hz": ((int, float), "a number of Hz"),
    "schema_version": ((int,), f"an integer schema version ({SCHEMA_VERSIONS[0]}..{SCHEMA_VERSIONS[-1]})"),
    "source": ((str,), f"one of {SOURCES}"),
}


def read_attributes(root: Path) -> dict[str, Any]:
    """profile.json, every field strictly typed and in range; FormatError naming the field and value."""
    file = str(root)
    attrs = load_json(read_text(root / ATTRIBUTES, root=root, what=ATTRIBUTES), file, ATTRIBUTES)
    if not isinstance(attrs, dict):
        raise FormatError(f"{ATTRIBUTES} must hold an object, not {type(attrs).__name__}", file=file,
                          field=ATTRIBUTES)
    for key, (types, what) in ATTRIBUTE_RULES.items():
        if key not in attrs:
            raise FormatError(f"{ATTRIBUTES} has no {key!r} (it must be {what})", file=file, field=key)
        v = attrs[key]
        if isinstance(v, bool) or not isinstance(v, types):
            raise FormatError(f"{ATTRIBUTES}: {key}={v!r} must be {what}, not {type(v).__name__}", file=file,
                              field=key, value=v)
    checks = (("format", attrs["format"] == FORMAT), ("format_version", attrs["format_version"] == FORMAT_VERSION),
              ("source", attrs["source"] in SOURCES))   # the schema version's range: validate()
    for key, ok in checks:
        if not ok:
            what = ATTRIBUTE_RULES[key][1]
            raise FormatError(f"{ATTRIBUTES}: {key}={attrs[key]!r} must be {what}", file=file, field=key,
                              value=attrs[key])
    check_clock(attrs["clock_hz"], file)
    return attrs


def read_parquet(path: str | os.PathLike[str]) -> Profile:
    """Read a profile directory written by :func:`write_parquet`: its four regular files only (no links), each
    bounded (:func:`toolkit.files.read_table`); bad files raise :class:`FormatError`."""
    if not isinstance(path, str | os.PathLike):
        raise FormatError(f"path={path!r} must be a path, not {type(path).__name__}", field="path", value=path)
    root = Path(path)
    file = str(root)
    if not root.is_dir():
        msg = "not a Parquet profile directory (expected samples.parquet, activities.parquet, metadata.parquet, "
        msg += f"{ATTRIBUTES})"
        raise FormatError(msg, file=file)
    attrs = read_attributes(root)
    parts = [root / f"{name}.parquet" for name in FRAMES]
    try:
        check_tables(parts, root=root, what="profile's tables")   # together, before decoding any
    except FormatError as exc:
        msg = str(exc).removeprefix(f"{root}: ")
        for part in parts:   # name the part, not its whole path: the directory is named instead
            msg = msg.replace(f"{part}: ", f"{part.name}: ")
        raise FormatError(msg, file=file, field=exc.field, value=exc.value) from None
    frames = {}
    for name in FRAMES:
        part = root / f"{name}.parquet"
        try:
            frames[name] = read_table(part, root=root)
        except FormatError as exc:
            detail = str(exc).split(": ", 1)[-1]   # drop the file prefix: the directory is named instead
            raise FormatError(f"{part.name}: {detail}", file=file, field=name) from None
    profile = Profile(**frames, clock_hz=float(attrs["clock_hz"]), schema_version=attrs["schema_version"],
                      source=attrs["source"])
    return validate(profile, file=file)
