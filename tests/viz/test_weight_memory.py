"""00-tour showed ``weight_class='interleaved'`` (the chosen layout's) for mlp-single-b1 as if it were where the
weights live. The layout's class is the AMP's coefficient read class; a swapped op reads the activation as its
coefficient, so its weights stay standard. ``weight_memory`` shows the objects' own class and placed region."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import toolkit
from toolkit.viz import weight_memory


@pytest.fixture(scope="module")
def single() -> toolkit.Compilation:
    return toolkit.compile("mlp-single-b1")


def test_each_weight_shows_its_objects_class_and_region(single) -> None:
    table = weight_memory(single.schedule.objects, single.placement.placement, single.target)
    objects = single.schedule.objects.filter(pl.col("kind") == "weight")
    truth = objects.group_by("name").agg(pl.col("class").unique())
    assert dict(zip(table["name"], table["class"], strict=True)) == {
        n: c[0] for n, c in truth.iter_rows()}                       # one class per weight, the objects'
    rows = {r["name"]: r for r in table.iter_rows(named=True)}
    assert single.layout.chosen.weight_class == "interleaved"
    swapped = [name for name, plan in single.layout.chosen.plans if plan.orientation == "swapped"]
    assert "mlp.fc2" in swapped
    for name in swapped:   # a swapped op's coefficient is the activation: its weights are standard, in region 0
        assert (rows[f"{name}.weight"]["class"], rows[f"{name}.weight"]["region"]) == ("standard",
                                                                                        "region 0 (standard)")
    assert table["objects"].sum() == objects.height


def test_the_tour_shows_the_weights_truth_beside_the_layout() -> None:
    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "00-tour.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"]]
    at = next(i for i, s in enumerate(sources) if s.strip() == "c.layout.chosen")
    assert "not where the weights are stored" in sources[at + 1]
    assert "toolkit.viz.weight_memory(" in sources[at + 2]
