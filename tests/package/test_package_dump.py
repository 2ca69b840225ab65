"""Writers and readers of placed segments: the placement dump (JSON) and the images parquet."""

from __future__ import annotations

import json

import polars as pl
import pytest
from package_cases import repeat2_images

from toolkit.errors import FormatError, OptionError
from toolkit.package import dump_allocations, read_placement_dump, write_images_parquet, write_placement_dump


# -- writers ---------------------------------------------------------------------------------------------------
def test_placement_dump_round_trips_with_the_documented_fields(placed, tmp_path):
    c, img = repeat2_images(placed)
    path = write_placement_dump(img, tmp_path / "dump.json", c.target)
    with open(path) as f:
        data = json.load(f)
    assert set(data) == {"schema_version", "start", "end", "labels", "tiles"}
    assert data["schema_version"] == 1
    assert (data["start"], data["end"]) == (c.target.memory_start, c.target.load_limit)
    assert [t["logical"] for t in data["tiles"]] == sorted(img["tile"].unique().to_list())
    fields = {"start", "end", "payload_end", "label", "kind", "first", "last", "shards"}
    kinds = set()
    for t in data["tiles"]:
        assert set(t) == {"logical", "physical", "allocations"} and t["physical"] == t["logical"]
        starts = [a["start"] for a in t["allocations"]]
        assert starts == sorted(starts)
        for a in t["allocations"]:
            assert set(a) == fields and a["start"] <= a["payload_end"] <= a["end"]
            assert 0 <= a["label"] < len(data["labels"])
            kinds.add(a["kind"])
    assert kinds == {"parameter", "activation", "scratch", "support", "padding"}
    back = read_placement_dump(path)
    assert back.equals(dump_allocations(img, c.target))
    assert not list(tmp_path.glob(".*tmp*"))


def test_padding_fills_the_instruction_elements_code_reserves(placed):
    c, img = repeat2_images(placed)
    alloc = dump_allocations(img, c.target)
    g = c.target.instruction_element_bytes
    code = alloc.filter(pl.col("kind").is_in(["support", "padding"]) & (pl.col("tile") == 0)).join(
        img.filter(pl.col("tile") == 0).select(pl.col("address").alias("start"), "flags"), on="start", how="left")
    run = code.filter((pl.col("flags") == "RX") | (pl.col("kind") == "padding")).sort("start")
    assert run["start"][0] % g == 0 and run["end"][-1] % g == 0
    assert (run["start"][1:] == run["end"][:-1]).all()


def test_parquet_round_trips(placed, tmp_path):
    _, img = repeat2_images(placed)
    path = write_images_parquet(img, tmp_path / "images.parquet")
    assert pl.read_parquet(path).equals(img)


def test_a_failed_write_leaves_nothing(tmp_path):
    class Broken:
        def write_parquet(self, p):
            p.write_bytes(b"half")
            raise OSError("disk full")

    with pytest.raises(OptionError, match=r"cannot write .*images.parquet: disk full") as err:
        write_images_parquet(Broken(), tmp_path / "images.parquet")
    assert err.value.field == "output"
    assert list(tmp_path.iterdir()) == []


def test_reading_a_bad_dump_names_the_field(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"schema_version": 1, "start": 0, "end": 1, "labels": []}))
    with pytest.raises(FormatError, match=r"d.json: missing field 'tiles'"):
        read_placement_dump(p)
    p.write_text(json.dumps({"schema_version": 2, "start": 0, "end": 1, "labels": [], "tiles": []}))
    with pytest.raises(FormatError, match=r"schema_version=2 is not supported; expected 1"):
        read_placement_dump(p)
    p.write_text(json.dumps({"schema_version": 1, "start": 0, "end": 1, "labels": ["x"], "tiles": [
        {"logical": 0, "physical": 0, "allocations": [{"start": 0, "end": 4, "payload_end": 4, "label": 0,
                                                       "kind": "heap", "first": 0, "last": 0, "shards": 1}]}]}))
    with pytest.raises(FormatError, match=r"field 'kind': 'heap' is not one of"):
        read_placement_dump(p)
