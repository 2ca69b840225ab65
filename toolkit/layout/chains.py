"""The joint choice of per-op GEMM plans along a block's chain of linear ops.

A block runs its ops one after another, so a tile holds the resident weights
of every linear op at once but the transient bytes (received operand panels,
partials, outputs) of one op at a time. A chain of plans fits a tile when

    sum over ops of weight_bytes + max over ops of transient_bytes <= room

(``room``: tile memory less the reserve for the staging window and package
support; each op's bytes are those of its fullest tile, so the sum is an upper
bound), and when every op's operand panel, which is contiguous, finds one
region's free span: region 0 beside the code, or region 1 beside the
interleaved weights of every op and the op's own gathered block. A plan whose
panel does not fit region 0 therefore caps the chain's weight bytes at
``region 1 - gathered block - panel`` (its ``ceiling``; interleaved weights
are always capped by region 1). Its cost is the sum of the ops'
``est_chain_cycles``: the op itself and the elementwise ops that run in place
on its output (GELU after fc1 costs what fc1's result grid makes it cost). The
next op's operand exchange is priced with the next op from the panel it
receives, so neighbours are coupled through the shared memory, which is what
this choice solves exactly.

Under a weight budget ``B`` the fastest chain whose plans each keep their
transient bytes within ``room - B`` and their ceiling at or above ``B``, and
whose weights sum to at most ``B``, is found exactly: per op, the (weight
bytes, cycles) Pareto front of its admissible plans; the fronts are added op by
op, keeping only Pareto points (a min-plus convolution), and the fastest sum
that fits is taken. A ladder of budgets (from the ops' distinct transient sizes
and ceilings, at most :data:`CAPS` of them by rank) gives one chain each; the
distinct chains form a cycles-against-memory trade-off, of which at most
:data:`MAX_CHAINS` are offered, fastest first: the later stages (whole-graph
screen, refinement with real routes, placement) judge them.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.layout.gemm import PLAN_FIELDS, GemmPlan

#: weight budgets tried (from the ops' distinct transient sizes and ceilings, thinned evenly by rank past this many)
CAPS = 24
#: chains offered to the whole-graph screen: the trade-off's fastest, its smallest and evenly between
MAX_CHAINS = 6

Chain = tuple[tuple[str, GemmPlan], ...]


def choose_chains(frames: dict[str, pl.DataFrame], capacity: int, reserve: int, pinned: dict[str, GemmPlan],
                  regions: tuple[int, int] | None = None, interleaved: bool = True,
                  also_normal: frozenset[str] = frozenset()) -> tuple[list[Chain], pl.DataFrame]:
    """The chains offered (fastest first, pinned plans included) and the per-op frame with ``chosen_in``.

    ``frames`` (at least one): per linear op, its plans with ``est_chain_cycles``,
    ``weight_bytes``, ``transient_bytes``, ``panel_bytes`` and ``gather_bytes``
    (a pinned op: its one plan). ``regions``: region 0's bytes beside the code
    and region 1's bytes (None: no region constraint); ``interleaved``: the
    weights are interleaved (region 1 holds them and the gathered blocks).
    Where no chain fits under any budget, the one chain of every op's smallest
    plan (weights plus transient bytes) is offered, so the later stages can say
    why it does not fit. ``also_normal``: ops whose orientation changes what
    their consumers cost, which their own estimate cannot see (the projections
    feeding an attention: a swapped one makes the attention prepare its
    operands); the chains with those ops in normal orientation are offered too,
    after the others, for the whole-graph screen to weigh.
    """
    room = capacity - reserve
    names = list(frames)
    ranked = [frames[n].sort("est_chain_cycles", "weight_bytes", "transient_bytes", "plan") for n in names]
    cyc = [f["est_chain_cycles"].to_numpy().astype(np.int64) for f in ranked]
    wts = [f["weight_bytes"].to_numpy().astype(np.int64) for f in ranked]
    tra = [f["transient_bytes"].to_numpy().astype(np.int64) for f in ranked]
    cei = [_ceilings(f, room, regions, interleaved) for f in ranked]
    found: dict[tuple[int, ...], tuple[int, int]] = {}
    for budget in _budgets(tra, cei, room):
        pick = _fastest_under(cyc, wts, tra, cei, int(budget), room)
        if pick is not None:
            found.setdefault(tuple(int(i) for i in pick), _totals(pick, cyc, wts, tra))
    if not found:   # nothing fits: every op's smallest plan, so the screen can say by how much
        pick = tuple(int(np.lexsort((c, w + t))[0]) for c, w, t in zip(cyc, wts, tra, strict=True))
        found[pick] = _totals(pick, cyc, wts, tra)
    offered = _offered(found)
    normal = [n in also_normal and "orientation" in f.columns for n, f in zip(names, ranked, strict=True)]
    if any(normal) and any((f["orientation"] == "swapped").any() for f, x in zip(ranked, normal, strict=True) if x):
        big = np.iinfo(np.int64).max // (4 * len(names))
        cyc_n = [np.where(f["orientation"].to_numpy() == "swapped", big, c) if x else c
                 for f, c, x in zip(ranked, cyc, normal, strict=True)]
        alt: dict[tuple[int, ...], tuple[int, int]] = {}
        for budget in _budgets(tra, cei, room):
            pick = _fastest_under(cyc_n, wts, tra, cei, int(budget), room)
            if pick is not None and max(c[i] for c, i in zip(cyc_n, pick, strict=True)) < big:
                alt.setdefault(tuple(int(i) for i in pick), _totals(pick, cyc, wts, tra))
        offered += [pick for pick in _offered(alt) if pick not in found]
    chains: list[Chain] = []
    labels: dict[tuple[str, str], list[int]] = {}
    for rank, pick in enumerate(offered):
        chain = {}
        for name, f, i in zip(names, ranked, pick, strict=True):
            row = f.row(i, named=True)
            chain[name] = pinned.get(name) or GemmPlan(**{k: row[k] for k in PLAN_FIELDS if k in row})
            labels.setdefault((name, row["plan"]), []).append(rank)
        chains.append(tuple(sorted({**pinned, **chain}.items())))
    per_op = pl.concat(ranked)
    tag = pl.DataFrame({"op": [o for o, _ in labels], "plan": [p for _, p in labels], "_in": list(labels.values())},
                       schema={"op": pl.String, "plan": pl.String, "_in": pl.List(pl.Int64)})
    per_op = (per_op.join(tag, on=["op", "plan"], how="left")
              .with_columns(pl.coalesce("_in", "chosen_in").alias("chosen_in")).drop("_in"))
    return chains, per_op


def _ceilings(f: pl.DataFrame, room: int, regions: tuple[int, int] | None, interleaved: bool) -> np.ndarray:
    """Per plan, the most weight bytes the chain may hold on a tile with it (see the module docstring)."""
    if regions is None:
        return np.full(f.height, room, dtype=np.int64)
    r0, r1 = regions
    panel = f["panel_bytes"].to_numpy().astype(np.int64)
    gather = f["gather_bytes"].to_numpy().astype(np.int64) if interleaved else np.zeros(f.height, dtype=np.int64)
    if interleaved:
        return np.where(panel > r0, r1 - gather - panel, r1)
    return np.where(panel > max(r0, r1), -1, room)


def _budgets(transient: list[np.ndarray], ceilings: list[np.ndarray], room: int) -> np.ndarray:
    """The weight budgets tried: room less each distinct transient size, and each distinct ceiling, within the
    room; thinned evenly by rank."""
    values = np.concatenate([room - np.concatenate(transient), *ceilings]) if transient else np.zeros(0, np.int64)
    values = np.unique(values[(values >= 0) & (values <= room)])
    if len(values) > CAPS:
        values = values[np.unique(np.linspace(0, len(values) - 1, CAPS).round().astype(np.int64))]
    return values


def _front(weights: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """Indices of the (weights, cycles) Pareto points: by weights, each strictly faster than every lighter one
    (ties keep the earlier index: the frames are ranked, so the choice is deterministic)."""
    order = np.lexsort((np.arange(len(weights)), cycles, weights))
    c = cycles[order]
    best_before = np.r_[np.iinfo(np.int64).max, np.minimum.accumulate(c)[:-1]]
    return order[c < best_before]


def _fastest_under(cyc: list[np.ndarray], wts: list[np.ndarray], tra: list[np.ndarray], cei: list[np.ndarray],
                   budget: int, room: int) -> np.ndarray | None:
    """Per op the index of its plan in the fastest chain with every transient within ``room - budget``, every
    ceiling at or above ``budget`` and the weights within ``budget`` (None when no chain does): the ops' Pareto
    fronts summed op by op."""
    total_w = np.zeros(1, dtype=np.int64)
    total_c = np.zeros(1, dtype=np.int64)
    picks = np.zeros((1, 0), dtype=np.int64)
    for c, w, t, ceiling in zip(cyc, wts, tra, cei, strict=True):
        ok = np.flatnonzero((t <= room - budget) & (ceiling >= budget) & (w <= budget))
        if not len(ok):
            return None
        idx = ok[_front(w[ok], c[ok])]
        sum_w = (total_w[:, None] + w[idx][None, :]).ravel()
        sum_c = (total_c[:, None] + c[idx][None, :]).ravel()
        fits = np.flatnonzero(sum_w <= budget)
        if not len(fits):
            return None
        keep = fits[_front(sum_w[fits], sum_c[fits])]
        picks = np.concatenate([np.repeat(picks, len(idx), axis=0), np.tile(idx, len(total_w))[:, None]],
                               axis=1)[keep]
        total_w, total_c = sum_w[keep], sum_c[keep]
    return picks[int(np.argmin(total_c))]


def _totals(pick, cyc: list[np.ndarray], wts: list[np.ndarray], tra: list[np.ndarray]) -> tuple[int, int]:
    """A chain's cycles and bytes on the fullest tile (weights of every op plus the largest transient set)."""
    cycles = sum(int(c[i]) for c, i in zip(cyc, pick, strict=True))
    weights = sum(int(w[i]) for w, i in zip(wts, pick, strict=True))
    return cycles, weights + max((int(t[i]) for t, i in zip(tra, pick, strict=True)), default=0)


def _offered(found: dict[tuple[int, ...], tuple[int, int]]) -> list[tuple[int, ...]]:
    """The chains not dominated in (cycles, bytes), fastest first; past MAX_CHAINS the fastest, the smallest and
    evenly spaced ones between."""
    picks = list(found)
    cyc = np.array([found[p][0] for p in picks], dtype=np.int64)
    mem = np.array([found[p][1] for p in picks], dtype=np.int64)
    keep = _front(cyc, mem)   # by cycles rising, each smaller than every faster one
    if len(keep) > MAX_CHAINS:
        keep = keep[np.unique(np.linspace(0, len(keep) - 1, MAX_CHAINS).round().astype(np.int64))]
    return [picks[i] for i in keep]


__all__ = ["CAPS", "MAX_CHAINS", "choose_chains"]
