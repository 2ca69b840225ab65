"""Stage results record the schedule they were computed from (a cheap fingerprint) and the stages that read
several of them together refuse another compilation's by name (OptionError naming the two stages)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import toolkit
from toolkit.errors import OptionError
from toolkit.package import size_package
from toolkit.schedule.lineage import check_lineage, schedule_fingerprint


@pytest.fixture(scope="module")
def two():
    c = toolkit.compile("mlp-small-repeat", options={"simulate": False})
    d = toolkit.compile("mlp-single-b1", options={"simulate": False})
    return c, d


def test_every_result_records_its_schedule(two) -> None:
    for c in two:
        fp = schedule_fingerprint(c.schedule)
        assert c.exchange.schedule_fingerprint == c.tiles.schedule_fingerprint == c.package.schedule_fingerprint == fp
    assert two[0].exchange.schedule_fingerprint != two[1].exchange.schedule_fingerprint
    assert "schedule_fingerprint" not in two[0].package.frames()
    assert not any(k.endswith("schedule_fingerprint") for k in two[0].frames())


@pytest.mark.parametrize(("call", "match"), [
    (lambda c, d: toolkit.simulate(c.schedule, c.exchange, d.tiles, c.target),
     r"simulate: tiles was lowered from another schedule than the one given"),
    (lambda c, d: toolkit.simulate(c.schedule, d.exchange, c.tiles, c.target),
     r"simulate: exchange was lowered from another schedule than the one given"),
    (lambda c, d: toolkit.simulate(replace(c, tiles=d.tiles)), r"simulate: tiles was lowered from another"),
    (lambda c, d: toolkit.check(replace(c, exchange=d.exchange)),
     r"check: exchange was lowered from another schedule than the one given \(the schedule's fingerprint "
     r"[0-9a-f]{16}, the exchange's [0-9a-f]{16}\)"),
    (lambda c, d: size_package(c.schedule, d.exchange, c.tiles, c.target),
     r"size_package: exchange was lowered from another schedule"),
    (lambda c, d: size_package(c.schedule, c.exchange, d.tiles, c.target),
     r"size_package: tiles was lowered from another schedule"),
])
def test_another_compilations_result_is_refused_by_name(two, call, match) -> None:
    c, d = two
    with pytest.raises(OptionError, match=match) as err:
        call(c, d)
    assert err.value.field in ("exchange", "tiles")


def test_results_of_one_compilation_pass_and_unrecorded_ones_are_not_checked(two) -> None:
    c, _ = two
    assert toolkit.simulate(c.schedule, c.exchange, c.tiles, c.target).samples.height > 0
    check_lineage("simulate", c.schedule, exchange=replace(c.exchange, schedule_fingerprint=None), tiles=c.tiles)


def test_a_recompiled_schedule_has_the_same_fingerprint(two) -> None:
    again = toolkit.compile("mlp-small-repeat", options={"simulate": False})
    assert schedule_fingerprint(again.schedule) == schedule_fingerprint(two[0].schedule)
    toolkit.simulate(again.schedule, two[0].exchange, two[0].tiles, again.target)   # the same program
