"""Build the BSP program of a graph from its op plans, in bulk per op and wave.

For every op (in order) and every wave of its cells: when an operand need is
not already where the kernel reads it, a sync and an exchange phase move the
pieces (``route``) into a contiguous panel object per cell (multicast when
several tiles need the same piece; local pieces become copy commands); then a
compute phase runs one command per cell. Inner-split linears add a partials
exchange and a reduce phase. Objects are created for every operand slot with
their lifetimes (first/last event = phase index) computed from their uses.
Repeated blocks are scheduled once: their phases carry the block name, their
weights ``repeat_count = instances`` and carried values alias the block input.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl

from toolkit.layout.cost import (
    DTYPE_BYTES,
    PARTIAL_BYTES,
    amp_cycles,
    cast_cycles,
    copy_cycles,
    reduce_cycles,
    vector_cycles,
)
from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import LayoutParams, OpPlan
from toolkit.layout.reduction import staged_moves
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
        src_obj = src_objs[pieces["src_chunk"]]
        b = dtype_bytes or DTYPE_BYTES[self.tensors[tensor]["dtype"]]
        size = (pieces["g1"] - pieces["g0"]) * (pieces["r1"] - pieces["r0"]) * (pieces["c1"] - pieces["c0"]) * b
        src_off = _offset(src, pieces["src_chunk"], pieces, b)
        dst_off = _offset(need, pieces["dst_chunk"], pieces, b)
        local = pieces["src_tile"] == pieces["dst_tile"]
        if local.any():
            idx = np.nonzero(local)[0]
            rows, cols = pieces["r1"][idx] - pieces["r0"][idx], pieces["c1"][idx] - pieces["c0"][idx]
            cmd = self.commands.add(len(idx), phase=cphase, tile=pieces["dst_tile"][idx], op_id=-1, kernel="copy",
                                    rows=rows, cols=cols, inner=0, groups=pieces["g1"][idx] - pieces["g0"][idx],
                                    calls=1, launches=1, est_cycles=copy_cycles(size[idx], self.target),
                                    dtype="f16", weight_class="", panels=0, cast_cycles=0)
            self.operands.add(len(idx), command_id=cmd, object_id=src_obj[idx], role="in", offset=src_off[idx])
            self.operands.add(len(idx), command_id=cmd, object_id=dst_obj[idx], role="out", offset=dst_off[idx])
            self.use(src_obj[idx], cphase)
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
        rows, cols, groups = rect["r1"] - rect["r0"], rect["c1"] - rect["c0"], rect["g1"] - rect["g0"]
        size = rows * cols * groups * nbytes
        local = src_tile == dst_tile
        idx = np.nonzero(local)[0]
        if len(idx):
            cmd = self.commands.add(len(idx), phase=cphase, tile=dst_tile[idx], op_id=-1, kernel="copy",
                                    rows=rows[idx], cols=cols[idx], inner=0, groups=groups[idx], calls=1, launches=1,
                                    est_cycles=copy_cycles(size[idx], self.target), dtype="f16", weight_class="",
                                    panels=0, cast_cycles=0)
            self.operands.add(len(idx), command_id=cmd, object_id=src_obj[idx], role="in", offset=src_off[idx])
            self.operands.add(len(idx), command_id=cmd, object_id=dst_obj[idx], role="out", offset=dst_off[idx])
            self.use(src_obj[idx], cphase)
        far = np.nonzero(~local)[0]
        if len(far):
            tid = self.transfer_count + np.arange(len(far))
            self.transfer_count += len(far)
            self.transfers.add(len(far), transfer_id=tid, phase=xphase, source=src_tile[far],
                               destination=dst_tile[far], size_bytes=size[far], tensor_id=tensor,
                               src_offset=src_off[far], dst_offset=dst_off[far], src_object=src_obj[far],
                               dst_object=dst_obj[far], **{k: v[far] for k, v in rect.items()})
            self.use(src_obj[far], xphase)


def _offset(layout: Layout, chunk: np.ndarray, pieces: dict[str, np.ndarray], nbytes: int) -> np.ndarray:
    """Byte offset of each piece's first element inside its chunk (row-major ``[g, r, c]``)."""
    _ng, nr, nc = layout.counts
    gi, rest = np.divmod(chunk, nr * nc)
    ri, ci = np.divmod(rest, nc)
    g, r, c = layout.bounds
    rows = r[ri + 1] - r[ri]
    cols = c[ci + 1] - c[ci]
    return (((pieces["g0"] - g[gi]) * rows + (pieces["r0"] - r[ri])) * cols + (pieces["c0"] - c[ci])) * nbytes


