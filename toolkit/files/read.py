"""Bounded, confined reads: only regular files, never more than a stated number of bytes, never a bomb.

Every file the toolkit reads goes through :func:`open_regular`: it opens with
``O_NONBLOCK`` (a FIFO named like a case file cannot block the open) and, for
files inside a case directory, ``O_NOFOLLOW`` after checking that the path
resolves inside the case; then ``fstat`` refuses anything that is not a regular
file (a FIFO, a device such as ``/dev/zero``, a directory). Reads are capped:

- whole files read into memory (:func:`read_bytes`): at most ``limit`` bytes,
  checked against ``fstat`` before reading and again while reading;
- gzip (:func:`gunzip`): streamed, refused past ``GZIP_RATIO`` times the
  compressed size (with a floor of ``GZIP_FLOOR``) or ``GZIP_CAP`` bytes;
- Parquet tables (:func:`read_table`; a directory's tables together,
  :func:`check_tables`): the footer's leaf value counts times the column
  widths are checked before decoding, refused past :func:`table_limit`;
- JSON and TOML (:func:`load_json`, :func:`load_toml`): nesting deeper than
  ``MAX_DEPTH`` is refused before parsing (no ``RecursionError``), and text
  must be UTF-8 (the error names the byte offset).

The limits are set from the committed cases: their gzip profiles compress 8-18
times (a 4 MB gzip may expand to 128 MB) and their Parquet tables decode to up
to 300 times their size (sorted, regular simulated data), so any table of up to
4 MiB may decode to 384 MiB and a larger one to 256 times its size; reading any
file of at most 4 MB then peaks under 1 GiB (``tests/test_bombs.py``).
"""

from __future__ import annotations

import io
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any

from toolkit.errors import FormatError
from toolkit.files.names import check_name_lengths

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
TEXT_LIMIT = 16 * MIB            # manifest.json, profile.json, log.txt, target and grid files
GZIP_RATIO, GZIP_FLOOR, GZIP_CAP = 32, 64 * MIB, 4 * GIB
TABLE_SMALL, TABLE_FLOOR = 4 * MIB, 384 * MIB   # files up to TABLE_SMALL decode to at most TABLE_FLOOR
TABLE_RATIO, TABLE_CAP = 256, 16 * GIB            # larger ones to TABLE_RATIO x their size, at most TABLE_CAP
MAX_DEPTH = 64                   # nesting of JSON arrays/objects and TOML tables/arrays


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves (following every symlink) to ``root`` or below it."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def open_regular(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None,
                 what: str = "file") -> int:
    """A read-only descriptor of the regular file ``path``; with ``root`` the path must stay inside ``root``
    (no symlink leaving it, the last component no symlink at all). FormatError otherwise, naming the path."""
    file = os.fspath(path)
    check_name_lengths(file, what, error=FormatError)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if root is not None:
        if not inside(file, root):
            raise FormatError(f"{what} leaves {os.fspath(root)} (it resolves to {os.path.realpath(file)}); "
                              f"refusing to read it", file=file, field="path")
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(file, flags)
    except OSError as exc:
        if root is not None and os.path.islink(file):
            raise FormatError(f"{what} is a symbolic link; a case holds regular files only", file=file,
                              field="path") from None
        raise FormatError(f"cannot read the {what} ({exc.strerror or exc})", file=file) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FormatError(f"{what} is {_kind(mode)}, not a regular file; refusing to read it", file=file,
                          field="path")
    return fd


def read_bytes(path: str | os.PathLike[str], *, limit: int, root: str | os.PathLike[str] | None = None,
               what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see :func:`open_regular`)."""
    fd = open_regular(path, root=root, what=what)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FormatError(f"{what} is {size:,} bytes; the limit is {limit:,}", file=os.fspath(path),
                              field="size", value=size)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FormatError(f"{what} grew past the limit of {limit:,} bytes while read", file=os.fspath(path),
                          field="size", value=len(data))
    return data


def decode_text(data: bytes, file: str, what: str = "file") -> str:
    """UTF-8 text, or a FormatError naming the offset of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})",
                          file=file, offset=exc.start, field="encoding") from None


