from __future__ import annotations

import altair as alt
import pytest

import toolkit


@pytest.fixture(scope="session")
def small() -> toolkit.Compilation:
    """The small repeated MLP, compiled once for every widget test."""
    return toolkit.compile("mlp-small-repeat")


@pytest.fixture(autouse=True)
def _vega_lite_specs():
    """Widget tests read Vega-Lite specs: keep VegaFusion off even if a notebook test enabled it."""
    before = alt.data_transformers.active
    alt.data_transformers.enable("default")
    yield
    alt.data_transformers.enable(before)
