"""Regions of a profile: one repeat instance, the program around the repeat, the hardware's remainder sample."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit import tables
from toolkit.errors import OptionError
from toolkit.profile import SPANS_SCHEMA, Profile, crop, region_cycles, spans, write_capnp
from toolkit.simulate import phase_order

SMALL_VIT = {"width": 64, "hidden": 128, "heads": 4, "head_dim": 16, "image": 56, "patch": 14, "tokens": 16,
             "blocks": 3, "compute_tiles": 64}


@pytest.fixture(scope="module")
def vit() -> toolkit.Compilation:
    return toolkit.compile(toolkit.graph.get_workload("siglip-vit", **SMALL_VIT))


def test_a_repeated_program_splits_into_its_instances_and_the_program_around_them(vit) -> None:
    s = vit.spans()
    assert s.schema == pl.Schema(SPANS_SCHEMA)
    assert s["region"].to_list() == ["before layer", "layer[0]", "layer[1]", "layer[2]", "after layer"]
    # the regions tile the cropped program end to end, in order
    assert s["first_cycle"][0] == 0 and s["last_cycle"][-1] == crop(vit.profile).cropped_cycles
    assert (s["first_cycle"][1:].to_numpy() == s["last_cycle"][:-1].to_numpy()).all()
    # instances of one symbolic block last alike; the range after the first is their sum
    inst = s.filter(pl.col("block") == "layer")
    assert inst["span_cycles"].n_unique() == 1
    assert vit.region_cycles("layer[1:]") == int(inst["span_cycles"][1:].sum())
    assert vit.region_cycles("layer[0:2]") == int(inst["span_cycles"][:2].sum())
    assert vit.region_cycles("layer[1]") == int(inst["span_cycles"][1])


def test_a_profile_read_back_from_the_hardware_format_has_the_same_regions(vit, tmp_path) -> None:
    path = write_capnp(vit.profile, tmp_path / "p.capnp")
    back = toolkit.profile.read_capnp(path)
    assert spans(back, phase_order(vit.schedule)).equals(vit.spans())
    # without the program order: the epochs, instance 0 holding the program around the repeat
    by_epoch = spans(back)
    assert by_epoch["region"].to_list() == ["epoch 0", "epoch 1", "epoch 2"]
    assert by_epoch.filter(pl.col("region") == "epoch 1")["span_cycles"].item() == vit.region_cycles("layer[1]")


def _remainder_profile() -> Profile:
    """Two tiles: one detailed instance (two samples each), then the hardware's remainder sample covering the rest."""
    rows = {"tile": [0, 0, 0, 1, 1, 1], "sample": [0, 1, 2, 0, 1, 2], "local_index": [0, 1, 2, 0, 1, 2],
            "phase": [0, 1, 2, 0, 1, 2], "epoch": [0, 0, 1, 0, 0, 1],
            "operation": ["initial_sync", "layer.fc1", "repeat-remainder"] * 2,
            "kind": ["synchronization", "compute", "compute"] * 2, "kernel": ["", "amp", ""] * 2,
            "start_cycle": [100, 700, 5_000, 120, 700, 5_010], "end_cycle": [700, 5_000, 498_224, 700, 4_990, 498_200],
            "exchange_event_cycles": [0] * 6}
    samples = pl.DataFrame(rows).cast(tables.SAMPLES_SCHEMA)
    empty = {n: pl.DataFrame(schema=sch) for n, sch in (("activities", tables.ACTIVITIES_SCHEMA),
                                                         ("metadata", tables.METADATA_SCHEMA))}
    return Profile(samples=samples, clock_hz=1.5e9, source="hardware", **empty)


def test_the_hardwares_remainder_sample_is_its_own_region() -> None:
    p = _remainder_profile()
    s = spans(p)
    assert s["region"].to_list() == ["epoch 0", "remainder"]
    # cropped clock: origin 120 (the later first start); the remainder runs 5,000 -> 498,224 raw
    assert region_cycles(p, "remainder") == 498_224 - 5_000
    assert s.filter(pl.col("region") == "epoch 0")["last_cycle"].item() == 5_000 - 120


@pytest.mark.parametrize(("region", "match"), [
    ("nope", r"region='nope' is not a region of this profile; it has: epoch 0, remainder"),
    ("layer[1:]", r"needs the program order: pass order="),
    ("", r"region='' must name a region"),
    (3, r"region=3 must name a region"),
])
def test_an_unknown_region_is_refused_naming_the_regions(region, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        region_cycles(_remainder_profile(), region)
    assert err.value.field == "region"


def test_spans_refuse_what_is_not_a_profile_or_an_order() -> None:
    with pytest.raises(OptionError, match="spans needs a Profile or a Crop, got DataFrame"):
        spans(pl.DataFrame({"x": [1]}))
    with pytest.raises(OptionError, match="order must be a frame with columns event, block, instance"):
        spans(_remainder_profile(), order=pl.DataFrame({"event": [0]}))
