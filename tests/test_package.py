from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import FormatError, InvalidIRError, OptionError
from toolkit.package import (
    IMAGES_SCHEMA,
    PackageModel,
    dump_allocations,
    package_images,
    read_placement_dump,
    size_package,
    verify_package,
    write_images_parquet,
    write_placement_dump,
)
from toolkit.placement import place, verify_placement
from toolkit.tables import OBJECTS_SCHEMA, conform


def packaged(c, target=None, model=None):
    return size_package(c.schedule, c.exchange, c.tiles, target or c.target, model)


@pytest.fixture(scope="module")
def repeat2():
    return toolkit.compile(toolkit.build_graph("mlp-small-repeat", blocks=2))


@pytest.fixture(scope="module")
def single():
    # row_block 32: the default choice (24) leaves no room for code next to its 206 KiB panel (see the report)
    return toolkit.compile("mlp-single-b1", options={"row_block": 32})


@pytest.fixture(scope="module")
def placed(repeat2, single):
    out = {}
    for name, c in (("repeat2", repeat2), ("single", single)):
        pkg = packaged(c)
        objs = pl.concat([c.schedule.objects, pkg.objects])
        p = place(objs, c.target)
        out[name] = (c, pkg, objs, p)
    return out


# -- objects ------------------------------------------------------------------------------------
def test_objects_follow_the_schema_and_continue_the_ids(repeat2):
    pkg = packaged(repeat2)
    conform(pkg.objects, OBJECTS_SCHEMA)
    assert pkg.objects["object_id"].min() == repeat2.schedule.objects["object_id"].max() + 1
    assert pkg.objects["object_id"].is_unique().all()
    active = set(repeat2.tiles.per_tile["tile"].to_list())
    assert set(pkg.objects["tile"].unique().to_list()) == active
    per_tile = pkg.objects.group_by("tile").agg(pl.col("name"))
    for names in per_tile["name"].to_list():
        assert {"support.code", "supervisor", "support.stacks", "run_table", "host_state"} <= set(names)
    final = repeat2.schedule.phases["phase"].max()
    assert (pkg.objects["first"] == 0).all() and (pkg.objects["last"] == final).all()


def test_code_is_one_executable_group_per_tile_in_the_code_regions(repeat2):
    obj = packaged(repeat2).objects
    code = obj.filter(pl.col("access") == "executable")
    assert set(code["kind"].unique().to_list()) == {"code", "support"}
    assert code["regions"].to_list() == [[0]] * code.height
    groups = code.group_by("tile").agg(pl.col("group").n_unique().alias("n"), pl.col("group").first(),
                                       pl.col("object_id").min().alias("head"))
    assert (groups["n"] == 1).all() and (groups["group"] == groups["head"]).all()
    assert obj.filter(pl.col("access") == "data")["group"].is_null().all()


def test_kernel_code_per_symbol_used_on_the_tile(repeat2):
    c = repeat2
    obj = packaged(c).objects.filter(pl.col("name").str.starts_with("kernel:"))
    used = c.schedule.commands.select("tile", ("kernel:" + pl.col("kernel")).alias("name")).unique()
    assert obj.select("tile", "name").sort("tile", "name").equals(used.sort("tile", "name"))
    amp = obj.filter(pl.col("name") == "kernel:amp_matmul_f16")["size_bytes"].unique().to_list()
    assert amp == [c.target.code_bytes("amp_matmul_f16")]
    bigger = c.target.replace(kernel_code_bytes=(*c.target.kernel_code_bytes, ("gelu", 4000)))
    resized = packaged(c, bigger).objects.filter(pl.col("name") == "kernel:gelu")["size_bytes"].unique().to_list()
    assert resized == [4000]


def test_a_kernel_without_a_code_size_is_named(repeat2):
    t = repeat2.target.replace(kernel_code_bytes=(("amp_matmul_f16", 6144),))
    with pytest.raises(OptionError, match=r"no code size for kernel\(s\) \['add', 'gelu', 'layernorm'\]"):
        packaged(repeat2, t)


