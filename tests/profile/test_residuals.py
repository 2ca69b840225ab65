"""Predicted against measured: residual frames, bias and rank agreement, their errors and chart."""

from __future__ import annotations

import polars as pl
import pytest

from toolkit.errors import OptionError
from toolkit.profile import residuals, synthetic_profile
from toolkit.profile.model import Profile
from toolkit.viz.profile import residual_chart


def _scaled(p: Profile, factor: float) -> Profile:
    """The same profile with every sample 'factor' times as long (a uniformly biased prediction)."""
    s = p.samples
    start = s["start_cycle"].min()
    scaled = s.with_columns(((pl.col("start_cycle") - start) * factor + start).round().cast(pl.Int64)
                            .alias("start_cycle"),
                            ((pl.col("end_cycle") - start) * factor + start).round().cast(pl.Int64)
                            .alias("end_cycle"))
    return Profile(**{**{k: getattr(p, k) for k in p.__dataclass_fields__}, "samples": scaled})


def test_a_profile_against_itself_has_no_residual() -> None:
    p = synthetic_profile(tiles=6, samples_per_tile=40, seed=3)
    r = residuals(p, p, by="kernel")
    assert r.matched == r.frame.height and r.only_predicted == r.only_measured == 0
    assert (r.frame["delta_cycles"] == 0).all() and r.median_ratio == pytest.approx(1.0)
    assert r.spearman == pytest.approx(1.0)
    s = r.summary()
    assert s["ratio"].item() == pytest.approx(1.0) and s["groups_matched"].item() == r.matched


def test_a_uniform_bias_shows_in_the_ratio_not_the_ranking() -> None:
    p = synthetic_profile(tiles=6, samples_per_tile=40, seed=5)
    r = residuals(_scaled(p, 1.5), p, by="kernel")
    assert r.median_ratio == pytest.approx(1.5, rel=0.02)
    assert r.spearman == pytest.approx(1.0)
    assert r.summary()["ratio"].item() == pytest.approx(1.5, rel=0.02)


def test_groups_only_one_side_has_are_counted_not_dropped() -> None:
    p = synthetic_profile(tiles=4, samples_per_tile=30, seed=1)
    kernels = p.samples.filter(pl.col("kind") == "compute")["kernel"].drop_nulls().unique().sort().to_list()
    fewer = Profile(**{**{k: getattr(p, k) for k in p.__dataclass_fields__},
                       "samples": p.samples.filter(pl.col("kernel") != kernels[0])})
    r = residuals(p, fewer, by="kernel")
    assert r.only_predicted == 1 and r.only_measured == 0
    missing = r.frame.filter(pl.col("measured_cycles").is_null())
    assert missing.height == 1 and missing["ratio"].null_count() == 1


def test_samples_without_a_kernel_are_grouped_by_their_kind() -> None:
    p = synthetic_profile(tiles=4, samples_per_tile=30, seed=4)
    keys = residuals(p, p, by="kernel").frame["kernel"].to_list()
    assert "" not in keys and None not in keys
    assert {"exchange", "synchronization"} & set(keys)


def test_bad_groupings_are_refused_by_name() -> None:
    p = synthetic_profile(tiles=2, samples_per_tile=5)
    with pytest.raises(OptionError, match=r"by='tile' cannot align a prediction"):
        residuals(p, p, by="tile")
    with pytest.raises(OptionError, match=r"metric='cycles' is not a query column"):
        residuals(p, p, metric="cycles")


def test_the_chart_states_bias_and_ranking_and_draws_the_diagonal() -> None:
    p = synthetic_profile(tiles=6, samples_per_tile=40, seed=2)
    r = residuals(_scaled(p, 1.2), p, by="phase")
    spec = residual_chart(r).to_dict()
    assert "median ratio 1.2" in spec["title"] and "Spearman" in spec["title"]
    assert len(spec["layer"]) == 2 and spec["width"] <= 700
    assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"
