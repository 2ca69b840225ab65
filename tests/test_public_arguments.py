"""Public functions check their arguments' types and name them (OptionError), and a sweep into a folder holding a
damaged point file it does not recompute refuses by name before any work, so load_sweep's promise holds."""

from __future__ import annotations

import polars as pl
import pytest
from typer.testing import CliRunner

from toolkit import report
from toolkit.cli import app
from toolkit.errors import OptionError
from toolkit.profile import Profile, barriers, compare, crop, idle, phase_labels, query, synthetic_profile
from toolkit.sweep import load_sweep, sweep

SMALL = "mlp-small-repeat"
P = synthetic_profile(4, 10, seed=1)


@pytest.mark.parametrize("func", [crop, query, idle, barriers, phase_labels, lambda x: compare(x, P)])
@pytest.mark.parametrize(("arg", "match"), [
    (P.samples, r"takes a Profile.*not DataFrame: wrap a samples frame as toolkit.profile.Profile\(samples=df\)"),
    (P.samples.lazy(), r"not LazyFrame: wrap"),
    (None, r"not NoneType"),
    ("run.capnp", r"not str"),
])
def test_profile_functions_name_a_wrong_argument(func, arg, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        func(arg)
    assert err.value.field == "profile"


@pytest.mark.parametrize("samples", [pl.DataFrame(), pl.LazyFrame(), P.samples.head(0)])
def test_an_empty_profile_crops_to_nothing_and_queries_to_no_rows(samples) -> None:
    e = Profile(samples=samples)
    c = crop(e)
    assert (c.cropped_cycles, c.tiles, c.samples.height) == (0, 0, 0)
    assert query(e).height == 0


def test_samples_lacking_columns_are_named() -> None:
    with pytest.raises(OptionError, match=r"crop: the profile's samples lack the columns \['start_cycle', "
                                          r"'end_cycle'\]"):
        crop(Profile(samples=pl.DataFrame({"tile": [0]})))
    with pytest.raises(OptionError, match=r"query: the profile's samples lack the columns \[.*'kind'"):
        query(Profile(samples=P.samples.drop("kind")))


@pytest.mark.parametrize(("arg", "match"), [
    (None, r"takes a mapping of names to compilations or a list of them, not NoneType"),
    (5, r"not int"),
    ("ab", r"not str"),
    ([None, None], r"compilations\['c0'\] is a NoneType, not a Compilation"),
    ({"a": P, "b": P}, r"compilations\['a'\] is a Profile, not a Compilation"),
])
def test_compare_programs_names_a_wrong_argument(arg, match) -> None:
    with pytest.raises(OptionError, match=match):
        report.compare_programs(arg)


@pytest.mark.parametrize("damage", ["garbage", "wrong-type", "fifo"])
def test_a_sweep_into_a_folder_with_a_damaged_foreign_point_refuses_by_name(tmp_path, damage) -> None:
    import os
    out = tmp_path / "ds"
    sweep([SMALL], {"row_block": [36]}, out=out, workers=1)
    good = next(out.glob("point-*.parquet"))
    f = out / "point-0123456789ab.parquet"   # another grid's point, damaged
    if damage == "garbage":
        f.write_bytes(b"PAR1 not really")
    elif damage == "wrong-type":
        pl.read_parquet(good).with_columns(pl.lit("many").alias("lowered_cycles"),
                                           pl.lit("0123456789ab").alias("point_id")).write_parquet(f)
    else:
        os.mkfifo(f)
    before = sorted(p.name for p in out.iterdir())
    r = CliRunner().invoke(app, ["sweep", SMALL, "-g", "row_block=18", "--workers", "1", "--out", str(out), "-q"])
    assert r.exit_code == 2, (r.output, r.exception)
    assert "holds 1 damaged point file that this sweep does not recompute" in r.output
    assert "point-0123456789ab.parquet" in r.output and "remove them" in r.output
    assert sorted(p.name for p in out.iterdir()) == before   # no point of the refused sweep was run
    f.unlink()
    assert sweep([SMALL], {"row_block": [18]}, out=out, workers=1).height == 1 and load_sweep(out).height == 2


@pytest.mark.parametrize(("func", "arg", "match"), [
    (report.numbers, None, r"numbers: c is a NoneType, not a Compilation"),
    (report.op_cycles, P, r"op_cycles: c is a Profile, not a Compilation"),
    (report.compare_peaks, None, r"compare_peaks\(compilations=...\) takes a mapping"),
    (report.compare_peaks, [], r"compare_peaks needs at least one compilation"),
    (report.compare_peaks, {"x": 1}, r"compilations\['x'\] is a int, not a Compilation"),
])
def test_report_functions_name_a_wrong_argument(func, arg, match) -> None:
    with pytest.raises(OptionError, match=match):
        func(arg)
