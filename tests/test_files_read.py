"""Bounded, confined reads (fast versions of the bombs in test_bombs.py, with the caps made small): every
decompression and decoded table is refused past its limit by name, and only regular files are opened."""

from __future__ import annotations

import gzip
import os

import polars as pl
import pytest

from toolkit.errors import FormatError
from toolkit.files import read
from toolkit.files.read import gunzip, load_json, load_toml, open_regular, read_bytes, read_table


def test_gzip_is_streamed_and_refused_past_its_limit_relative_to_the_file() -> None:
    data = gzip.compress(bytes(1 << 22))   # 4 MiB of zeros in about 4 KB
    assert gunzip(data, "f", cap=1 << 23) == bytes(1 << 22)
    with pytest.raises(FormatError, match=r"gzip stream expands past the limit of 1,048,576 bytes"):
        gunzip(data, "f", cap=1 << 20)
    with pytest.raises(FormatError, match="ends before its last block"):
        gunzip(data[:-12], "f")
    with pytest.raises(FormatError, match="bytes after the gzip stream"):
        gunzip(data + b"junk", "f")


def test_a_table_is_refused_before_decoding_from_its_footer(tmp_path, monkeypatch) -> None:
    flat = tmp_path / "flat.parquet"
    pl.DataFrame({"a": [7] * 200_000, "b": ["x"] * 200_000}).write_parquet(flat)
    nested = tmp_path / "nested.parquet"
    pl.DataFrame({"l": [[1] * 200_000]}).write_parquet(nested)   # one row, 200,000 list values
    assert read_table(flat).height == 200_000 and read_table(nested).height == 1
    monkeypatch.setattr(read, "TABLE_FLOOR", 1 << 20)
    monkeypatch.setattr(read, "TABLE_RATIO", 4)
    for path in (flat, nested):
        with pytest.raises(FormatError, match=r"would decode to about [\d,]+ bytes .* the limit is 1,048,576") as e:
            read_table(path)
        assert e.value.field == "rows"


def test_only_regular_files_are_opened(tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "FIFO"), ("/dev/zero", "character device"), (tmp_path, "directory")):
        with pytest.raises(FormatError, match=kind):
            read_bytes(path, limit=10)
    big = tmp_path / "big"
    big.write_bytes(bytes(100))
    with pytest.raises(FormatError, match=r"is 100 bytes; the limit is 10"):
        read_bytes(big, limit=10)
    case = tmp_path / "case"
    case.mkdir()
    (case / "in").write_text("x")
    (case / "link").symlink_to(case / "in")
    (case / "out").symlink_to(big)
    os.close(open_regular(case / "in", root=case))
    with pytest.raises(FormatError, match="symbolic link"):
        open_regular(case / "link", root=case)
    with pytest.raises(FormatError, match="leaves"):
        open_regular(case / "out", root=case)


@pytest.mark.parametrize(("load", "text", "match"), [
    (load_json, "[" * 65 + "]" * 65, "nests deeper than 64"),
    (load_json, b'{"a": "\xff"}', r"not UTF-8 text \(byte 0xff at offset 7\)"),
    (load_toml, "a = " + "[" * 65 + "]" * 65, "nests deeper than 64"),
    (load_toml, "a" + ".b" * 70 + " = 1", "dotted key of 71 parts"),
])
def test_json_and_toml_are_bounded(load, text, match) -> None:
    with pytest.raises(FormatError, match=match):
        load(text, "f")
    assert load_json("[" * 64 + "]" * 64, "f") is not None
