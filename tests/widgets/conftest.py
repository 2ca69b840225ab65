from __future__ import annotations

import pytest

import toolkit


@pytest.fixture(scope="session")
def small() -> toolkit.Compilation:
    """The small repeated MLP, compiled once for every widget test."""
    return toolkit.compile("mlp-small-repeat")


@pytest.fixture(autouse=True)
def _vega_lite_specs(vega_lite_specs):
    """Charts here are read as Vega-Lite specs (tests/conftest.py)."""