def test_supervisor_code_and_run_table_follow_the_per_step_model(repeat2):
    c, m = repeat2, PackageModel()
    pkg = packaged(c, model=m)
    tile = int(c.tiles.steps["tile"][0])
    steps = c.tiles.steps.filter(pl.col("tile") == tile)
    cmds = c.schedule.commands.filter(pl.col("tile") == tile).sort("command_id")
    nops = dict(c.schedule.operands.group_by("command_id").len().iter_rows())
    bodies, entries = {}, 0
    for s in steps.iter_rows(named=True):  # a hand computation for one tile
        size, slots = m.step_bytes, 0
        if s["kind"] == "compute":
            key = []
            for cmd in cmds.filter(pl.col("phase") == s["phase"]).iter_rows(named=True):
                n = nops[cmd["command_id"]]
                loaded = n if n <= c.target.register_operands else 1
                size += m.call_bytes + m.operand_bytes * loaded
                slots += loaded
                key.append((cmd["kernel"], cmd["rows"], cmd["cols"], cmd["inner"], cmd["groups"], cmd["calls"], n))
            key = ("compute", tuple(key))
        elif s["kind"] == "exchange":
            rows = c.exchange.rows.filter((pl.col("tile") == tile) & (pl.col("phase") == s["phase"])).height
            size += m.exchange_call_bytes + m.row_ref_bytes * rows
            slots = rows
            key = ("exchange", rows)
        else:
            size += m.sync_bytes
            key = ("sync",)
        bodies[key] = size
        entries += m.run_entry_bytes + m.argument_slot_bytes * slots
    expected = -(-sum(bodies.values()) // m.code_align) * m.code_align
    obj = pkg.objects.filter(pl.col("tile") == tile)
    assert obj.filter(pl.col("name") == "supervisor")["size_bytes"].item() == expected
    assert len(bodies) < steps.height  # equal bodies share code
    loops = 1 if c.schedule.repeats.height else 0
    run = m.run_header_bytes + entries + m.run_entry_bytes * loops
    assert obj.filter(pl.col("name") == "run_table")["size_bytes"].item() == run


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


# -- argument records ---------------------------------------------------------------------------------
def test_commands_with_more_operands_than_registers_get_an_argument_record(repeat2):
    c = repeat2
    assert packaged(c).objects.filter(pl.col("kind") == "argument_record").height == 0  # 7 registers: none
    t2 = c.target.replace(register_operands=2)
    pkg = packaged(c, t2)
    nops = c.schedule.operands.group_by("command_id").agg(pl.len().cast(pl.Int64).alias("n"))
    over = nops.filter(pl.col("n") > 2)
    assert over.height > 0
    rec = pkg.objects.filter(pl.col("kind") == "argument_record")
    assert rec.height == over.height
    cmd_of = rec.with_columns(pl.col("name").str.strip_prefix("args:").cast(pl.Int64).alias("command_id"))
    j = cmd_of.join(over, on="command_id").join(c.schedule.commands.select("command_id", pl.col("tile").alias("ct")),
                                                on="command_id")
    assert j.height == rec.height and (j["tile"] == j["ct"]).all()
    assert (j["size_bytes"] == -(-(4 + 4 * j["n"]) // 8) * 8).all()
    slots = pkg.arguments.group_by("record_object").agg(pl.len().alias("slots"), pl.col("slot").max())
    assert slots["slots"].sum() == over["n"].sum() and (slots["slot"] == slots["slots"] - 1).all()
    assert pkg.summary["argument_records"].item() == over.height


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


# -- row block direction ----------------------------------------------------------------------------------
def test_smaller_row_blocks_mean_more_waves_steps_and_code():
    """Row shard pinned at 2: halving the row block doubles the row blocks, so the waves, hence the
    steps, the supervisor code and the run-table entries grow; kernel code (symbols used) stays."""
    pins = {"row_shard": 2, "panel_groups": 2, "inner_split": 1}
    small = toolkit.compile("mlp-small-repeat", options={"row_block": 16, **pins})
    large = toolkit.compile("mlp-small-repeat", options={"row_block": 32, **pins})
    s, lg = packaged(small).summary.row(0, named=True), packaged(large).summary.row(0, named=True)
    assert s["steps"] > lg["steps"]
    assert s["supervisor_code_bytes"] > lg["supervisor_code_bytes"]
    assert s["run_table_bytes"] > lg["run_table_bytes"]
    assert s["code_bytes"] > lg["code_bytes"]


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


def _images(placed):
    c, pkg, _, p = placed["repeat2"]
    return c, package_images(pkg, c.schedule.objects, p.placement, c.target)


def _move(img, name, tile, address):
    hit = (pl.col("name") == name) & (pl.col("tile") == tile)
    return img.with_columns(pl.when(hit).then(pl.lit(address, pl.Int64)).otherwise("address").alias("address"))


def test_verify_package_rejects_segments_outside_the_load_range(placed):
    c, img = _images(placed)
    bad = _move(img, "host_state", 0, c.target.load_limit - 8)
    with pytest.raises(InvalidIRError, match="outside the load range"):
        verify_package(bad, c.target)


def test_verify_package_rejects_code_outside_region_0(placed):
    c, img = _images(placed)
    bad = _move(img, "supervisor", 0, 0xE0000)
    with pytest.raises(InvalidIRError, match=r"code outside the code regions \[0\]"):
        verify_package(bad, c.target)


def test_verify_package_rejects_overlaps_and_data_in_code_elements(placed):
    c, img = _images(placed)
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
    c, img = _images(placed)
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


# -- writers ---------------------------------------------------------------------------------------------------
def test_placement_dump_round_trips_with_the_documented_fields(placed, tmp_path):
    c, img = _images(placed)
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
    c, img = _images(placed)
    alloc = dump_allocations(img, c.target)
    g = c.target.instruction_element_bytes
    code = alloc.filter(pl.col("kind").is_in(["support", "padding"]) & (pl.col("tile") == 0)).join(
        img.filter(pl.col("tile") == 0).select(pl.col("address").alias("start"), "flags"), on="start", how="left")
    run = code.filter((pl.col("flags") == "RX") | (pl.col("kind") == "padding")).sort("start")
    assert run["start"][0] % g == 0 and run["end"][-1] % g == 0
    assert (run["start"][1:] == run["end"][:-1]).all()


def test_parquet_round_trips(placed, tmp_path):
    _, img = _images(placed)
    path = write_images_parquet(img, tmp_path / "images.parquet")
    assert pl.read_parquet(path).equals(img)


def test_a_failed_write_leaves_nothing(tmp_path):
    class Broken:
        def write_parquet(self, p):
            p.write_bytes(b"half")
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_images_parquet(Broken(), tmp_path / "images.parquet")
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


# -- the size model -------------------------------------------------------------------------------------------
def test_model_fields_are_validated():
    with pytest.raises(OptionError, match=r"step_bytes=-1 must be a non-negative integer"):
        PackageModel(step_bytes=-1)
    with pytest.raises(OptionError, match=r"code_align=12 must be a positive power of two"):
        PackageModel(code_align=12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.integers(0, 64), call=st.integers(0, 64), operand=st.integers(0, 16), row_ref=st.integers(0, 16),
       align=st.sampled_from([4, 8, 16]))
def test_sizes_add_up_for_any_model(repeat2, step, call, operand, row_ref, align):
    m = PackageModel(step_bytes=step, call_bytes=call, operand_bytes=operand, row_ref_bytes=row_ref, code_align=align)
    pkg = packaged(repeat2, model=m)
    obj = pkg.objects
    code = obj.filter(pl.col("access") == "executable")
    assert (code["size_bytes"] % align == 0).all()
    s = pkg.summary.row(0, named=True)
    assert s["total_bytes"] == obj["size_bytes"].sum() == pkg.tiles["total_bytes"].sum()
    assert s["code_bytes"] == code["size_bytes"].sum()
    assert s["max_tile_bytes"] == obj.group_by("tile").agg(pl.col("size_bytes").sum())["size_bytes"].max()
    base = packaged(repeat2, model=PackageModel(step_bytes=0, call_bytes=0, operand_bytes=0, row_ref_bytes=0,
                                                  exchange_call_bytes=0, sync_bytes=0, code_align=align))
    assert s["supervisor_code_bytes"] >= base.summary["supervisor_code_bytes"].item()


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
                             "groups": [1] * n, "calls": [1] * n, "launches": [1] * n, "est_cycles": [100] * n},
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


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["mlp-single-b4", "attention-b1", "attention-fused-b1", "mlp-b2-n3",
                                      "siglip-base"])
def test_every_preset_packages(workload):
    """Sizing only, on the chosen layout (the stages run here, so a layout that does not place still packages)."""
    from toolkit.exchange import lower_exchanges
    from toolkit.layout import search_layouts
    from toolkit.layout.search import params_of
    from toolkit.options import as_options
    from toolkit.schedule import schedule
    from toolkit.tiles import lower_tiles

    target = toolkit.ipu21()
    layout = search_layouts(toolkit.build_graph(workload), target, as_options(None))
    params = params_of(layout.candidates.filter(pl.col("chosen")).row(0, named=True))
    sched = schedule(layout.graphs[params.fused_qkv], params, target, tiles=layout.tiles)
    exchange = lower_exchanges(sched.transfers, target)
    tiles = lower_tiles(sched)
    pkg = size_package(sched, exchange, tiles, target)
    s = pkg.summary.row(0, named=True)
    assert s["tiles"] == tiles.per_tile.height and s["rows"] == exchange.rows.height
    assert s["total_bytes"] == pkg.objects["size_bytes"].sum() and s["image_bytes"] < s["loaded_bytes"]
    assert pkg.templates.height == sched.repeats.height
