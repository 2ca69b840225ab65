"""The BSP program of a streaming (FlashAttention) attention op: one exchange and compute round per key block.

For every wave of the op's cells (``layout.streaming``: one cell per image,
head and query-row block) and every key block ``j`` in order:

- sync and exchange: the block's K and V rows of the cell's head arrive on the
  cell's tile (multicast to the head's row owners), with Q in the first round;
- compute: one command per cell (kernel ``attention_stream``, the last block
  ``attention_stream_last``) that runs the block's QK product, block softmax,
  PV product and merge (priced by :func:`toolkit.layout.streaming.stream_cycles`);
  it reads Q, K_j, V_j and the FP32 state the previous block wrote, and writes
  the new state (the last block: the normalized FP16 output).

Memory: K_j and V_j live from their exchange to their compute phase only, so a
tile holds one block of each (never the whole K and V, nor a scores matrix).
The block's work space is an object per cell live in its compute phase alone:
the FP16 scores block and exponentials (``rows x key_block``), the FP32
block maxima and sums (``2 x rows``) and the FP16 PV block (``rows x`` head
width padded to the AMP panel). The FP32 state (accumulator, running maximum
and sum: ``rows x (head width + 2)``) lives from the block that writes it to
the next. Objects that hold no tensor slice (work space, state) have no
tensor; the check reads the state by its shape.
"""

from __future__ import annotations

import numpy as np

from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import OpPlan
from toolkit.layout.streaming import KERNEL, LAST_KERNEL, PANEL, key_blocks, need_tensor, stream_cycles
from toolkit.schedule.program import Program, slot_of_cell

STATE_BYTES = 4   # FP32 state: accumulator, running maximum and sum


def state_width(hd: int) -> int:
    """Columns of a row's FP32 state: the head's accumulator, then the running maximum and sum."""
    return hd + 2


def build_streaming(prog: Program, op: dict, plan: OpPlan, layout_of: dict[int, Layout], objs_of: dict,
                    inputs: set[int]) -> np.ndarray:
    """Emit the rounds of one streaming attention op (see the module doc); returns its output objects per
    output slot."""
    n_cells = len(plan.cell_tiles)
    waves = plan.cell_wave if plan.cell_wave is not None else np.zeros(n_cells, dtype=np.int64)
    q, k, v = list(plan.needs)
    sh = plan.cell_shape
    hd, keys = int(sh[0, 1]), int(sh[0, 2])
    kb = np.diff(key_blocks(keys, plan.key_block))
    n_b = len(kb)
    priced = stream_cycles(sh[:, 0], hd, keys, plan.key_block, prog.target)
    tensor = {key: need_tensor(key) for key in (q, k, v)}   # need key -> tensor (fused QKV: one tensor)
    q_need = plan.needs[q]
    q_slot = slot_of_cell(q_need, n_cells)
    q_inplace = q_need.same_as(layout_of[tensor[q]]) and (q_need.replicas == 1 or tensor[q] in inputs)
    q_pieces = None if q_inplace else route(layout_of[tensor[q]], q_need)
    kv = {t: _blocks(plan.needs[t], layout_of[tensor[t]], n_b, n_cells) for t in (k, v)}
    out_slot = slot_of_cell(plan.output, n_cells)
    out_objs = np.full(plan.output.tiles.size, -1, dtype=np.int64)
    block = op["block"]
    for wave in np.unique(waves):
        cells = np.nonzero(waves == wave)[0]
        tiles = plan.cell_tiles[cells]
        rows = sh[cells, 0]
        q_objs = objs_of[tensor[q]][q_slot[cells]] if q_inplace else None
        state = None
        for j in range(n_b):
            moves = [(t, pieces, slot_of[j][cells]) for t, (pieces, piece_block, piece_cell, slot_of) in kv.items()
                     for pieces in [{key: val[(piece_block == j) & (waves[piece_cell] == wave)]
                                     for key, val in pieces.items()}]]
            if j == 0 and not q_inplace:
                sel = waves[q_need.cells.ravel()[q_pieces["dst_chunk"] * q_need.replicas + q_pieces["replica"]]] == wave
                moves.insert(0, (q, {key: val[sel] for key, val in q_pieces.items()}, q_slot[cells]))
            xphase = -1
            if any(np.any(p["src_tile"] != p["dst_tile"]) for _t, p, _s in moves):
                prog.phase("sync", plan, int(wave), block)
                xphase = prog.phase("exchange", plan, int(wave), block)
            cphase = prog.phase("compute", plan, int(wave), block)
            first = xphase if xphase >= 0 else cphase
            got = {}
            for t, pieces, slots in moves:
                cls = "interleaved" if t != q else "standard"   # K and V blocks are the AMP's coefficients
                x = tensor[t]
                name = f"{prog.tensors[x]['name']}@{plan.name}" + ("" if t == q else f".{'kv'[t == v]}{j}")
                objs = prog.new_objects(plan.needs[t], slots, x, "activation", first, cls=cls, name=name)
                prog.move(layout_of[x], objs_of[x], plan.needs[t], slots, objs, x, xphase, cphase, pieces=pieces)
                got[t] = objs
            if j == 0 and not q_inplace:
                q_objs = got[q]
            _workspace(prog, plan, tiles, rows, hd, plan.key_block, cphase, j)
            last = j == n_b - 1
            if last:
                out = prog.new_objects(plan.output, out_slot[cells], op["output"], "activation", cphase)
                out_objs[out_slot[cells]] = out
            else:
                out = _state(prog, plan, tiles, rows, hd, cphase, j)
            cmd = prog.commands.add(len(cells), phase=cphase, tile=tiles, op_id=plan.op_id,
                                    kernel=LAST_KERNEL if last else KERNEL, rows=rows, cols=hd, inner=int(kb[j]),
                                    groups=1, dtype="f16", weight_class="interleaved",
                                    panels=priced["launches"][j, cells], calls=priced["calls"][j, cells],
                                    launches=priced["launches"][j, cells], cast_cycles=0,
                                    est_cycles=priced["cycles"][j, cells])
            reads = [q_objs, got[k], got[v]] + ([state] if state is not None else [])
            for objs in reads:
                prog.operands.add(len(cells), command_id=cmd, object_id=objs, role="i", offset=0)
                prog.use(objs, cphase)
            prog.operands.add(len(cells), command_id=cmd, object_id=out, role="out", offset=0)
            prog.use(out, cphase)
            state = out
    return out_objs