def cell_cycles(plan: OpPlan, target: Target, params: LayoutParams, cells: np.ndarray) -> dict[str, np.ndarray]:
    """Cycles, calls, worker launches, coefficient panels and cast cycles of the given cells of one op.

    Every cell runs ``groups`` invocations; AMP cells are priced by
    :func:`toolkit.layout.cost.amp_cycles` (FP8 cells include the cast of
    their FP16 left panel), elementwise cells by their kernel's rule on
    ``rows x groups`` rows of ``cols``.
    """
    sh = plan.cell_shape[cells]
    rows, cols, inner, groups = sh[:, 0], sh[:, 1], sh[:, 2], sh[:, 3]
    if plan.kernel.startswith("amp"):
        wc = params.weight_class if plan.rule == "linear" or plan.coefficient is not None else "standard"
        cyc, calls, launches, cast = amp_cycles(
            rows, cols, inner, target, weight_class=wc, dtype=plan.precision,
            partials=params.partials if plan.partials is not None else "f16", inner_block=params.inner_block,
            cast=plan.cast_input)
        return {"est_cycles": cyc * groups, "calls": calls * groups, "launches": launches * groups,
                "panels": launches * groups, "cast_cycles": cast * groups, "weight_class": wc}
    one = np.ones(len(cells), dtype=np.int64)
    zero = np.zeros(len(cells), dtype=np.int64)
    cast = cast_cycles(rows * groups * cols, target) if plan.out_cast else zero
    return {"est_cycles": vector_cycles(plan.kernel, rows * groups, cols, target, out_cast=plan.out_cast),
            "calls": one, "launches": one, "panels": zero, "cast_cycles": cast, "weight_class": ""}


def _slot_of_cell(layout: Layout, n_cells: int) -> np.ndarray:
    out = np.full(n_cells, -1, dtype=np.int64)
    cells = layout.cells.ravel()
    valid = cells >= 0
    out[cells[valid]] = np.nonzero(valid)[0]
    return out


def build_program(ops: list[dict], plans: list[OpPlan], tensors: dict[int, dict], repeats: dict[str, int],
                  target: Target, params: LayoutParams) -> Program:
    """Emit phases, commands, operands, transfers, objects and uses for every op and wave."""
    prog = Program(target, params, tensors, {}, repeats)
    layout_of: dict[int, Layout] = {}
    objs_of: dict[int, np.ndarray] = {}
    for op, plan in zip(ops, plans, strict=True):
        n_cells = len(plan.cell_tiles)
        waves = plan.cell_wave if plan.cell_wave is not None else np.zeros(n_cells, dtype=np.int64)
        w_objs = _weights(prog, op, plan)
        for t in plan.weights.keys() & plan.needs.keys():   # gathered weights: routed from where they are stored
            layout_of[t], objs_of[t] = plan.weights[t], w_objs[t]
        for t, need in plan.needs.items():  # graph inputs appear on their need's layout at event 0
            tensor = t if t >= 0 else -t - 1
            if tensor not in layout_of:
                layout_of[tensor] = need
                slots = np.nonzero(need.tiles.ravel() >= 0)[0]
                objs_of[tensor] = prog.new_objects(need, slots, tensor, "activation", 0)
        routes = _routes(plan, layout_of, waves)
        out_slot = _slot_of_cell(plan.output, n_cells)
        out_objs = np.full(plan.output.tiles.size, -1, dtype=np.int64)
        for wave in np.unique(waves):
            cells = np.nonzero(waves == wave)[0]
            out_cells, new_out = _wave(prog, op, plan, int(wave), cells, routes, layout_of, objs_of, w_objs)
            out_objs[out_slot[out_cells]] = new_out
        layout_of[op["output"]] = plan.output
        objs_of[op["output"]] = out_objs
    prog.final_phase = prog.phases.count - 1
    for t, objs in objs_of.items():
        if tensors[t]["role"] == "output":
            prog.use(objs[objs >= 0], prog.final_phase)
    return prog


