"""size_package: the objects, the per-step size model, argument records, model validation, every preset."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from package_cases import packaged

import toolkit
from toolkit.errors import OptionError
from toolkit.package import PackageModel, size_package
from toolkit.tables import OBJECTS_SCHEMA, conform


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
    amp = obj.filter(pl.col("name") == "kernel:amp_matmul_f8")["size_bytes"].unique().to_list()
    assert amp == [c.target.code_bytes("amp_matmul_f8")]
    bigger = c.target.replace(kernel_code_bytes=(*c.target.kernel_code_bytes, ("gelu", 4000)))
    resized = packaged(c, bigger).objects.filter(pl.col("name") == "kernel:gelu")["size_bytes"].unique().to_list()
    assert resized == [4000]


def test_a_kernel_without_a_code_size_is_named(repeat2):
    t = repeat2.target.replace(kernel_code_bytes=(("amp_matmul_f8", 6656),))
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
