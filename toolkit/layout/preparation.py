"""What an attention's operand producers make it prepare: the swapped (transposed-order) projections whose Q and K
results unpack into row-major rows (separately or grouped on disjoint owners), and the set of transposed results an
attention then rearranges (Q on every scores cell) or prepares on panel owners (K, V). ``plan_graph`` reads these
decisions; the schedule and the screen read :func:`unpack_chunks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from toolkit.layout.plans import LayoutParams, OpPlan


#: a projection whose result needs no unpack: (column span, runs later, root shift)
UNPACKED: tuple[tuple[int, int] | None, bool, int] = (None, False, 0)


def qk_preparation(ops: list[dict], tensors: dict, p: LayoutParams, batch: int) -> dict[int, tuple]:
    """Per swapped projection result read as Q or K by an attention's scores: (columns to unpack, whether its
    unpack waits for the next one, its result pieces' inner-tile shift); see :data:`UNPACKED`.

    A swapped GEMM stores its result in the AMP's transposed-left order; the scores product reads Q and K as
    row-major rows, so they are unpacked first (docs/QKV_PREPARATION.md: V's consumer copies panels from the
    projection order and needs none). Under ``p.qk_preparation == "grouped"`` the first of a Q / K pair waits
    and runs beside the second, whose result pieces move to the next inner tiles (disjoint owners when both
    run one plan), as the hardware's grouped preparation does (920 owners in one phase, not 460 in two).
    """
    producer = {op["output"]: op for op in ops}
    spans: dict[int, list[tuple[int, int]]] = {}
    pairs = []
    for i, op in enumerate(ops):
        if op["rule"] != "scores":
            continue
        acts = [t for t in op["inputs"] if tensors[t]["role"] in ("input", "activation", "output")]
        values = next((o for o in ops[i + 1:] if o["rule"] == "values"), None)
        v = ([t for t in values["inputs"] if tensors[t]["role"] in ("input", "activation", "output")][-1]
             if values is not None else None)
        src = {"q": acts[0], "k": acts[-1], "v": v}
        width = int(op["groups"]) // batch * int(op["inner"])
        for role in "qk":
            t = src[role]
            gemm = p.plan_of(producer[t]["name"]) if t in producer else None
            if gemm is None or not gemm.swapped or producer[t]["rule"] != "linear":
                continue
            off = [y for y in "qkv" if src[y] == t].index(role) * width
            spans.setdefault(t, []).append((off, off + width))
        if src["q"] != src["k"] and src["q"] in spans and src["k"] in spans:
            pairs.append(sorted((src["q"], src["k"]), key=lambda t: producer[t]["op_id"]))
    out = {t: ((min(lo for lo, _ in s), max(hi for _, hi in s)), False, 0) for t, s in spans.items()}
    if p.qk_preparation == "grouped":
        for first, second in pairs:
            g = p.plan_of(producer[first]["name"])
            a, b = g.result_split(int(producer[first]["cols"]) // g.n,   # linear_plan's narrowest cell
                                   int(producer[first]["rows"]) // g.m)
            out[first] = (out[first][0], True, 0)
            out[second] = (out[second][0], False, a * b)
    return out


def unpack_chunks(plan: OpPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The output slots a swapped projection unpacks (``plan.unpack``), with the rows and columns of each: the
    slot's columns inside the unpack span, all its rows (empty without an unpack)."""
    if plan.unpack is None:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    ch = plan.output.chunks()
    lo, hi = plan.unpack
    cols = np.maximum(0, np.minimum(ch["c1"], hi) - np.maximum(ch["c0"], lo))
    rows = (ch["r1"] - ch["r0"]) * (ch["g1"] - ch["g0"])
    keep = np.nonzero((cols > 0) & (plan.output.tiles.ravel() >= 0))[0]
    return keep, rows[keep], cols[keep]


def transposed_results(ops: list[dict], p: LayoutParams) -> frozenset[int]:
    """The tensors a swapped linear op stores, in the AMP's transposed-left order: an attention reading them as
    Q rearranges its rows into the AMP's left order on every scores cell, and prepares them as K or V on panel
    owners first (docs/QKV_PREPARATION.md: the Q / K unpacks, "attention's preparation copy", V's consumer
    copying panels from the projection order)."""
    return frozenset(op["output"] for op in ops
                     if op["rule"] == "linear" and (g := p.plan_of(op["name"])) is not None and g.swapped)


__all__ = ["UNPACKED", "qk_preparation", "transposed_results", "unpack_chunks"]