def _weights(prog: Program, op: dict, plan: OpPlan) -> dict[int, np.ndarray]:
    """Resident weight objects of one op (repeat instances stored as one iterated object)."""
    out = {}
    for t, lay in plan.weights.items():
        w = prog.tensors[t]
        amp_reads = plan.kernel.startswith("amp") and len(w["shape"]) == 2 and t not in plan.needs
        cls = prog.params.weight_class if amp_reads else "standard"   # gathered weights: the AMP reads the copy
        rep = prog.instances.get(op["block"], 1) if w["per_instance"] else 1
        out[t] = prog.new_objects(lay, np.arange(lay.tiles.size), t, "weight", 0, cls=cls, repeat=rep)
    return out


def _routes(plan: OpPlan, layout_of: dict[int, Layout], waves: np.ndarray) -> dict:
    """One route per operand need that is not read in place, with the wave of every piece."""
    routes = {}
    for t, need in plan.needs.items():
        tensor = t if t >= 0 else -t - 1
        if need.same_as(layout_of[tensor]) and need.replicas == 1:
            continue
        pieces = route(layout_of[tensor], need)
        wave_of_slot = np.full(need.tiles.size, -1, dtype=np.int64)
        valid = need.cells.ravel() >= 0
        wave_of_slot[valid] = waves[need.cells.ravel()[valid]]
        routes[t] = (pieces, wave_of_slot[pieces["dst_chunk"] * need.replicas + pieces["replica"]])
    return routes


