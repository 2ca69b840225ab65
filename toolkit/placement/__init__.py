"""Joint SRAM placement: every memory object of every tile, one pass per distinct tile.

``place`` is the pipeline stage; ``solve_arena`` the generic single-arena solver
behind ``toolkit placement solve``; ``verify_placement`` the independent checker.
"""

from toolkit.placement.arena import ArenaResult, ArenaStats, ArenaStatus, greedy_by_size, lower_bound, solve_arena
from toolkit.placement.place import Placement, PlacementOptions, check_objects, place
from toolkit.placement.verify import verify_placement

__all__ = [
    "ArenaResult", "ArenaStats", "ArenaStatus", "Placement", "PlacementOptions", "check_objects", "greedy_by_size",
    "lower_bound", "place", "solve_arena", "verify_placement",
]
