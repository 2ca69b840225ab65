"""The accumulator the schedule builder fills: phases, commands, operands, transfers, objects and uses.

Tables are kept as numpy column chunks (string columns as vocabulary codes) and
turned into polars frames once. ``Program.move`` routes a layout into need
objects (multicast where several tiles need a piece; local pieces become copy
commands); ``Program.send`` moves pieces at explicit offsets.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl

from toolkit.layout.cost import DTYPE_BYTES, copy_cycles
from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import LayoutParams, OpPlan
from toolkit.target import Target


class Columns:
    """Accumulates one table as lists of numpy column chunks.

    String values are given as scalars per call and stored as codes into a
    per-column vocabulary, so millions of rows never become Python strings.
    """

    def __init__(self) -> None:
        self.parts: dict[str, list[Any]] = defaultdict(list)
        self.vocab: dict[str, dict[str, int]] = defaultdict(dict)
        self.count = 0

    def add(self, n: int, **cols: Any) -> np.ndarray:
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        for k, v in cols.items():
            if isinstance(v, str):
                code = self.vocab[k].setdefault(v, len(self.vocab[k]))
                self.parts[k].append(np.full(n, code, dtype=np.int32))
            else:
                self.parts[k].append(np.broadcast_to(np.asarray(v), (n,)) if np.ndim(v) == 0 else np.asarray(v))
        self.count += n
        return ids

    def columns(self) -> dict[str, np.ndarray]:
        """Numeric columns as numpy arrays (string columns as their codes)."""
        return {k: np.concatenate(v) if v else np.array([]) for k, v in self.parts.items()}

    def series(self, name: str) -> pl.Series:
        """One column as a polars Series, strings decoded from the vocabulary."""
        data = np.concatenate(self.parts[name]) if self.parts[name] else np.array([], dtype=np.int64)
        if name in self.vocab:
            words = pl.Series(name, list(self.vocab[name]), dtype=pl.String)
            return words.gather(pl.Series(data, dtype=pl.UInt32))
        return pl.Series(name, data)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame([self.series(k).alias(k) for k in self.parts])

#: the block of phases that run before the program's initial sync (a program-start conversion of its inputs)
PREAMBLE = "preamble"


class Program:
    """Mutable accumulator used only inside ``build_program``."""

    def __init__(self, target: Target, params: LayoutParams, tensors: dict[int, dict], block_of: dict[int, str],
                 instances: dict[str, int]) -> None:
        self.target = target
        self.params = params
        self.tensors = tensors
        self.block_of = block_of
        self.instances = instances
        self.phases = Columns()
        self.commands = Columns()
        self.operands = Columns()
        self.transfers = Columns()
        self.objects = Columns()
        self.uses = Columns()
        self.transfer_count = 0
        self.final_phase = 0

    # -- phases and objects -----------------------------------------------------
    def phase(self, kind: str, op: OpPlan, wave: int, block: str) -> int:
        return int(self.phases.add(1, kind=kind, op_id=op.op_id, name=op.name, wave=wave, block=block)[0])

    def new_objects(self, layout: Layout, slots: np.ndarray, tensor: int, kind: str, first: int, *,
                    cls: str = "standard", repeat: int = 1, dtype_bytes: int | None = None,
                    alias: np.ndarray | None = None, name: str | None = None) -> np.ndarray:
        """One object per selected (chunk, replica) slot of ``layout``; returns object ids (slot order)."""
        ch = layout.chunks()
        sel = {k: v[slots] for k, v in ch.items()}
        size = (sel["g1"] - sel["g0"]) * (sel["r1"] - sel["r0"]) * (sel["c1"] - sel["c0"])
        nbytes = size * (dtype_bytes or DTYPE_BYTES[self.tensors[tensor]["dtype"]])
        n = len(slots)
        t = self.tensors[tensor]
        return self.objects.add(
            n, tile=sel["tile"], kind=kind, name=name or t["name"], tensor_id=tensor, size_bytes=nbytes,
            align=16 if cls == "interleaved" or kind == "weight" else 8, first=first, access="data", cls=cls,
            repeat_count=repeat, alias_of=-1 if alias is None else alias,
            g0=sel["g0"], g1=sel["g1"], r0=sel["r0"], r1=sel["r1"], c0=sel["c0"], c1=sel["c1"],
        )

    def use(self, objects: np.ndarray, phase: int | np.ndarray) -> None:
        objects = np.asarray(objects)
        self.uses.add(len(objects), object_id=objects, phase=phase)

    # -- data movement ------------------------------------------------------------
    def move(self, src: Layout, src_objs: np.ndarray, need: Layout, slots: np.ndarray, need_objs: np.ndarray,
             tensor: int, xphase: int, cphase: int, *, dtype_bytes: int | None = None,
             pieces: dict[str, np.ndarray] | None = None) -> int:
        """Route ``src`` into the selected need slots (``pieces``: a precomputed route to reuse)."""
        pieces = route(src, need) if pieces is None else pieces
        slot = pieces["dst_chunk"] * need.replicas + pieces["replica"]
        obj_of_slot = np.full(need.tiles.size, -1, dtype=np.int64)
        obj_of_slot[slots] = need_objs
        dst_obj = obj_of_slot[slot]
        keep = dst_obj >= 0
        pieces = {k: v[keep] for k, v in pieces.items()}
        dst_obj = dst_obj[keep]
        src_obj = src_objs[pieces["src_chunk"] * src.replicas]   # objects are per slot; route reads replica 0
        b = dtype_bytes or DTYPE_BYTES[self.tensors[tensor]["dtype"]]
        size = (pieces["g1"] - pieces["g0"]) * (pieces["r1"] - pieces["r0"]) * (pieces["c1"] - pieces["c0"]) * b
        src_off = _offset(src, pieces["src_chunk"], pieces, b)
        dst_off = _offset(need, pieces["dst_chunk"], pieces, b)
        local = pieces["src_tile"] == pieces["dst_tile"]
        self._copies(np.nonzero(local)[0], pieces, pieces["dst_tile"], size, src_obj, src_off, dst_obj, dst_off, cphase)
        remote = np.nonzero(~local)[0]
        if len(remote):
            # one logical transfer per (source chunk, destination chunk): replicas are multicast destinations
            key = pieces["src_chunk"][remote] * (need.tiles.size + 1) + pieces["dst_chunk"][remote]
            # a tile holding two replicas of one need chunk (folded cells) gets its own transfer per replica
            dst = pieces["dst_tile"][remote].astype(np.int64)
            order = np.lexsort((dst, key))
            same = np.zeros(len(order), dtype=bool)
            same[1:] = (key[order][1:] == key[order][:-1]) & (dst[order][1:] == dst[order][:-1])
            run_start = np.maximum.accumulate(np.where(~same, np.arange(len(order)), 0))
            occurrence = np.empty(len(order), dtype=np.int64)
            occurrence[order] = np.arange(len(order)) - run_start
            _, tid = np.unique(key * (int(occurrence.max()) + 1) + occurrence, return_inverse=True)
            tid = tid + self.transfer_count
            self.transfer_count = int(tid.max()) + 1
            self.transfers.add(len(remote), transfer_id=tid, phase=xphase, source=pieces["src_tile"][remote],
                               destination=pieces["dst_tile"][remote], size_bytes=size[remote], tensor_id=tensor,
                               src_offset=src_off[remote], dst_offset=dst_off[remote], src_object=src_obj[remote],
                               dst_object=dst_obj[remote],
                               g0=pieces["g0"][remote], g1=pieces["g1"][remote], r0=pieces["r0"][remote],
                               r1=pieces["r1"][remote], c0=pieces["c0"][remote], c1=pieces["c1"][remote])
            self.use(src_obj[remote], xphase)
        return len(remote)


    def send(self, src_obj: np.ndarray, src_off: np.ndarray, dst_obj: np.ndarray, dst_off: np.ndarray,
             rect: dict[str, np.ndarray], src_tile: np.ndarray, dst_tile: np.ndarray, nbytes: int, tensor: int,
             xphase: int, cphase: int) -> None:
        """Point-to-point moves at explicit offsets: one transfer per remote row, a copy command per local one."""
        size = (rect["r1"] - rect["r0"]) * (rect["c1"] - rect["c0"]) * (rect["g1"] - rect["g0"]) * nbytes
        local = src_tile == dst_tile
        self._copies(np.nonzero(local)[0], rect, dst_tile, size, src_obj, src_off, dst_obj, dst_off, cphase)
        far = np.nonzero(~local)[0]
        if len(far):
            tid = self.transfer_count + np.arange(len(far))
            self.transfer_count += len(far)
            self.transfers.add(len(far), transfer_id=tid, phase=xphase, source=src_tile[far],
                               destination=dst_tile[far], size_bytes=size[far], tensor_id=tensor,
                               src_offset=src_off[far], dst_offset=dst_off[far], src_object=src_obj[far],
                               dst_object=dst_obj[far], **{k: v[far] for k, v in rect.items()})
            self.use(src_obj[far], xphase)

    def _copies(self, idx: np.ndarray, rect: dict[str, np.ndarray], tile: np.ndarray, size: np.ndarray,
                src_obj: np.ndarray, src_off: np.ndarray, dst_obj: np.ndarray, dst_off: np.ndarray,
                cphase: int) -> None:
        """One local copy command per selected piece (a piece whose source and destination share a tile)."""
        if not len(idx):
            return
        cmd = self.commands.add(len(idx), phase=cphase, tile=tile[idx], op_id=-1, kernel="copy",
                                rows=rect["r1"][idx] - rect["r0"][idx], cols=rect["c1"][idx] - rect["c0"][idx],
                                inner=0, groups=rect["g1"][idx] - rect["g0"][idx], calls=1, launches=1,
                                est_cycles=copy_cycles(size[idx], self.target), dtype="f16", weight_class="",
                                panels=0, cast_cycles=0)
        self.operands.add(len(idx), command_id=cmd, object_id=src_obj[idx], role="in", offset=src_off[idx])
        self.operands.add(len(idx), command_id=cmd, object_id=dst_obj[idx], role="out", offset=dst_off[idx])
        self.use(src_obj[idx], cphase)


def _offset(layout: Layout, chunk: np.ndarray, pieces: dict[str, np.ndarray], nbytes: int) -> np.ndarray:
    """Byte offset of each piece's first element inside its chunk (row-major ``[g, r, c]``)."""
    _ng, nr, nc = layout.counts
    gi, rest = np.divmod(chunk, nr * nc)
    ri, ci = np.divmod(rest, nc)
    g, r, c = layout.bounds
    rows = r[ri + 1] - r[ri]
    cols = c[ci + 1] - c[ci]
    return (((pieces["g0"] - g[gi]) * rows + (pieces["r0"] - r[ri])) * cols + (pieces["c0"] - c[ci])) * nbytes


def slot_of_cell(layout: Layout, n_cells: int) -> np.ndarray:
    out = np.full(n_cells, -1, dtype=np.int64)
    cells = layout.cells.ravel()
    valid = cells >= 0
    out[cells[valid]] = np.nonzero(valid)[0]
    return out


__all__ = ["Columns", "Program", "slot_of_cell"]
