"""Compiled inner loop of the beam refinement (numba, ``cache=True``).

``count_routes`` walks the pieces ``route`` would emit (the product of the
per-dimension chunk overlaps, times the destination replicas) without
materialising them, and adds each piece to the per (wave, tile) counters.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def count_routes(gs: np.ndarray, gd: np.ndarray, gext: np.ndarray, rs: np.ndarray, rd: np.ndarray,
                 rext: np.ndarray, cs: np.ndarray, cd: np.ndarray, cext: np.ndarray, src_counts: np.ndarray,
                 dst_counts: np.ndarray, src_tile: np.ndarray, dst_tile: np.ndarray, dst_cell: np.ndarray,
                 waves: np.ndarray, nbytes: int, send: np.ndarray, recv: np.ndarray, frags: np.ndarray,
                 sends: np.ndarray, copies: np.ndarray, copy_bytes: np.ndarray) -> None:
    """Add every piece from the source chunks to the destination slots to the counters.

    ``src_tile[chunk]`` is the source's tile; ``dst_tile[chunk, replica]`` and
    ``dst_cell[chunk, replica]`` the destination slots (negative: no tile / no
    cell). A piece on its own tile is a local copy (counted in ``copies`` and ``copy_bytes``, priced by
    ``toolkit.costs.copies_cycles``); a remote piece is received
    once per destination replica and sent once (at its first remote replica:
    a multicast leaves its source once).
    """
    snr, snc = src_counts[1], src_counts[2]
    dnr, dnc = dst_counts[1], dst_counts[2]
    reps = dst_tile.shape[1]
    for a in range(gs.shape[0]):
        for b in range(rs.shape[0]):
            gr_src = gs[a] * snr + rs[b]
            gr_dst = gd[a] * dnr + rd[b]
            gr_size = gext[a] * rext[b] * nbytes
            for c in range(cs.shape[0]):
                sc = gr_src * snc + cs[c]
                dc = gr_dst * dnc + cd[c]
                size = gr_size * cext[c]
                st = src_tile[sc]
                first = True
                for k in range(reps):
                    dt = dst_tile[dc, k]
                    cell = dst_cell[dc, k]
                    if dt < 0 or cell < 0:
                        continue
                    w = waves[cell]
                    if dt == st:
                        copies[w, dt] += 1
                        copy_bytes[w, dt] += size
                        continue
                    recv[w, dt] += size
                    frags[w, dt] += 1
                    if first:
                        send[w, st] += size
                        sends[w, st] += 1
                        first = False
