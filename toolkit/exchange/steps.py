"""Step assignment: which exchange step each group is sent in.

A tile sends one stream and receives one stream at a time, so an exchange runs
as steps in which no tile sends twice and no tile receives twice. A *group* is
what one source sends in one step: a unicast (one destination row) or a
multicast (several destination rows, the same bytes). A group occupies its
source's send lane and every destination's receive lane.

- Unicast only: the groups are the edges of a bipartite sender/receiver
  multigraph and a valid step assignment is a proper edge colouring. Konig's
  theorem says the busiest lane's load (``step_lower_bound``) colours suffice;
  :func:`_konig_colour` reaches it exactly with alternating-path (Kempe chain)
  recolouring, using flat per-lane ``colour -> edge`` tables.
- Any multicast: first merge receive lanes that carry exactly the same groups
  (a K/V slice multicast to 31 row-block tiles puts the same groups on all 31;
  tiles are keyed by a 64-bit sum of random per-group values, and a collision
  could only merge lanes, which over-constrains but never breaks the colouring).
  When every group then touches one merged receive lane, the problem is a
  bipartite (source, lane) multigraph: Konig again, exactly the bound. Otherwise
  a first-fit greedy over per-lane colour bitsets (one int OR per lane a group
  touches, no conflict graph), an alternating-move squeeze of the top steps and
  iterated greedy (Culberson) passes on the same bitsets, until the lane bound is
  met or the pass budget is spent. When that still misses the bound and the
  conflict graph is small (at most ``DSATUR_PAIRS`` lane-sharing pairs), the
  conflict graph is coloured with DSATUR driven by a heap with lazy invalidation
  (the same tie-breaking as networkx's ``greedy_color(strategy="DSATUR")`` on a
  graph whose nodes are the groups in ascending id order) plus the same repairs,
  and the better colouring wins, so small problems are never worse than networkx
  DSATUR. Large problems (tens of thousands of groups sharing lanes by the
  dozen) skip DSATUR: its cost grows with the conflict pairs.

The DSATUR path (conflict graph, heap DSATUR and its repairs) lives in
:mod:`toolkit.exchange.dsatur`; :func:`conflict_csr` stays importable from here.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import ModelError
from toolkit.exchange.dsatur import _dsatur_colour, conflict_csr
from toolkit.exchange.lanes import lane_greedy, lane_improve, lane_squeeze, merged_lanes

__all__ = ["DSATUR_PAIRS", "GROUP_COLUMNS", "assign_steps", "colour_groups", "conflict_csr", "lane_bound",
           "step_lower_bound"]

GROUP_COLUMNS = ("group", "source", "destination")
DSATUR_PAIRS = 400_000


def assign_steps(groups: pl.DataFrame, *, loopback: bool = False) -> pl.DataFrame:
    """Assign every group a step (Int32 column ``step``, shared by all rows of a group).

    ``groups`` has rows ``group, source, destination`` (``destination`` may also be a
    list column: one row per group). Other columns pass through. In every step no
    tile sends twice and no tile receives twice. Unicast input gets exactly
    :func:`step_lower_bound` steps; multicast input gets a heap DSATUR colouring
    improved by iterated greedy passes. ``loopback`` allows ``destination == source``
    (the target's ``exchange_loopback``).
    """
    gid, src, dst, row_group = _read_groups(groups, loopback=loopback)
    step = colour_groups(gid, src, dst)
    return groups.with_columns(pl.Series("step", step[row_group], dtype=pl.Int32))


def step_lower_bound(groups: pl.DataFrame, *, loopback: bool = True) -> int:
    """Max over tiles of max(groups sent, groups received): no schedule has fewer steps."""
    gid, src, dst, _ = _read_groups(groups, loopback=loopback)
    return lane_bound(gid, src, dst)


# -- numpy-level entry points (used by lower_exchanges) ------------------------
def lane_bound(gid: np.ndarray, src: np.ndarray, dst: np.ndarray) -> int:
    """Lane bound for dense group ids ``gid`` (per destination row) with per-group ``src``."""
    if len(src) == 0:
        return 0
    sends = np.bincount(src).max()
    receives = np.bincount(dst).max() if len(dst) else 0
    return int(max(sends, receives))


def colour_groups(gid: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Steps per group. ``src[g]`` is group g's source; ``gid[i], dst[i]`` its destination rows.

    Tile ids must be non-negative; group ids are dense ``0..len(src)-1`` and each
    group has at least one destination row.
    """
    n = len(src)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    if len(dst) == n and np.array_equal(gid, np.arange(n)):
        return _konig_colour(src, dst)
    fanout = np.bincount(gid, minlength=n)
    if fanout.max() == 1:
        order = np.argsort(gid, kind="stable")
        return _konig_colour(src, dst[order])
    return _multicast_colour(gid, src, dst)


# -- unicast: exact bipartite edge colouring ----------------------------------
def _konig_colour(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Edge-colour the bipartite multigraph (src[e], dst[e]) with max-degree colours.

    Each edge takes the lowest step free at both ends (per-lane bitsets); only when
    no step is free at both does an alternating path swap two steps.
    """
    _, u_arr = np.unique(src, return_inverse=True)
    _, v_arr = np.unique(dst, return_inverse=True)
    deg = int(max(np.bincount(u_arr).max(), np.bincount(v_arr).max()))
    nu, nv = int(u_arr.max()) + 1, int(v_arr.max()) + 1
    at_u = [-1] * (nu * deg)   # send lane x colour -> edge
    at_v = [-1] * (nv * deg)   # receive lane x colour -> edge
    used_u = [0] * nu          # colours taken at each send lane (bitset)
    used_v = [0] * nv
    u_list = u_arr.tolist()
    v_list = v_arr.tolist()
    lanes = (u_list, v_list, at_u, at_v, used_u, used_v, deg)
    colour = [0] * len(u_list)
    for e in range(len(u_list)):
        u = u_list[e]
        v = v_list[e]
        free = ~(used_u[u] | used_v[v])
        a = (free & -free).bit_length() - 1
        if a >= deg:
            fu = ~used_u[u]
            fv = ~used_v[v]
            a = (fu & -fu).bit_length() - 1
            _flip(v, a, (fv & -fv).bit_length() - 1, lanes, colour)
        colour[e] = a
        at_u[u * deg + a] = e
        at_v[v * deg + a] = e
        used_u[u] |= 1 << a
        used_v[v] |= 1 << a
    return np.asarray(colour, dtype=np.int32)


def _flip(v: int, a: int, b: int, lanes: tuple, colour: list[int]) -> None:
    """Swap colours a and b on the a/b alternating path that starts at receive lane ``v`` with colour a.

    The new edge's sender has ``a`` free, so the path (which enters senders through
    a-edges) never reaches it; afterwards ``a`` is free at both ends of the new edge.
    """
    u_list, v_list, at_u, at_v, used_u, used_v, deg = lanes
    path = []
    node = v
    on_receiver = True
    c = a
    while True:
        f = at_v[node * deg + c] if on_receiver else at_u[node * deg + c]
        if f == -1:
            break
        path.append(f)
        node = u_list[f] if on_receiver else v_list[f]
        on_receiver = not on_receiver
        c = b if c == a else a
    for f in path:
        c = colour[f]
        at_u[u_list[f] * deg + c] = -1
        at_v[v_list[f] * deg + c] = -1
        used_u[u_list[f]] &= ~(1 << c)
        used_v[v_list[f]] &= ~(1 << c)
    for f in path:
        c = b if colour[f] == a else a
        colour[f] = c
        at_u[u_list[f] * deg + c] = f
        at_v[v_list[f] * deg + c] = f
        used_u[u_list[f]] |= 1 << c
        used_v[v_list[f]] |= 1 << c


# -- multicast: bitset greedy, then heap DSATUR on small conflict graphs ------
def _multicast_colour(gid: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    n = len(src)
    bound = lane_bound(gid, src, dst)
    member_group, member_lane, n_recv = merged_lanes(gid, dst)
    recv_lanes = np.bincount(member_group, minlength=n)
    if recv_lanes.max() == 1:  # every group on one merged receive lane: a bipartite multigraph again
        return _konig_colour(src, member_lane)
    _, send_lane = np.unique(src, return_inverse=True)
    n_lanes = n_recv + int(send_lane.max()) + 1
    # lane-sharing pairs DSATUR's conflict graph would enumerate (per tile, before merging)
    pairs = int((np.bincount(dst).astype(np.int64) ** 2).sum() + (np.bincount(send_lane).astype(np.int64) ** 2).sum())
    indptr = np.r_[0, np.cumsum(recv_lanes)].tolist()
    recv_list = member_lane.tolist()
    send_list = (send_lane + n_recv).tolist()
    lanes = [[send_list[g], *recv_list[indptr[g]:indptr[g + 1]]] for g in range(n)]
    colour = lane_greedy(range(n), lanes, n_lanes, n)
    if max(colour) + 1 > bound:
        colour = lane_squeeze(colour, lanes, n_lanes, bound)
    if max(colour) + 1 > bound:
        colour = lane_squeeze(lane_improve(colour, lanes, n_lanes, bound), lanes, n_lanes, bound)
    if max(colour) + 1 > bound and pairs <= DSATUR_PAIRS:
        other = _dsatur_colour(gid, src, dst, bound)
        if max(other) < max(colour):
            colour = other
    return np.asarray(colour, dtype=np.int32)


# -- input ---------------------------------------------------------------------
def _read_groups(groups: pl.DataFrame, *, loopback: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate; return dense (gid per destination row, source per group, destination per row, gid per input row)."""
    if not isinstance(groups, pl.DataFrame):
        msg = f"groups must be a polars DataFrame with columns {list(GROUP_COLUMNS)}, got {type(groups).__name__}"
        raise ModelError(msg, field="groups", value=type(groups).__name__)
    missing = [c for c in GROUP_COLUMNS if c not in groups.columns]
    if missing:
        msg = f"groups frame is missing column(s) {missing}; it needs {list(GROUP_COLUMNS)} (has {groups.columns})"
        raise ModelError(msg, field=missing[0], value=None)
    df = groups.select(GROUP_COLUMNS)
    rows = np.arange(df.height)
    if isinstance(df.schema["destination"], pl.List):
        lengths = df["destination"].list.len().fill_null(0).to_numpy()
        if len(lengths) and lengths.min() == 0:
            _empty_group(df["group"][int(np.argmin(lengths))])
        rows = np.repeat(rows, lengths)
        df = df.explode("destination")
    for col in GROUP_COLUMNS:
        if not df.schema[col].is_integer():
            msg = f"groups column {col!r} must hold integers, got {df.schema[col]}"
            raise ModelError(msg, field=col, value=str(df.schema[col]))
    for col in ("group", "source"):
        if df[col].null_count():
            row = int(rows[df[col].is_null().arg_max()])
            msg = f"groups column {col!r} is null in row {row}; every row needs a {col}"
            raise ModelError(msg, field=col, value=None)
    if df["destination"].null_count():
        _empty_group(df["group"][df["destination"].is_null().arg_max()])
    g = df["group"].to_numpy().astype(np.int64)
    s = df["source"].to_numpy().astype(np.int64)
    d = df["destination"].to_numpy().astype(np.int64)
    for name, arr in (("source", s), ("destination", d)):
        if len(arr) and arr.min() < 0:
            i = int(np.argmin(arr))
            msg = f"{name}={int(arr[i])} in group {int(g[i])} is negative; tile ids start at 0"
            raise ModelError(msg, field=name, value=int(arr[i]))
    if not loopback and np.any(s == d):
        i = int(np.flatnonzero(s == d)[0])
        msg = (f"group {int(g[i])} sends from tile {int(s[i])} to itself (destination == source) but the target "
               "has exchange_loopback=False; copy locally instead")
        raise ModelError(msg, field="destination", value=int(d[i]))
    uniq, gid = np.unique(g, return_inverse=True)
    src = np.full(len(uniq), -1, dtype=np.int64)
    src[gid] = s
    if np.any(src[gid] != s):
        i = int(np.flatnonzero(src[gid] != s)[0])
        msg = (f"group {int(g[i])} has several sources ({int(s[i])} and {int(src[gid[i]])}); "
               "a group is what one source sends in one step")
        raise ModelError(msg, field="source", value=int(s[i]))
    pair = np.sort(gid * (int(d.max()) + 1 if len(d) else 1) + d)
    dup = np.flatnonzero(pair[1:] == pair[:-1])
    if len(dup):
        i = int(np.flatnonzero(gid * (int(d.max()) + 1) + d == pair[dup[0]])[0])
        msg = f"group {int(g[i])} lists destination {int(d[i])} twice; each destination receives a group once"
        raise ModelError(msg, field="destination", value=int(d[i]))
    row_gid = np.zeros(groups.height, dtype=np.int64)
    row_gid[rows] = gid
    return gid, src, d, row_gid


def _empty_group(group: object) -> None:
    msg = f"group {group} has no destination (empty group); every group needs at least one destination row"
    raise ModelError(msg, field="destination", value=None)
