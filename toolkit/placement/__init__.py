"""Joint SRAM placement: every memory object of every tile, one pass per distinct tile."""

from toolkit.placement.arena import ArenaResult, ArenaStatus, greedy_by_size, lower_bound, solve_arena

__all__ = ["ArenaResult", "ArenaStatus", "greedy_by_size", "lower_bound", "solve_arena"]