def read_text(path: str | os.PathLike[str], *, limit: int = TEXT_LIMIT, root: str | os.PathLike[str] | None = None,
              what: str = "file") -> str:
    return decode_text(read_bytes(path, limit=limit, root=root, what=what), os.fspath(path), what)


def gunzip(data: bytes, file: str, *, cap: int | None = None) -> bytes:
    """Decompress a gzip stream, refusing output past ``GZIP_RATIO`` x its size (floor ``GZIP_FLOOR``) or
    ``GZIP_CAP`` (``cap`` overrides both)."""
    limit = cap if cap is not None else min(GZIP_CAP, max(GZIP_FLOOR, GZIP_RATIO * len(data)))
    d = zlib.decompressobj(wbits=31)
    out = bytearray()
    rest: bytes = data
    try:
        while not d.eof:
            got = d.decompress(rest, limit + 1 - len(out))
            out += got
            if len(out) > limit:
                raise FormatError(f"gzip stream expands past the limit of {limit:,} bytes ({len(data):,} bytes "
                                  f"compressed; limit {GZIP_RATIO}x the file, at least {GZIP_FLOOR:,}, at most "
                                  f"{GZIP_CAP:,})", file=file, field="gzip", value=len(data))
            if not rest and not got and not d.eof:
                raise FormatError("corrupt gzip stream (it ends before its last block)", file=file,
                                  offset=len(data))
            rest = d.unconsumed_tail
    except zlib.error as exc:
        raise FormatError(f"corrupt gzip stream ({exc})", file=file, offset=0) from None
    if d.unused_data:
        raise FormatError(f"{len(d.unused_data)} bytes after the gzip stream (several members are not read)",
                          file=file, offset=len(data) - len(d.unused_data))
    return bytes(out)


