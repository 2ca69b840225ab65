"""Pins that cannot apply are refused before the search, naming the option, its value and the legal range.

A pinned grid knob that no candidate can honour (a row shard larger than the
row blocks of any layout, an inner block deeper than every linear op, more
compute tiles than the target has) would otherwise be clamped silently and
reported as if it had been used.
"""

from __future__ import annotations

import math

from toolkit.errors import OptionError
from toolkit.graph import Graph
from toolkit.layout.plans import AMP_GROUP
from toolkit.options import Options
from toolkit.target import Target


def compute_tiles(graph: Graph, target: Target, options: Options) -> int:
    """The tiles the search may use: the option, else the workload's limit, else the target's; never more than
    the target has."""
    if options.tiles is not None and options.tiles > target.tiles:
        msg = f"option tiles={options.tiles} exceeds the {target.tiles} tiles of target {target.name!r}"
        raise OptionError(msg, field="tiles", value=options.tiles)
    return min(options.tiles or graph.params.get("compute_tiles") or target.tiles, target.tiles)


def check_pins(graph: Graph, options: Options) -> None:
    """Refuse grid pins no layout of ``graph`` can use (each error names the largest value that applies)."""
    linear = graph.ops.filter(graph.ops["rule"] == "linear")
    if not linear.height:
        return
    tokens, batch = int(graph.params["tokens"]), int(graph.params["batch"])
    blocks = [options.row_block] if options.row_block is not None else list(options.row_blocks)
    most_rows = max(batch * math.ceil(tokens / min(rb, tokens)) for rb in blocks)
    limits = {
        "row_shard": (most_rows, "the row blocks of any layout searched"),
        "inner_block": (int(linear["inner"].max()), "the deepest linear op's inner dimension"),
        "inner_split": (math.ceil(linear["inner"].max() / AMP_GROUP), "the 16-deep inner groups of the deepest op"),
        "panel_groups": (math.ceil(linear["cols"].max() / AMP_GROUP), "the 16-column groups of the widest op"),
    }
    for name, (limit, what) in limits.items():
        v = getattr(options, name)
        if v is not None and v > limit:
            msg = (f"option {name}={v} cannot apply to {graph.name!r}: it exceeds {what} ({limit}); "
                   f"pin at most {limit}, or leave it to the search")
            raise OptionError(msg, field=name, value=v)


__all__ = ["check_pins", "compute_tiles"]