def _wave(prog: Program, op: dict, plan: OpPlan, wave: int, cells: np.ndarray, routes: dict,
          layout_of: dict, objs_of: dict, w_objs: dict) -> tuple[np.ndarray, np.ndarray]:
    """One wave of one op: [sync, exchange,] compute (and a reduce for inner splits)."""
    tensors, block, n_cells = prog.tensors, op["block"], len(plan.cell_tiles)
    operand_objs: dict[str, np.ndarray] = {}
    pending = []
    for i, (t, need) in enumerate(plan.needs.items()):
        tensor = t if t >= 0 else -t - 1
        slot = _slot_of_cell(need, n_cells)[cells]
        role = f"w{tensor}" if t in plan.weights else f"in{i}"   # a gathered weight is read as the weight operand
        if t not in routes:
            operand_objs[role] = objs_of[tensor][slot]
        else:
            pieces, piece_wave = routes[t]
            sel = piece_wave == wave
            pending.append((role, tensor, need, slot, {k: v[sel] for k, v in pieces.items()}, t))
    xphase = -1
    if any(np.any(p["src_tile"] != p["dst_tile"]) for *_, p, _key in pending):
        prog.phase("sync", plan, wave, block)
        xphase = prog.phase("exchange", plan, wave, block)
    cphase = prog.phase("compute", plan, wave, block)
    for role, tensor, need, slot, pieces, key in pending:
        first = xphase if xphase >= 0 else cphase
        cls = prog.params.weight_class if key == plan.coefficient else "standard"   # AMP coefficients: ld128 loads
        objs = prog.new_objects(need, slot, tensor, "activation", first, cls=cls,
                                name=f"{tensors[tensor]['name']}@{plan.name}")
        prog.move(layout_of[tensor], objs_of[tensor], need, slot, objs, tensor, xphase, cphase, pieces=pieces)
        operand_objs[role] = objs
    for t, slots in plan.weight_slots.items():
        s = slots[cells]
        operand_objs[f"w{t}"] = np.where(s >= 0, w_objs[t][np.maximum(s, 0)], -1)
    out_tensor = op["output"]
    if plan.partials is not None:
        pslot = _slot_of_cell(plan.partials, n_cells)[cells]
        new_out = prog.new_objects(plan.partials, pslot, out_tensor, "activation", cphase,
                                   dtype_bytes=PARTIAL_BYTES[prog.params.partials],
                                   name=f"{tensors[out_tensor]['name']}.partials")
    elif op["kind"] == "add":  # residual add writes in place into the stream value (its first input)
        new_out = operand_objs["in0"]
    else:
        new_out = prog.new_objects(plan.output, _slot_of_cell(plan.output, n_cells)[cells], out_tensor,
                                   "activation", cphase)
    priced = cell_cycles(plan, prog.target, prog.params, cells)
    sh = plan.cell_shape[cells]
    cmd = prog.commands.add(len(cells), phase=cphase, tile=plan.cell_tiles[cells], op_id=plan.op_id,
                            kernel=plan.kernel, rows=sh[:, 0], cols=sh[:, 1], inner=sh[:, 2], groups=sh[:, 3],
                            dtype=plan.precision, **priced)
    for role, objs in operand_objs.items():
        ok = objs >= 0
        prog.operands.add(int(ok.sum()), command_id=cmd[ok], object_id=objs[ok], role=role[:1], offset=0)
        prog.use(objs[ok], cphase)
    prog.operands.add(len(cells), command_id=cmd, object_id=new_out, role="out", offset=0)
    prog.use(new_out, cphase)
    if plan.partials is not None:
        return _reduce(prog, plan, op, cells, new_out, wave, block)
    return cells, new_out


def _reduce(prog: Program, plan: OpPlan, op: dict, cells: np.ndarray, partial_objs: np.ndarray, wave: int,
            block: str) -> tuple[np.ndarray, np.ndarray]:
    """Reduce-scatter inner-split partials: each tile of a (row block, panel) sums one column slice of it.

    A staged plan (``plan.staging`` N, :func:`toolkit.layout.reduction.staged_moves`)
    receives the partials N per epoch in a rotated order; every epoch after
    the first adds its partials to the sum the earlier ones left in the output
    (one more FP16 input to the reduction).
    """
    out_tensor = op["output"]
    part_layout = plan.partials
    part_objs = np.full(part_layout.tiles.size, -1, dtype=np.int64)
    part_objs[_slot_of_cell(part_layout, len(plan.cell_tiles))[cells]] = partial_objs
    if plan.staging:
        return _staged(prog, plan, out_tensor, part_objs, wave, block)
    red = plan.reduce_need
    red_slot = _slot_of_cell(red, len(plan.cell_tiles))[cells]
    keep = red_slot >= 0
    rcells, rslot = cells[keep], red_slot[keep]
    prog.phase("sync", plan, wave, block)
    xphase = prog.phase("exchange", plan, wave, block)
    cphase = prog.phase("compute", plan, wave, block)
    pbytes = PARTIAL_BYTES[prog.params.partials]
    need_objs = prog.new_objects(red, rslot, out_tensor, "activation", xphase, dtype_bytes=pbytes,
                                 name=f"{prog.tensors[out_tensor]['name']}.reduce")
    prog.move(part_layout, part_objs, red, rslot, need_objs, out_tensor, xphase, cphase, dtype_bytes=pbytes)
    out_slot = _slot_of_cell(plan.output, len(plan.cell_tiles))[rcells]
    out = prog.new_objects(plan.output, out_slot, out_tensor, "activation", cphase)
    ch = red.chunks()   # each reducing cell sums one column slice of its panel
    rows, cols = (ch["r1"] - ch["r0"])[rslot], (ch["c1"] - ch["c0"])[rslot]
    _sum(prog, plan, plan.cell_tiles[rcells], cphase, need_objs, out, rows, cols, plan.partials.counts[0], first=True)
    return rcells, out


