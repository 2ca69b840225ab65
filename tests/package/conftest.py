"""Compiled cases shared by the package tests: compiled once per test session (per xdist worker)."""

from __future__ import annotations

import polars as pl
import pytest
from package_cases import packaged

import toolkit
from toolkit.placement import place


@pytest.fixture(scope="session")
def repeat2():
    return toolkit.compile(toolkit.build_graph("mlp-block-small-repeat", blocks=2))


@pytest.fixture(scope="session")
def single():
    # row_block 32: the default choice (24) leaves no room for code next to its 206 KiB panel (see the report)
    return toolkit.compile("mlp-single-b1", options={"row_block": 32})


@pytest.fixture(scope="session")
def placed(repeat2, single):
    out = {}
    for name, c in (("repeat2", repeat2), ("single", single)):
        pkg = packaged(c)
        objs = pl.concat([c.schedule.objects, pkg.objects])
        p = place(objs, c.target)
        out[name] = (c, pkg, objs, p)
    return out
