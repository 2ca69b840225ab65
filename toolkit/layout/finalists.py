"""The finalist choice: which beam member the compiler keeps, given what the later stages make of each.

The layout stage ranks its beam (chosen first, then by refined cycles); the
later stages (schedule, exchange, tiles, package, placement) are run on one
finalist at a time by the caller's ``build``, and the first finalist that
places is kept. When none places, the first one tried is kept, so its
placement failures can be shown. The layout stage owns this rule; it never
imports the stages ``build`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import polars as pl

from toolkit.layout.search import LayoutResult

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Finalist(Generic[T]):
    """What ``build`` returns for one beam member: its later-stage results, whether it placed, its lowered cycles."""

    built: T
    placed: bool
    lowered_cycles: int


def finalist_order(layout: LayoutResult) -> list[int]:
    """Beam members in the order they are tried: the search's choice first, then by refined cycles."""
    beam = layout.candidates.filter(pl.col("beam")).sort(pl.col("chosen").not_(), "sched_cycles", "candidate_id")
    return beam["candidate_id"].to_list()


def choose_finalist(layout: LayoutResult, build: Callable[[int], Finalist[T]]) -> tuple[LayoutResult, T]:
    """Try finalists in :func:`finalist_order` until one places; returns the layout with that choice and every
    tried finalist's verdict (``placed``, ``lowered_cycles`` in the candidates frame) and the kept one's results."""
    placed: dict[int, bool] = {}
    lowered: dict[int, int] = {}
    kept: tuple[int, T] | None = None
    for cid in finalist_order(layout):
        f = build(cid)
        placed[cid], lowered[cid] = f.placed, f.lowered_cycles
        if kept is None or f.placed:
            kept = (cid, f.built)
        if f.placed:
            break
    if kept is None:
        msg = "the layout search left no finalist in its beam"
        raise AssertionError(msg)
    return layout.with_choice(kept[0], placed, lowered), kept[1]