def depth_ok(text: str | bytes, file: str, *, brackets: str = "[{", what: str = "file") -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` (counted on the raw text, strings included: an over-count
    only refuses sooner) before a recursive parser sees it."""
    import numpy as np
    raw = np.frombuffer(text.encode() if isinstance(text, str) else text, np.uint8)
    opens = np.isin(raw, np.frombuffer(brackets.encode(), np.uint8))
    closes = np.isin(raw, np.frombuffer(b"]}", np.uint8))
    if not opens.any():
        return
    depth = np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
    if int(depth.max()) > MAX_DEPTH:
        at = int(np.argmax(depth > MAX_DEPTH))
        raise FormatError(f"{what} nests deeper than {MAX_DEPTH} levels (at offset {at}); refusing to parse it",
                          file=file, offset=at, field="nesting", value=int(depth.max()))


def load_json(data: str | bytes, file: str, what: str = "JSON file") -> Any:
    """JSON from text or bytes: UTF-8, nesting at most ``MAX_DEPTH``; FormatError naming the file otherwise."""
    text = decode_text(data, file, what) if isinstance(data, bytes) else data
    depth_ok(text, file, what=what)
    try:
        return json.loads(text)
    except RecursionError:
        raise FormatError(f"{what} nests too deeply to parse", file=file, field="nesting") from None
    except ValueError as exc:
        raise FormatError(f"{what} is not valid JSON ({exc})", file=file) from None


def load_toml(data: str | bytes, file: str, what: str = "TOML file") -> dict[str, Any]:
    """TOML from text or bytes, bounded like :func:`load_json` (dotted keys count as nesting too)."""
    import tomllib
    text = decode_text(data, file, what) if isinstance(data, bytes) else data
    depth_ok(text, file, what=what)
    longest = max((line.split("=", 1)[0].count(".") for line in text.splitlines()), default=0)
    if longest > MAX_DEPTH:
        raise FormatError(f"{what} has a dotted key of {longest + 1} parts (at most {MAX_DEPTH})", file=file,
                          field="nesting", value=longest + 1)
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise FormatError(f"{what} nests too deeply to parse", file=file, field="nesting") from None
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{what} is not valid TOML: {exc}", file=file) from None


#: decoded bytes per value of each Parquet physical type (strings: a 16-byte view plus their data)
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12, "BYTE_ARRAY": 16,
          "FIXED_LEN_BYTE_ARRAY": 16}


_RULE = (f"{TABLE_FLOOR:,} for up to {TABLE_SMALL:,} bytes of Parquet, {TABLE_RATIO}x the size beyond, at most "
         f"{TABLE_CAP:,}")


def table_limit(size: int) -> int:
    """The most bytes Parquet data of ``size`` bytes may decode to: ``TABLE_FLOOR`` up to ``TABLE_SMALL``
    bytes (so reading any file of a few MB stays well under 1 GiB), past that ``TABLE_RATIO`` times the size
    (legitimate simulated profiles decode to up to 300 times their size), never past ``TABLE_CAP``."""
    return min(TABLE_CAP, TABLE_FLOOR if size <= TABLE_SMALL else max(TABLE_FLOOR, TABLE_RATIO * size))


def table_estimate(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> tuple[int, int]:
    """(file bytes, estimated decoded bytes) of a Parquet file from its footer alone: every leaf value (a list
    column has many per row) times its decoded width, plus the pages' uncompressed size."""
    import pyarrow.parquet as pq

    file = os.fspath(path)
    fd = open_regular(path, root=root, what="Parquet file")
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            meta = pq.ParquetFile(f).metadata
            widths = [_WIDTH.get(meta.schema.column(i).physical_type, 16) for i in range(meta.num_columns)]
            decoded = 0
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                decoded += rg.total_byte_size + sum(max(rg.column(i).num_values, rg.num_rows) * widths[i]
                                                    for i in range(rg.num_columns))
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except BaseException as exc:   # pyarrow errors on a corrupt footer
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FormatError(f"cannot read the Parquet file ({first[:200]})", file=file) from None
    return size, decoded


def check_tables(paths: list[Path], *, root: str | os.PathLike[str] | None = None, what: str = "tables") -> None:
    """Refuse, before decoding any, tables that together would decode past :func:`table_limit` of their
    combined size (a directory read as one: a profile, a case)."""
    sizes = [table_estimate(p, root=root) for p in paths]
    size, decoded = sum(s for s, _ in sizes), sum(d for _, d in sizes)
    limit = table_limit(size)
    if decoded > limit:
        biggest = max(range(len(paths)), key=lambda i: sizes[i][1])
        raise FormatError(f"the {what} would decode to about {decoded:,} bytes from {size:,} (the largest, "
                          f"{paths[biggest].name}, {sizes[biggest][1]:,}); the limit is {limit:,} ({_RULE})",
                          file=os.fspath(root or paths[biggest].parent), field="rows", value=decoded)


def read_table(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None):
    """A Parquet file as a polars DataFrame: a regular file (confined to ``root`` when given) whose decoded
    size, estimated from the footer before any page is decoded (:func:`table_estimate`), is within
    :func:`table_limit`. Any failure, including a panic inside the decoder on a corrupt page (a BaseException),
    is a FormatError."""
    import polars as pl

    file = os.fspath(path)
    size, decoded = table_estimate(path, root=root)
    limit = table_limit(size)
    if decoded > limit:
        raise FormatError(f"Parquet table would decode to about {decoded:,} bytes from {size:,}; the limit is "
                          f"{limit:,} ({_RULE})", file=file, field="rows", value=decoded)
    fd = open_regular(path, root=root, what="Parquet file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(size + 1)
    if len(data) != size:
        raise FormatError("changed while it was read", file=file)
    try:
        return pl.read_parquet(io.BytesIO(data))
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as exc:   # pyo3 panics (a corrupt page) derive from BaseException
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FormatError(f"cannot read the Parquet file ({first[:200]})", file=file) from None


__all__ = ["MAX_DEPTH", "TEXT_LIMIT", "check_tables", "decode_text", "depth_ok", "gunzip", "inside", "load_json",
           "load_toml", "open_regular", "read_bytes", "read_table", "read_text", "table_estimate", "table_limit"]
