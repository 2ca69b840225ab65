import dataclasses
import json

import polars as pl
import pytest

from toolkit.errors import OptionError
from toolkit.target import Element, ipu21, load_target


def test_ipu21_element_table():
    els = ipu21().elements()
    std = els.filter(~pl.col("interleaved"))
    inter = els.filter(pl.col("interleaved"))
    assert std.height == 13 and inter.height == 13
    assert std["size_bytes"].unique().to_list() == [16 * 1024]
    assert inter["size_bytes"].unique().to_list() == [32 * 1024]
    assert std["offset"].min() == 0x4C000 and inter["offset"].min() == 0x80000
    assert els["size_bytes"].sum() == 638_976
    assert els["range"][0] == "0x4C000..0x50000"


def test_regions_and_defaults():
    t = ipu21()
    regions = t.regions()
    assert regions["start"].to_list() == [0x4C000, 0x80000]
    assert regions["code"].to_list() == [True, False]
    assert t.tiles == 1472 and t.clock_hz == 1.5e9 and t.load_limit == 0xE7BB0
    assert t.amp_rate("f16", "f16").macs_per_cycle == 64
    assert t.amp_rate("f16", "f32").macs_per_cycle == 32


def test_replace_revalidates():
    t = ipu21()
    assert dataclasses.replace(t, tiles=64).tiles == 64
    with pytest.raises(OptionError, match="tiles=0: must be a positive integer"):
        dataclasses.replace(t, tiles=0)
    assert t.replace(costs={"sync_cycles": 700}).costs.sync_cycles == 700


def test_overlapping_elements_rejected():
    els = list(ipu21().memory_elements)
    els[1] = Element(offset=els[1].offset - 16, size=els[1].size, region=0, interleaved=False)
    with pytest.raises(OptionError, match="overlaps the element at 0x4c000"):
        ipu21().replace(memory_elements=els)


def test_elements_must_cover_memory():
    els = list(ipu21().memory_elements)[:-1]
    with pytest.raises(OptionError, match=r"must cover 0x4c000\.\.0xe8000"):
        ipu21().replace(memory_elements=els)


def test_unknown_field_named():
    with pytest.raises(OptionError, match=r"unknown target field\(s\) \['tilez'\]"):
        ipu21().replace(tilez=3)


def test_load_json_and_toml(tmp_path):
    j = tmp_path / "t.json"
    j.write_text(json.dumps({"tiles": 16, "costs": {"launch_cycles": 12}}))
    t = load_target(j)
    assert t.tiles == 16 and t.costs.launch_cycles == 12 and t.costs.sync_cycles == 600
    toml = tmp_path / "t.toml"
    toml.write_text('tiles = 32\nclock_hz = 1.85e9\n')
    assert load_target(toml).clock_hz == 1.85e9
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OptionError, match="cannot read target overrides"):
        load_target(bad)
    zero = tmp_path / "zero.json"
    zero.write_text('{"tiles": 0}')
    with pytest.raises(OptionError, match="tiles=0"):
        load_target(zero)


@pytest.mark.parametrize(("body", "field", "match"), [
    ("kernel_code_bytes = 5", "kernel_code_bytes", r"kernel_code_bytes=5 must be a table of names to integers"),
    ("name = 5", "name", r"name=5 must be a string, got int"),
    ('exchange_loopback = "yes"', "exchange_loopback", r"exchange_loopback='yes' must be true or false"),
    ("code_regions = 3", "code_regions", r"code_regions=3 must be a list of integers"),
    ('memory_elements = [{offset = "0x4c000", size = 16384, region = 0, interleaved = false}]',
     "memory_elements[0].offset", r"memory_elements\[0\] offset='0x4c000' must be an integer"),
    ("memory_elements = 4", "memory_elements", r"memory_elements in .* must be a list of tables, got 4"),
    ("tiles = 1.5", "tiles", r"tiles=1.5 must be an integer"),
])
def test_target_fields_of_the_wrong_type_are_named(tmp_path, body, field, match) -> None:
    """Every target field (and every element and AMP entry) is checked against its declared type."""
    path = tmp_path / "t.toml"
    path.write_text(body + "\n")
    with pytest.raises(OptionError, match=match) as err:
        load_target(path)
    assert err.value.field == field


@pytest.mark.parametrize(("override", "match"), [
    ({"ld128_align": 0}, r"ld128_align=0: must be a positive integer"),
    ({"ld128_align": -16}, r"ld128_align=-16: must be a positive integer"),
    ({"ld128_align": 24}, r"ld128_align=24: must be a power of two"),
    ({"supervisors": 0}, r"supervisors=0: must be a positive integer"),
    ({"staging_base": -1}, r"staging_base=-1: the staging window"),
    ({"staging_base": 0xE7000}, r"staging_base=.*must lie in memory"),
    ({"amp": []}, r"amp=\[\]: the AMP rate table is empty"),
    ({"tiles": 100000}, r"tiles=100000: is above the limit of 8,192"),
    ({"workers": 1000}, r"workers=1000: is above the limit of 64"),
    ({"clock_hz": 1e-300}, r"clock_hz=1e-300: must be a clock frequency"),
    ({"costs": {"sync_cycles": 2**63 - 1}}, r"costs.sync_cycles=9223372036854775807: is above 1,000,000,000"),
])
def test_target_fields_out_of_range_are_refused_by_name(override, match) -> None:
    field = next(iter(override))
    with pytest.raises(OptionError, match=match) as err:
        ipu21().replace(**override)
    assert err.value.field.startswith(field)


@pytest.mark.parametrize(("name", "body"), [
    ("t.json", "[" * 100000 + "]" * 100000),
    ("t.json", '{"costs": ' * 5000 + "1" + "}" * 5000),
    ("t.toml", "a = " + "[" * 100000 + "]" * 100000),
    ("t.toml", "costs." * 5000 + "x = 1"),
    ("t.toml", "tiles = 1472\n# caf\xe9\n".encode("latin-1")),
])
def test_target_files_nested_too_deep_or_not_utf8_are_errors(tmp_path, name, body) -> None:
    p = tmp_path / name
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(OptionError, match=r"cannot read target overrides .*(nests deeper|dotted key|not UTF-8)"):
        load_target(p)


def test_a_fifo_target_file_does_not_block(tmp_path) -> None:
    import os
    p = tmp_path / "t.toml"
    os.mkfifo(p)
    with pytest.raises(OptionError, match="FIFO"):
        load_target(p)
