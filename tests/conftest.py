from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the checkout")
    return SHARED


@pytest.fixture
def vega_lite_specs():
    """Charts read as Vega-Lite specs: VegaFusion off for the test even if a notebook test enabled it."""
    import altair as alt
    before = alt.data_transformers.active
    alt.data_transformers.enable("default")
    yield
    alt.data_transformers.enable(before)
