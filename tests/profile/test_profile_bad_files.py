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
