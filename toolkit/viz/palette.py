"""One colour per category, the same in every chart: sample kinds and kernel symbols.

Known categories (the profile's sample kinds and the cost model's kernel
symbols) have fixed colours; any other value (a hardware profile's own kernel
symbols) gets a colour from a stable hash of its name, so a category keeps its
colour between views, notebooks and runs.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import altair as alt

from toolkit.costs import KERNEL_SYMBOLS
from toolkit.tables import SAMPLE_KINDS

#: Tableau 20: ten hues, dark and light
PALETTE = ("#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d", "#f1ce63", "#499894",
           "#86bcb6", "#e15759", "#ff9d9a", "#79706e", "#bab0ac", "#d37295", "#fabfd2", "#b07aa1", "#d4a6c8",
           "#9d7660", "#d7b5a6")
#: sample kinds first (exchange blue, compute orange, sync dark grey, idle light grey), then every kernel symbol
#: from the hues the kinds leave free
FIXED = {"exchange": "#4e79a7", "compute": "#f28e2b", "synchronization": "#79706e", "idle": "#d7d7d7",
         # the renderer's timeline categories (toolkit.profile.timeline_categories): exchange in blues
         "send+receive": "#1f4e79", "send": "#4e79a7", "receive": "#a0cbe8", "partner busy": "#b07aa1",
         "exchange idle": "#e8eef5", "sync": "#79706e"}
# the two weight / memory classes (a sweep's or a layout's most common categorical key): far apart
FIXED.update({"interleaved": "#7570b3", "standard": "#e6ab02"})
_FREE = [c for c in PALETTE if c not in FIXED.values()]
FIXED.update({k: _FREE[i % len(_FREE)] for i, k in enumerate(k for k in KERNEL_SYMBOLS if k not in FIXED)})
assert set(SAMPLE_KINDS) <= set(FIXED)


#: colours for categories the toolkit does not know (a hardware profile's own kernel symbols), by name hash
EXTRA = ("#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#ccebc5", "#ffed6f",
         "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")


def color_of(value: str) -> str:
    """The colour of one category: fixed for known ones, a stable hash of the name for any other."""
    return FIXED.get(value) or EXTRA[zlib.crc32(value.encode()) % len(EXTRA)]


def color_scale(values: Iterable[str | None]) -> alt.Scale:
    """An altair colour scale over the categories present, each with its own colour (known ones first).

    Unknown categories take their hashed colour; two that hash alike in one view
    take the next free one, in name order, so the view stays readable.
    """
    present = {str(v) for v in values if v is not None}
    order = [k for k in FIXED if k in present] + sorted(present - FIXED.keys())
    used: set[str] = set()
    colors = []
    for v in order:
        c = color_of(v)
        if v not in FIXED:
            start = EXTRA.index(c)
            c = next((EXTRA[(start + i) % len(EXTRA)] for i in range(len(EXTRA))
                      if EXTRA[(start + i) % len(EXTRA)] not in used), c)
        used.add(c)
        colors.append(c)
    return alt.Scale(domain=order, range=colors)


__all__ = ["EXTRA", "FIXED", "PALETTE", "color_of", "color_scale"]
