"""package_images and verify_package: placed segments, and what the checker rejects."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from package_cases import repeat2_images

import toolkit
from toolkit.errors import InvalidIRError
from toolkit.package import IMAGES_SCHEMA, package_images, verify_package
from toolkit.placement import verify_placement


# -- placement, images, verification ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["repeat2", "single"])
def test_schedule_and_package_objects_place_and_verify(placed, name):
    c, pkg, objs, p = placed[name]
    assert p.fits, p.failures
    verify_placement(objs, p.placement, c.target)
    img = package_images(pkg, c.schedule.objects, p.placement, c.target)
    assert img.schema == pl.Schema(IMAGES_SCHEMA)
    assert img.height == objs.height
    verify_package(img, c.target)
    code = img.filter(pl.col("flags") == "RX")
    assert set(code["kind"].unique().to_list()) == {"code", "support"}
    assert set(img.filter(pl.col("kind") == "weight")["flags"].unique().to_list()) == {"R"}
    assert img.filter(pl.col("loaded"))["digest"].null_count() == 0
    assert img.filter(~pl.col("loaded"))["digest"].null_count() == img.filter(~pl.col("loaded")).height


def _move(img, name, tile, address):
    hit = (pl.col("name") == name) & (pl.col("tile") == tile)
    return img.with_columns(pl.when(hit).then(pl.lit(address, pl.Int64)).otherwise("address").alias("address"))


def test_verify_package_rejects_segments_outside_the_load_range(placed):
    c, img = repeat2_images(placed)
    bad = _move(img, "host_state", 0, c.target.load_limit - 8)
    with pytest.raises(InvalidIRError, match="outside the load range"):
        verify_package(bad, c.target)


def test_verify_package_rejects_code_outside_region_0(placed):
    c, img = repeat2_images(placed)
    bad = _move(img, "supervisor", 0, 0xE0000)
    with pytest.raises(InvalidIRError, match=r"code outside the code regions \[0\]"):
        verify_package(bad, c.target)


def test_verify_package_rejects_overlaps_and_data_in_code_elements(placed):
    c, img = repeat2_images(placed)
    code = img.filter((pl.col("tile") == 0) & (pl.col("name") == "supervisor")).row(0, named=True)
    on_code = _move(img, "host_state", 0, code["address"])
    with pytest.raises(InvalidIRError, match="share bytes"):
        verify_package(on_code, c.target)
    g = c.target.instruction_element_bytes
    tail = -(-(code["address"] + code["size_bytes"]) // g) * g - 64  # same element, after the code
    beside = _move(img, "host_state", 0, tail)
    free = img.filter((pl.col("tile") == 0) & (pl.col("address") < tail + 64)
                      & (pl.col("address") + pl.col("size_bytes") > tail))
    assert free.height == 0  # the padding after the code is unused
    with pytest.raises(InvalidIRError, match="shares an instruction element with live code"):
        verify_package(beside, c.target)


def test_data_of_disjoint_lifetimes_may_share_addresses(placed):
    c, img = repeat2_images(placed)
    t0 = img.filter(pl.col("tile") == 0).with_row_index("i")
    pairs = t0.join(t0, how="cross", suffix="_b").filter(
        (pl.col("i") < pl.col("i_b")) & (pl.col("address") < pl.col("address_b") + pl.col("size_bytes_b"))
        & (pl.col("address_b") < pl.col("address") + pl.col("size_bytes")))
    assert pairs.height > 0  # the placer reuses addresses over time
    assert ((pairs["last"] < pairs["first_b"]) | (pairs["last_b"] < pairs["first"])).all()
    verify_package(img, c.target)
    p = pairs.row(0, named=True)
    longer = img.with_columns(pl.when(pl.col("object_id") == p["object_id"]).then(pl.lit(p["last_b"] + p["last"]))
                              .otherwise("last").cast(pl.Int32).alias("last"),
                              pl.when(pl.col("object_id") == p["object_id"]).then(pl.lit(0))
                              .otherwise("first").cast(pl.Int32).alias("first"))
    with pytest.raises(InvalidIRError, match="share bytes while both live"):
        verify_package(longer, c.target)


# -- verify_package on synthetic segments ---------------------------------------------------------------------
def segments(sizes, gaps, lives, tile=0, base=0x58000):
    addr, rows = base, []
    for k, (size, gap, (first, last)) in enumerate(zip(sizes, gaps, lives, strict=False)):
        addr += gap
        rows.append({"tile": tile, "object_id": k, "kind": "activation", "name": f"s{k}", "address": addr,
                     "size_bytes": size, "payload_bytes": size, "repeat_count": 1, "stride_bytes": size, "region": 0,
                     "flags": "RW", "loaded": False, "digest": None, "first": first, "last": last, "alias_of": None,
                     "tensor_id": None})
        addr += size
    return pl.DataFrame(rows, schema=IMAGES_SCHEMA)


lifetimes = st.tuples(st.integers(0, 5), st.integers(0, 5)).map(sorted)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 64), lifetimes), min_size=2, max_size=30),
       st.data())
def test_verify_package_accepts_disjoint_segments_and_finds_any_overlap(spec, data):
    sizes, gaps, lives = zip(*spec, strict=True)
    img = segments(sizes, gaps, lives)
    target = toolkit.ipu21()
    verify_package(img, target)
    # slide one segment onto its predecessor, both live at one event: verify must object
    k = data.draw(st.integers(1, len(spec) - 1))
    prev = img.row(k - 1, named=True)
    shift = data.draw(st.integers(0, prev["size_bytes"] - 1))
    bad = img.with_columns(
        pl.when(pl.col("object_id") == k).then(pl.lit(prev["address"] + shift, pl.Int64))
        .otherwise("address").alias("address"),
        pl.when(pl.col("object_id") == k).then(pl.lit(prev["first"], pl.Int32)).otherwise("first").alias("first"),
        pl.when(pl.col("object_id") == k).then(pl.lit(prev["last"], pl.Int32)).otherwise("last").alias("last"))
    with pytest.raises(InvalidIRError, match="share bytes while both live"):
        verify_package(bad, target)
