"""What a package shares: plan rows once per tile, templates of repeated blocks, identical tile images."""

from __future__ import annotations

import polars as pl
from package_cases import packaged

import toolkit
from toolkit.package import PackageModel, size_package
from toolkit.tables import OBJECTS_SCHEMA


def test_plan_rows_are_stored_once_per_tile(single):
    pkg = packaged(single)
    want = (single.exchange.rows.group_by("tile").agg(pl.col("digest").n_unique().alias("n"))
            .with_columns((pl.col("n") * 36).alias("size_bytes")).select(pl.col("tile").cast(pl.Int32), "size_bytes"))
    got = pkg.objects.filter(pl.col("kind") == "exchange_rows").select("tile", "size_bytes")
    assert got.sort("tile").equals(want.sort("tile"))
    s = pkg.summary.row(0, named=True)
    assert s["rows"] == single.exchange.rows.height
    assert s["unique_rows"] == single.exchange.rows["digest"].n_unique() < s["tile_unique_rows"]
    assert s["dedup_savings_bytes"] > 0 and s["image_bytes"] < s["loaded_bytes"]


# -- templates -----------------------------------------------------------------------------------------
def test_a_two_instance_repeat_is_one_template_and_two_relocation_sets(repeat2):
    c = repeat2
    pkg = packaged(c)
    assert pkg.templates.height == 1
    t = pkg.templates.row(0, named=True)
    assert t["instances"] == 2 and t["template_bytes"] > 0
    rel = pkg.relocations
    assert sorted(rel["instance"].unique().to_list()) == [0, 1]
    sets = rel.group_by("instance").agg(pl.col("object_id").sort())
    assert sets["object_id"][0].to_list() == sets["object_id"][1].to_list()
    iterated = c.schedule.objects.filter((pl.col("kind") == "weight") & (pl.col("repeat_count") == 2))
    assert sorted(sets["object_id"][0].to_list()) == sorted(iterated["object_id"].to_list())
    assert (rel["instance"] == rel["repeat_index"]).all()
    assert t["relocation_records"] == rel.height == 2 * iterated.height
    assert t["bytes_if_unrolled"] == 2 * t["template_bytes"]
    assert t["savings_bytes"] == t["template_bytes"] - t["relocation_bytes"]
    tables = pkg.objects.filter(pl.col("kind") == "relocations").select("tile", "size_bytes")
    per_tile = rel.group_by("tile").agg((pl.len() * 8).cast(pl.Int64).alias("size_bytes"))
    assert tables.sort("tile").equals(per_tile.sort("tile"))


def test_more_instances_do_not_grow_the_template():
    two = toolkit.compile(toolkit.build_graph("mlp-small-repeat", blocks=2))
    four = toolkit.compile(toolkit.build_graph("mlp-small-repeat", blocks=4))
    a, b = packaged(two).templates.row(0, named=True), packaged(four).templates.row(0, named=True)
    assert a["template_bytes"] == b["template_bytes"]
    assert b["relocation_records"] == 2 * a["relocation_records"]
    assert b["savings_bytes"] > a["savings_bytes"]


def test_no_repeat_means_no_template(single):
    pkg = packaged(single)
    assert pkg.templates.height == 0 and pkg.relocations.height == 0
    assert pkg.summary["template_savings_bytes"].item() == 0


# -- a tiny golden case ---------------------------------------------------------------------------------------
def tiny_schedule(shapes):
    """One compute phase; tile t runs one layernorm of rows shapes[t] reading and writing its own objects."""
    from toolkit.schedule import (
        COMMANDS_SCHEMA,
        OPERANDS_SCHEMA,
        PHASES_SCHEMA,
        RELOCATIONS_SCHEMA,
        REPEAT_PHASES_SCHEMA,
        SEGMENTS_SCHEMA,
        SLICES_SCHEMA,
        Schedule,
    )
    from toolkit.tables import TRANSFERS_SCHEMA, empty
    n = len(shapes)
    phases = pl.DataFrame({"phase": [0], "kind": ["compute"], "op_id": [0], "name": ["ln"], "block": ["main"],
                           "wave": [0], "est_cycles": [100]}, schema=PHASES_SCHEMA)
    commands = pl.DataFrame({"command_id": range(n), "phase": [0] * n, "tile": range(n), "op_id": [0] * n,
                             "kernel": ["layernorm"] * n, "rows": shapes, "cols": [64] * n, "inner": [0] * n,
                             "groups": [1] * n, "dtype": ["f16"] * n, "weight_class": [None] * n, "panels": [0] * n,
                             "calls": [1] * n, "launches": [1] * n, "cast_cycles": [0] * n, "est_cycles": [100] * n},
                            schema=COMMANDS_SCHEMA)
    operands = pl.DataFrame({"command_id": [*range(n), *range(n)], "object_id": [*range(n), *range(n, 2 * n)],
                             "role": ["i"] * n + ["out"] * n, "offset": [0] * (2 * n)}, schema=OPERANDS_SCHEMA)
    objects = pl.DataFrame({
        "object_id": range(2 * n), "tile": [*range(n), *range(n)], "kind": ["activation"] * (2 * n),
        "name": ["x"] * n + ["y"] * n, "tensor_id": [0] * n + [1] * n, "size_bytes": [128 * s for s in shapes] * 2,
        "align": [8] * (2 * n), "first": [0] * (2 * n), "last": [0] * (2 * n), "access": ["data"] * (2 * n),
        "class": ["standard"] * (2 * n), "regions": [[0, 1]] * (2 * n), "group": [None] * (2 * n),
        "alias_of": [None] * (2 * n), "repeat_count": [1] * (2 * n), "separate_from": [[]] * (2 * n),
        "auxiliary": [False] * (2 * n)}, schema=OBJECTS_SCHEMA)
    return Schedule(phases=phases, commands=commands, operands=operands, transfers=empty(TRANSFERS_SCHEMA),
                    slices=empty(SLICES_SCHEMA), objects=objects, segments=empty(SEGMENTS_SCHEMA),
                    repeats=empty(REPEAT_PHASES_SCHEMA), relocations=empty(RELOCATIONS_SCHEMA))


def test_identical_tiles_are_one_image():
    from types import SimpleNamespace

    from toolkit.exchange import ROWS_SCHEMA
    from toolkit.tables import empty
    from toolkit.tiles import lower_tiles
    s = tiny_schedule([16, 16, 32])
    pkg = size_package(s, SimpleNamespace(rows=empty(ROWS_SCHEMA)), lower_tiles(s), toolkit.ipu21())
    m = PackageModel()
    sup = pkg.objects.filter(pl.col("name") == "supervisor")["size_bytes"].to_list()
    assert sup == [m.step_bytes + m.call_bytes + 2 * m.operand_bytes] * 3
    d = pkg.tiles["image_digest"].to_list()
    assert d[0] == d[1] != d[2]
    summ = pkg.summary.row(0, named=True)
    assert (summ["tiles"], summ["unique_images"], summ["dedup_savings_images"]) == (3, 2, 1)
    kernel = pkg.objects.filter(pl.col("name") == "kernel:layernorm")
    assert kernel.height == 3 and summ["kernel_code_bytes"] == 3 * toolkit.ipu21().code_bytes("layernorm")
    # the package file keeps one copy of the kernel, the support code, the host state and each distinct supervisor
    assert summ["image_bytes"] < summ["loaded_bytes"]
    assert summ["dedup_savings_bytes"] >= 2 * toolkit.ipu21().code_bytes("layernorm")
