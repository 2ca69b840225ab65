"""Profiles and arena CSVs that lie are refused, naming the file, the field and the value."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import FormatError
from toolkit.placement.csvio import MAX_BYTES, read_arena_csv
from toolkit.profile import read_profile, synthetic_profile, write_parquet
from toolkit.profile.model import Profile, validate


@pytest.mark.parametrize("version", [0, 6, 99, -1])
def test_a_parquet_profile_of_an_unknown_schema_version_is_refused(tmp_path, version) -> None:
    out = write_parquet(synthetic_profile(tiles=2, samples_per_tile=4), tmp_path / "p")
    attrs = json.loads((out / "profile.json").read_text())
    attrs["schema_version"] = version
    (out / "profile.json").write_text(json.dumps(attrs))
    with pytest.raises(FormatError, match=rf"schema_version={version} is not a profile schema") as err:
        read_profile(out)
    assert err.value.field == "schema_version"


def test_activities_pointing_at_missing_samples_are_refused() -> None:
    p = synthetic_profile(tiles=3, samples_per_tile=6, seed=1)
    assert p.activities.height
    bad = p.activities.with_columns((pl.col("sample") + 10_000).alias("sample"))
    with pytest.raises(FormatError, match=r"an activity points at sample \d+, which the tile does not have"):
        validate(Profile(**{**{k: getattr(p, k) for k in p.__dataclass_fields__}, "activities": bad}), file="x")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 3), st.sampled_from(["dup", "huge", "huge_upper"]))
def test_arena_csvs_that_would_lie_are_refused(tmp_path_factory, row, kind) -> None:
    rows = [[i, i, i + 2, 16] for i in range(4)]
    if kind == "dup":
        rows[row][0] = rows[(row + 1) % 4][0]
    elif kind == "huge":
        rows[row][3] = MAX_BYTES + 1
    else:
        rows[row][2] = MAX_BYTES + 1
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    path.write_text("id,lower,upper,size\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    field = {"dup": "id", "huge": "size", "huge_upper": "upper"}[kind]
    with pytest.raises(FormatError, match=rf"column '{field}'") as err:
        read_arena_csv(path)
    assert err.value.field == field


def test_two_buffers_of_2_to_62_bytes_are_refused_not_placed_past_the_capacity(tmp_path) -> None:
    path = tmp_path / "big.csv"
    path.write_text(f"id,lower,upper,size\n0,0,2,{1 << 62}\n1,0,2,{1 << 62}\n")
    with pytest.raises(FormatError, match=r"exceeds 281474976710656 bytes"):
        read_arena_csv(path)


def test_a_directory_is_not_a_csv(tmp_path) -> None:
    with pytest.raises(FormatError, match="is a directory"):
        read_arena_csv(tmp_path)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_byte_mutation_of_a_parquet_profile_is_read_or_refused(tmp_path_factory, data) -> None:
    """A mutated Parquet profile either still reads as a valid profile or raises FormatError; never another
    exception (the reader's promise for every file it is given)."""
    out = write_parquet(synthetic_profile(tiles=3, samples_per_tile=5, seed=2), tmp_path_factory.mktemp("p") / "p")
    path = data.draw(st.sampled_from(sorted(out.iterdir())))
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    if data.draw(st.booleans()):
        raw[at] ^= data.draw(st.integers(1, 255))
    else:
        raw = raw[:at]
    path.write_bytes(bytes(raw))
    try:
        p = read_profile(out)
    except FormatError as err:
        assert str(out) in str(err)
    else:
        assert validate(p, file=str(out)) is not None


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["tiles", "workers", "clock_hz", "name", "exchange_loopback", "code_regions",
                        "kernel_code_bytes", "memory_start", "packet_max_words", "grid_columns"]),
       st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3),
                 st.lists(st.integers(-1, 3), max_size=2)))
def test_any_value_for_a_target_field_is_accepted_or_refused_by_name(tmp_path_factory, name, value) -> None:
    from toolkit.errors import OptionError
    from toolkit.target import load_target
    path = tmp_path_factory.mktemp("t") / "t.json"
    path.write_text(json.dumps({name: value}))
    try:
        load_target(path)
    except OptionError as err:   # the field itself, or the consistency check it broke (memory coverage)
        related = {"memory_start": ("memory_elements", "load_limit", "memory_end"),
                   "packet_max_words": ("first_packet_max_words",)}.get(name, ())
        assert err.field.split("[")[0].split(".")[0] in (name, "target", *related), (name, value, err.field)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("clock_hz", True, r"clock_hz=True must be a number of Hz, not bool"),
    ("clock_hz", "1.5e9", r"clock_hz='1.5e9' must be a number of Hz, not str"),
    ("clock_hz", 1e-300, r"clock_hz=1e-300 is not a tile clock frequency"),
    ("clock_hz", 1e300, r"clock_hz=1e\+300 is not a tile clock frequency"),
    ("schema_version", 5.9, r"schema_version=5.9 must be an integer schema version"),
    ("schema_version", True, r"schema_version=True must be an integer"),
    ("format_version", "1", r"format_version='1' must be the integer 1"),
    ("source", 1, r"source=1 must be one of"),
    ("source", "measured", r"source='measured' must be one of"),
    ("format", None, r"format=None must be the string"),
])
def test_profile_json_fields_are_strictly_typed(tmp_path, field, value, match) -> None:
    out = write_parquet(synthetic_profile(tiles=2, samples_per_tile=4), tmp_path / "p")
    attrs = json.loads((out / "profile.json").read_text())
    attrs[field] = value
    (out / "profile.json").write_text(json.dumps(attrs))
    with pytest.raises(FormatError, match=match) as err:
        read_profile(out)
    assert err.value.field == field


def test_a_profile_with_an_impossible_clock_cannot_be_exported(tmp_path) -> None:
    from toolkit.profile import export_perfetto
    p = synthetic_profile(tiles=2, samples_per_tile=4)
    odd = Profile(samples=p.samples, clock_hz=1e-300)
    with pytest.raises(FormatError, match="not a tile clock frequency"):
        export_perfetto(odd, tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


def test_a_killed_profile_rewrite_keeps_the_profile_and_the_next_write_recovers(tmp_path, monkeypatch) -> None:
    from toolkit.files import replace
    p = synthetic_profile(tiles=2, samples_per_tile=4)
    out = write_parquet(p, tmp_path / "p.parquet")

    class Killed(BaseException):
        pass

    def die(*_a):
        raise Killed

    from toolkit.profile import parquet_io
    monkeypatch.setattr(replace, "remove", die)   # killed after the exchange, before the old copy is deleted
    monkeypatch.setattr(parquet_io, "remove", die)   # (a kill runs no cleanup either)
    with pytest.raises(Killed):
        write_parquet(p, out)
    monkeypatch.undo()
    assert read_profile(out).samples.height == 8 and len(list(tmp_path.iterdir())) == 2
    monkeypatch.setattr(replace, "alive", lambda pid: False)
    write_parquet(p, out)
    assert [x.name for x in tmp_path.iterdir()] == ["p.parquet"]
