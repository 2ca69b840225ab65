"""Every result type prints in one short line: its frames by shape, never their rows."""

from __future__ import annotations

import dataclasses

import pytest

import toolkit
from toolkit.profile import barriers, crop, residuals

LIMIT = 400   # characters: a Compilation's repr printed its frames, 1-9 million characters


@pytest.fixture(scope="module")
def compiled() -> toolkit.Compilation:
    return toolkit.compile("mlp-small-repeat", options={"row_block": 36, "check": True})


def test_every_result_repr_is_short_and_says_its_frames_shapes(compiled: toolkit.Compilation) -> None:
    c = compiled
    results = [c.graph, c.layout, c.schedule, c.exchange, c.tiles, c.package, c.placement, c.profile, c.check,
               barriers(c.profile), crop(c.profile), residuals(c.profile, c.profile)]
    for r in results:
        text = repr(r)
        assert len(text) < LIMIT and text.startswith(type(r).__name__ + "("), text[:300]
        frames = [f.name for f in dataclasses.fields(r) if f.name in ("ops", "commands", "groups", "steps",
                                                                        "objects", "occupancy", "outputs")]
        for name in frames:
            assert f"{name}=<{getattr(r, name).height:,} rows x" in text


def test_compilation_repr_names_the_workload_pins_and_stages(compiled: toolkit.Compilation) -> None:
    text = repr(compiled)
    assert len(text) < LIMIT
    assert "workload='mlp-small-repeat'" in text and "'row_block': 36" in text and "check" in text
    assert f"{len(compiled.frames())} tables in .frames()" in text


def test_a_loaded_case_repr_is_short_and_names_its_workload() -> None:
    from pathlib import Path
    case = toolkit.load(Path(__file__).parents[1] / "artifacts" / "joint-placement" / "mlp-small-repeat")
    text = repr(case)   # its manifest, printed whole, was 63,621 characters
    assert len(text) < LIMIT and text.startswith("Case(") and "workload='mlp-small-repeat'" in text, text