def _staged(prog: Program, plan: OpPlan, out_tensor: int, part_objs: np.ndarray, wave: int,
            block: str) -> tuple[np.ndarray, np.ndarray]:
    """The epochs of a staged reduction: per epoch a buffer per reducing slot filled at explicit positions."""
    pbytes = PARTIAL_BYTES[prog.params.partials]
    red = plan.reduce_need
    cells_of_slot = red.cells.ravel()
    out = rcells = None
    name = f"{prog.tensors[out_tensor]['name']}.reduce"
    for e, mv in enumerate(staged_moves(plan)):
        prog.phase("sync", plan, wave, block)
        xphase = prog.phase("exchange", plan, wave, block)
        cphase = prog.phase("compute", plan, wave, block)
        slots, first = np.unique(mv["slot"], return_index=True)
        rcells = cells_of_slot[slots]
        rows, cols = (mv["r1"] - mv["r0"])[first], (mv["c1"] - mv["c0"])[first]
        count = mv["count"][first]
        buf = prog.objects.add(
            len(slots), tile=mv["dst_tile"][first], kind="activation", name=name, tensor_id=out_tensor,
            size_bytes=count * rows * cols * pbytes, align=8, first=xphase, access="data", cls="standard",
            repeat_count=1, alias_of=-1, g0=0, g1=count, r0=mv["r0"][first], r1=mv["r1"][first],
            c0=mv["c0"][first], c1=mv["c1"][first])
        buf_of = np.searchsorted(slots, mv["slot"])
        piece = (mv["r1"] - mv["r0"]) * (mv["c1"] - mv["c0"])
        src_off = ((mv["r0"] - mv["cr0"]) * mv["cell_cols"] + (mv["c0"] - mv["cc0"])) * pbytes
        rect = {"g0": mv["g"], "g1": mv["g"] + 1, "r0": mv["r0"], "r1": mv["r1"], "c0": mv["c0"], "c1": mv["c1"]}
        prog.send(part_objs[mv["src_chunk"]], src_off, buf[buf_of], mv["pos"] * piece * pbytes, rect,
                  mv["src_tile"], mv["dst_tile"], pbytes, out_tensor, xphase, cphase)
        if out is None:
            out_slot = _slot_of_cell(plan.output, len(plan.cell_tiles))[rcells]
            out = prog.new_objects(plan.output, out_slot, out_tensor, "activation", cphase)
        _sum(prog, plan, plan.cell_tiles[rcells], cphase, buf, out, rows, cols, count, first=e == 0)
    return rcells, out


def _sum(prog: Program, plan: OpPlan, tiles: np.ndarray, cphase: int, buf: np.ndarray, out: np.ndarray,
         rows: np.ndarray, cols: np.ndarray, count, *, first: bool) -> None:
    """One reduction command per reducing slot: the buffer's partials (and the running sum after the first)."""
    inputs = np.asarray(count) + (0 if first else 1)
    cyc = reduce_cycles(rows * cols, inputs, prog.target, prog.params.partials)
    cmd = prog.commands.add(len(tiles), phase=cphase, tile=tiles, op_id=plan.op_id, kernel="reduce", rows=rows,
                            cols=cols, inner=inputs, groups=1, calls=1, launches=1, est_cycles=cyc, dtype="f16",
                            weight_class="", panels=0, cast_cycles=0)
    prog.operands.add(len(tiles), command_id=cmd, object_id=buf, role="i", offset=0)
    if not first:
        prog.operands.add(len(tiles), command_id=cmd, object_id=out, role="i", offset=0)
    prog.operands.add(len(tiles), command_id=cmd, object_id=out, role="out", offset=0)
    prog.use(buf, cphase)
    prog.use(out, cphase)
