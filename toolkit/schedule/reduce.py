"""Inner-split reductions in the schedule: the reduce-scatter of the partials, all at once or staged by epoch."""

from __future__ import annotations

import numpy as np

from toolkit.layout.cost import PARTIAL_BYTES, cast_cycles, reduce_cycles
from toolkit.layout.plans import OpPlan
from toolkit.layout.reduction import staged_moves
from toolkit.schedule.program import Program
from toolkit.schedule.program import slot_of_cell as _slot_of_cell


def reduce_scatter(prog: Program, plan: OpPlan, op: dict, cells: np.ndarray, partial_objs: np.ndarray, wave: int,
            block: str) -> tuple[np.ndarray, np.ndarray]:
    """Reduce-scatter inner-split partials: each tile of a (row block, panel) sums one column slice of it.

    A staged plan (``plan.staging`` N, :func:`toolkit.layout.reduction.staged_moves`)
    receives the partials N per epoch in fixed partial groups; every epoch after
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
    _sum(prog, plan, plan.cell_tiles[rcells], cphase, need_objs, out, rows, cols, plan.partials.counts[0], first=True,
         f8_out=prog.tensors[out_tensor]["dtype"] in ("f8_143", "f8_152"))
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
        _sum(prog, plan, plan.cell_tiles[rcells], cphase, buf, out, rows, cols, count, first=e == 0,
             f8_out=prog.tensors[out_tensor]["dtype"] in ("f8_143", "f8_152"))
    return rcells, out


def _sum(prog: Program, plan: OpPlan, tiles: np.ndarray, cphase: int, buf: np.ndarray, out: np.ndarray,
         rows: np.ndarray, cols: np.ndarray, count, *, first: bool, f8_out: bool = False) -> None:
    """One reduction command per reducing slot: the buffer's partials (and the running sum after the first)."""
    inputs = np.asarray(count) + (0 if first else 1)
    cyc = reduce_cycles(rows * cols, inputs, prog.target, prog.params.partials)
    # a result stored as F143 (an FP8 attention product's operand cast early at its projection): the reduction
    # casts the sum it writes (priced on every epoch of a staged reduction)
    cast = cast_cycles(rows * cols, prog.target) if f8_out else np.zeros_like(cyc)
    cmd = prog.commands.add(len(tiles), phase=cphase, tile=tiles, op_id=plan.op_id, kernel="reduce", rows=rows,
                            cols=cols, inner=inputs, groups=1, calls=1, launches=1, est_cycles=cyc + cast,
                            dtype="f16", weight_class="", panels=0, cast_cycles=cast)
    prog.operands.add(len(tiles), command_id=cmd, object_id=buf, role="i", offset=0)
    if not first:
        prog.operands.add(len(tiles), command_id=cmd, object_id=out, role="i", offset=0)
    prog.operands.add(len(tiles), command_id=cmd, object_id=out, role="out", offset=0)
    prog.use(buf, cphase)
    prog.use(out, cphase)


__all__ = ["reduce_scatter"]