def _blocks(need: Layout, src: Layout, n_b: int, n_cells: int) -> tuple[dict, np.ndarray, np.ndarray, list]:
    """The route of a K or V need cut into key blocks: its pieces, each piece's key block and cell, and per
    block the need slot of every cell (-1: none)."""
    pieces = route(src, need)
    _ng, n_r, n_c = need.counts
    slot = pieces["dst_chunk"] * need.replicas + pieces["replica"]
    cells = need.cells.ravel()
    chunk_block = (np.arange(need.tiles.size) // need.replicas // n_c % n_r) % n_b
    slot_of = []
    for j in range(n_b):
        out = np.full(n_cells, -1, dtype=np.int64)
        sel = (chunk_block == j) & (cells >= 0)
        out[cells[sel]] = np.nonzero(sel)[0]
        slot_of.append(out)
    return pieces, chunk_block[slot], cells[slot], slot_of


def _scratch(prog: Program, tiles: np.ndarray, size: np.ndarray, name: str, phase: int, cls: str = "standard",
             rect: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """One object per cell that holds no tensor slice, first written in ``phase`` (``rect``: the rows and
    columns it holds, the shape the check reads it by)."""
    n = len(tiles)
    zero = np.zeros(n, dtype=np.int64)
    r, c = rect if rect is not None else (zero, zero)
    objs = prog.objects.add(n, tile=tiles, kind="activation", name=name, tensor_id=-1, size_bytes=size,
                            align=16 if cls == "interleaved" else 8, first=phase, access="data", cls=cls,
                            repeat_count=1, alias_of=-1, g0=zero, g1=zero + (rect is not None), r0=zero, r1=r,
                            c0=zero, c1=c)
    prog.use(objs, phase)
    return objs


def _workspace(prog: Program, plan: OpPlan, tiles: np.ndarray, rows: np.ndarray, hd: int, key_block: int,
               cphase: int, j: int) -> None:
    """The block's work space, live in its compute phase only: FP16 scores and exponentials, FP32 block maxima
    and sums, the FP16 PV block."""
    padded_keys = -(-key_block // PANEL) * PANEL
    padded_hd = -(-hd // PANEL) * PANEL
    _scratch(prog, tiles, rows * padded_keys * 2, f"{plan.name}.scores.block{j}", cphase)
    _scratch(prog, tiles, rows * padded_keys * 2, f"{plan.name}.exponentials.block{j}", cphase)
    _scratch(prog, tiles, 2 * rows * STATE_BYTES, f"{plan.name}.statistics.block{j}", cphase)
    _scratch(prog, tiles, rows * padded_hd * 2, f"{plan.name}.pv.block{j}", cphase)


def _state(prog: Program, plan: OpPlan, tiles: np.ndarray, rows: np.ndarray, hd: int, cphase: int,
           j: int) -> np.ndarray:
    """The FP32 state after block ``j`` (``rows x (hd + 2)``: accumulator, running maximum and sum)."""
    w = state_width(hd)
    return _scratch(prog, tiles, rows * w * STATE_BYTES, f"{plan.name}.state.block{j}", cphase,
                    rect=(rows, np.full(len(tiles), w)))
