"""Tile mappings: a bijection from planned tiles to the tiles the program runs on, as data.

ipu-stack's package builder accepts such a bijection (``--tile-mapping``, a
JSON array indexed by planned tile) and applies it to every shard's owner and
every piece of work before per-tile projection, placement and exchange
scheduling; tensor coordinates and local storage orders are kept
(docs/MLP_LAYOUT_ALTERNATIVES.md, "Physical tile mapping"). Here it is applied
to every op plan's cells and layouts after planning (:func:`map_plans`), so
the schedule, placement, simulation and check all run on the mapped tiles.

The mappings its documents measure are one parametric family,
``block-G-W``: within every consecutive group of ``G`` tiles, planned tile
``t`` runs on ``G (t / G) + (G / W)(t % W) + (t % G) / W`` (integer division;
a ``G/W x W`` grid transposed in each group). ``block-92-2`` is the 46x2
transpose within 92-tile groups that won (174,132 cycles against 175,140);
``transpose-W`` is ``block-<tiles>-W``, the global transposes of
scripts/mlp-layout-alternatives.py (``(t % W)(tiles / W) + t / W``; all eight
widths lost, 178,116 to 189,816). A user gives any other bijection as a list.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from toolkit.errors import OptionError
from toolkit.layout.layout import Layout

#: the named mappings (a pattern per family, with what it means); ``identity`` maps every tile to itself
MAPPINGS = {
    "identity": "every planned tile runs on itself",
    "block-G-W": "within every G consecutive tiles, a G/W x W grid transposed (block-92-2: the measured winner)",
    "transpose-W": "the global transpose of width W (block-<tiles>-W)",
}
_BLOCK = re.compile(r"^block-(\d+)-(\d+)$")
_TRANSPOSE = re.compile(r"^transpose-(\d+)$")


def tile_permutation(mapping: str | tuple[int, ...] | list[int] | None, tiles: int) -> tuple[int, ...]:
    """The permutation (execution tile of every planned tile) a mapping names, or ``()`` for the identity.

    Refused by name: an unknown name (with the families), a group or width that does not divide the tiles
    (with the nearest that does), a list that is not a bijection of ``0 .. tiles - 1``."""
    if mapping is None or mapping == "identity" or (isinstance(mapping, tuple | list) and not mapping):
        return ()
    if isinstance(mapping, tuple | list):
        perm = np.asarray(mapping)
        if perm.shape != (tiles,) or not np.issubdtype(perm.dtype, np.integer) or not np.array_equal(
                np.sort(perm), np.arange(tiles)):
            msg = (f"option tile_mapping must be a permutation of the {tiles} compute tiles (each of 0 .. "
                   f"{tiles - 1} once, indexed by planned tile), got {len(mapping)} entries")
            raise OptionError(msg, field="tile_mapping", value=f"list of {len(mapping)}")
        return tuple(perm.tolist())
    if not isinstance(mapping, str):
        msg = f"option tile_mapping={mapping!r} must be a mapping name ({', '.join(MAPPINGS)}) or a list of tiles"
        raise OptionError(msg, field="tile_mapping", value=mapping)
    block, transpose = _BLOCK.match(mapping), _TRANSPOSE.match(mapping)
    if transpose:
        group, width = tiles, int(transpose.group(1))
    elif block:
        group, width = int(block.group(1)), int(block.group(2))
    else:
        msg = f"option tile_mapping={mapping!r} is not a mapping; name one of {', '.join(MAPPINGS)} or give a list"
        raise OptionError(msg, field="tile_mapping", value=mapping)
    bad = [(name, v, total) for name, v, total in (("group", group, tiles), ("width", width, group))
           if v < 1 or total % v]
    if bad:
        name, v, total = bad[0]
        near = min((d for d in range(1, total + 1) if total % d == 0), key=lambda d: (abs(d - v), d))
        msg = (f"option tile_mapping={mapping!r}: the {name} {v} does not divide {total} tiles; the closest that "
               f"does is {near}")
        raise OptionError(msg, field="tile_mapping", value=mapping)
    t = np.arange(tiles)
    perm = group * (t // group) + (group // width) * (t % width) + (t % group) // width
    return tuple(perm.tolist())


def map_plans(plans: list, perm: tuple[int, ...]) -> list:
    """Every op plan with its cells and every layout's tiles moved by ``perm`` (unplaced slots stay -1)."""
    if not perm:
        return plans
    p = np.asarray(perm, dtype=np.int32)

    def tiles(a: np.ndarray) -> np.ndarray:
        return np.where(a >= 0, p[np.maximum(a, 0)], a).astype(a.dtype)

    def moved(value):   # a layout, or a table of layouts (needs, weights, ...): every tile moved
        if isinstance(value, Layout):
            return dataclasses.replace(value, tiles=tiles(value.tiles))
        if isinstance(value, dict) and value and all(isinstance(v, Layout) for v in value.values()):
            return {k: moved(v) for k, v in value.items()}
        return value

    return [dataclasses.replace(plan, cell_tiles=tiles(plan.cell_tiles),
                                **{f.name: moved(getattr(plan, f.name)) for f in dataclasses.fields(plan)
                                   if f.name != "cell_tiles"}) for plan in plans]


__all__ = ["MAPPINGS", "map_plans", "tile_permutation"]
