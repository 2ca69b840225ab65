"""Build the BSP program of a graph from its op plans, in bulk per op and wave.

For every op (in order) and every wave of its cells: when an operand need is
not already where the kernel reads it, a sync and an exchange phase move the
pieces (``route``) into a contiguous panel object per cell (multicast when
several tiles need the same piece; local pieces become copy commands); then a
compute phase runs one command per cell. Inner-split linears add a partials
exchange and a reduce phase. Objects are created for every operand slot with
their lifetimes (first/last event = phase index) computed from their uses.
Repeated blocks are scheduled once: their phases carry the block name, their
weights ``repeat_count = instances`` and carried values alias the block input
(or, where the block's output is not written into the input's objects, the
block ends by moving it there). Graph inputs exist from event 0 on the layout
their plan gives them (``OpPlan.inputs``): the residual stream's, or for a
``host_layout`` input its first consumer's need, read in place.
"""

from __future__ import annotations

import numpy as np

from toolkit.layout.cost import (
    DTYPE_BYTES,
    PARTIAL_BYTES,
    amp_cycles,
    cast_cycles,
    kernel_casts,
    materialized,
    merge_cycles,
    merge_pieces,
    prep_pieces,
    rearrange_cycles,
    rearrange_pieces,
    unpack_cycles,
    vector_cycles,
    weight_read_class,
)
from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import LayoutParams, OpPlan
from toolkit.layout.preparation import unpack_chunks
from toolkit.schedule.program import PREAMBLE, Program
from toolkit.schedule.program import slot_of_cell as _slot_of_cell
from toolkit.schedule.reduce import reduce_scatter
from toolkit.target import Target


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
        wc = weight_read_class(plan, plan.weight_class or params.weight_class)
        k_rows, k_cols = (cols, rows) if plan.swapped else (rows, cols)   # swapped: the transposed product
        cyc, calls, launches, cast = amp_cycles(
            k_rows, k_cols, inner, target, weight_class=wc, dtype=plan.precision,
            partials=params.partials if plan.partials is not None else "f16", inner_block=params.inner_block,
            **kernel_casts(plan), out_cast=plan.out_cast)
        return {"est_cycles": cyc * groups, "calls": calls * groups, "launches": launches * groups,
                "panels": launches * groups, "cast_cycles": cast * groups, "weight_class": wc}
    one = np.ones(len(cells), dtype=np.int64)
    zero = np.zeros(len(cells), dtype=np.int64)
    cast = cast_cycles(rows * groups * cols, target) if plan.out_cast else zero
    return {"est_cycles": vector_cycles(plan.kernel, rows * groups, cols, target, out_cast=plan.out_cast),
            "calls": one, "launches": one, "panels": zero, "cast_cycles": cast, "weight_class": ""}


def build_program(ops: list[dict], plans: list[OpPlan], tensors: dict[int, dict], repeats: dict[str, int],
                  target: Target, params: LayoutParams, carried: dict[int, tuple[int, int]] | None = None) -> Program:
    """Emit phases, commands, operands, transfers, objects and uses for every op and wave.

    ``carried``: per repeated block, its last op id -> (carried input, carried output) tensors. Where the block's
    output is not already stored in its input's objects (a residual add writes in place; a block without one
    does not), the block ends by moving the output into the input's objects, so the next instance reads it there.
    """
    prog = Program(target, params, tensors, {}, repeats)
    layout_of: dict[int, Layout] = {}
    objs_of: dict[int, np.ndarray] = {}
    inputs: set[int] = set()
    unpacks: list[tuple[OpPlan, np.ndarray]] = []   # swapped results whose unpack waits for the next one
    early = _materialize_early(prog, ops, plans)
    for op, plan in zip(ops, plans, strict=True):
        n_cells = len(plan.cell_tiles)
        waves = plan.cell_wave if plan.cell_wave is not None else np.zeros(n_cells, dtype=np.int64)
        w_objs = early.get(op["op_id"]) or _materialize_body(prog, op, plan, _weights(prog, op, plan))
        for t in plan.weights.keys() & plan.needs.keys():   # gathered weights: routed from where they are stored
            layout_of[t], objs_of[t] = plan.weights[t], w_objs[t]
        for tensor, lay in plan.inputs.items():   # graph inputs appear on their planned layout at event 0 (the
            if tensor not in layout_of:           # stream's, or a host_layout input's consumer need)
                layout_of[tensor] = lay
                slots = np.nonzero(lay.tiles.ravel() >= 0)[0]
                objs_of[tensor] = prog.new_objects(lay, slots, tensor, "activation", 0)
        inputs.update(plan.inputs)
        src_of = {plan.coefficient: _prepare(prog, op, plan, layout_of, objs_of)} if plan.prep is not None else {}
        routes = _routes(plan, layout_of, waves, inputs, src_of)
        out_slot = _slot_of_cell(plan.output, n_cells)
        out_objs = np.full(plan.output.tiles.size, -1, dtype=np.int64)
        for wave in np.unique(waves):
            cells = np.nonzero(waves == wave)[0]
            out_cells, new_out = _wave(prog, op, plan, int(wave), cells, routes, layout_of, objs_of, w_objs, src_of)
            out_objs[out_slot[out_cells]] = new_out
        layout_of[op["output"]] = plan.output
        objs_of[op["output"]] = out_objs
        if plan.unpack is not None:   # swapped Q / K results: unpacked for the scores (grouped: two in one phase)
            unpacks.append((plan, out_objs))
            if not plan.unpack_later:
                _unpack(prog, unpacks, prog.phases.count - 1)
                unpacks = []
        if carried and op["op_id"] in carried:
            _carry(prog, op, plan, *carried[op["op_id"]], layout_of, objs_of)
    prog.final_phase = prog.phases.count - 1
    for t, objs in objs_of.items():
        if tensors[t]["role"] == "output":
            prog.use(objs[objs >= 0], prog.final_phase)
    return prog


def _unpack(prog: Program, unpacks: list[tuple[OpPlan, np.ndarray]], cphase: int) -> None:
    """One unpack command per result chunk of every listed swapped projection, in compute phase ``cphase``: its
    columns inside the plan's unpack span, rewritten in place from the AMP's transposed-left order to row-major
    rows (values unchanged: the check reads them as they are)."""
    for plan, objs in unpacks:
        keep, rows, cols = unpack_chunks(plan)
        ok = objs[keep] >= 0
        keep, rows, cols = keep[ok], rows[ok], cols[ok]
        if not len(keep):
            continue
        _in_place(prog, plan, cphase, "unpack", plan.output.tiles.ravel()[keep], objs[keep], rows, cols,
                  unpack_cycles(rows, cols, prog.target))


def _in_place(prog: Program, plan: OpPlan, cphase: int, kernel: str, tiles: np.ndarray, objs: np.ndarray,
              rows: np.ndarray, cols: np.ndarray, est_cycles: np.ndarray) -> None:
    """One in-place command per object (``costs.IN_PLACE_KERNELS``: it reads and rewrites the object, values
    unchanged for the check) in compute phase ``cphase``."""
    n = len(objs)
    cmd = prog.commands.add(n, phase=cphase, tile=tiles, op_id=plan.op_id, kernel=kernel, rows=rows, cols=cols,
                            inner=0, groups=1, dtype="f16", weight_class="", panels=0, calls=1, launches=1,
                            cast_cycles=0, est_cycles=est_cycles)
    prog.operands.add(n, command_id=cmd, object_id=objs, role="i", offset=0)
    prog.operands.add(n, command_id=cmd, object_id=objs, role="out", offset=0)
    prog.use(objs, cphase)


def _carry(prog: Program, op: dict, plan: OpPlan, t_in: int, t_out: int, layout_of: dict, objs_of: dict) -> None:
    """End a repeated block by moving its output into its input's objects (sync, exchange, local copies)."""
    src, dst = layout_of[t_out], layout_of[t_in]
    if src.same_as(dst) and np.array_equal(objs_of[t_out], objs_of[t_in]):
        return   # written in place (the residual add)
    pieces = route(src, dst)
    xphase = -1
    if np.any(pieces["src_tile"] != pieces["dst_tile"]):
        prog.phase("sync", plan, 0, op["block"])
        xphase = prog.phase("exchange", plan, 0, op["block"])
    cphase = prog.phase("compute", plan, 0, op["block"])   # local pieces copy here
    slots = np.arange(dst.tiles.size)
    prog.move(src, objs_of[t_out], dst, slots, objs_of[t_in], t_out, xphase, cphase, pieces=pieces)
    prog.use(objs_of[t_in][objs_of[t_in] >= 0], cphase)


def _amp_weight(prog: Program, plan: OpPlan, t: int) -> bool:
    """Whether the AMP reads weight ``t`` of ``plan`` where it is stored (not gathered, not the swapped product's
    streamed left operand)."""
    return (plan.kernel.startswith("amp") and len(prog.tensors[t]["shape"]) == 2 and t not in plan.needs
            and not plan.swapped)


def _materialized(prog: Program, op: dict, plan: OpPlan) -> list[int]:
    """The weights of one op stored in standard memory that ipu-stack materializes into interleaved compute
    storage before the AMP reads them (:func:`toolkit.layout.cost.materialized`)."""
    stored = plan.weight_class or prog.params.weight_class
    return [t for t in plan.weights if _amp_weight(prog, plan, t) and materialized(plan, stored)]


def _materialize(prog: Program, plan: OpPlan, t: int, stored: np.ndarray, phase: int, repeat: int = 1) -> np.ndarray:
    """Interleaved compute copies of weight ``t``'s stored objects, made by local copies in ``phase``."""
    lay = plan.weights[t]
    slots = np.arange(lay.tiles.size)
    compute = prog.new_objects(lay, slots, t, "weight", phase, cls="interleaved", repeat=repeat,
                               name=f"{prog.tensors[t]['name']}.interleaved")
    ch = lay.chunks()   # every slot (replicas too) copies its own shard on its own tile
    rect = {k: ch[k][slots] for k in ("g0", "g1", "r0", "r1", "c0", "c1")}
    zero = np.zeros(len(slots), dtype=np.int64)
    prog.send(stored, zero, compute, zero, rect, ch["tile"][slots], ch["tile"][slots],
              DTYPE_BYTES[prog.tensors[t]["dtype"]], t, -1, phase)
    return compute


def _materialize_early(prog: Program, ops: list[dict], plans: list[OpPlan]) -> dict[int, dict[int, np.ndarray]]:
    """Weights stored standard and materialized interleaved (:func:`_materialized`): the compute copies are made
    in one compute phase at the program's start, a paced local copy of every tile's shard (HARDWARE.md section 3:
    the standard-to-interleaved copy, 8 KiB in 1,308 cycles, the copy rule's 288 + bytes / 8), in the program's
    preamble (block :data:`PREAMBLE`: before the initial sync). ipu-stack's weights are inputs written before
    the program runs, and the hardware shows the conversion outside the renderer's interval: the down weights'
    standard input, materialized interleaved (MLP_LAYOUT_ALTERNATIVES.md), ran 1,566 cycles *faster* than
    interleaved input with the same GEMM work, almost all of it the GELU-to-down exchange
    (MLP_LAYOUT_SWEEP.md), and its programs' full counters run about 6,800 cycles ahead of the cropped ones.
    Where some tile has no shard to copy, the crop (the latest tile's first sample) starts after it. A repeated
    block's weights are not program-start values: each iteration materializes its own (:func:`_materialize_body`).
    Returns, per op with such a weight, all its weight objects (the AMP reads the compute copies)."""
    out: dict[int, dict[int, np.ndarray]] = {}
    lead = -1
    for op, plan in zip(ops, plans, strict=True):
        moved = [t for t in _materialized(prog, op, plan) if not prog.tensors[t]["per_instance"]]
        if not moved:
            continue
        if lead < 0:
            lead = prog.phase("compute", plan, 0, PREAMBLE)
        objs = _weights(prog, op, plan)
        for t in moved:
            objs[t] = _materialize(prog, plan, t, objs[t], lead)
        out[op["op_id"]] = objs
    return out


def _materialize_body(prog: Program, op: dict, plan: OpPlan, objs: dict[int, np.ndarray]) -> dict:
    """A repeated block's standard-stored weights materialized for the current iteration, in a compute phase of
    their own before the op (ipu-stack's body-local conversions, PARAMETER_STORAGE_2026_09_10.md: "existing mid
    conversions ... materialize the current iteration's operands"); one iteration's compute copy."""
    moved = [t for t in _materialized(prog, op, plan) if prog.tensors[t]["per_instance"]]
    if moved:
        phase = prog.phase("compute", plan, 0, op["block"])
        objs = {**objs, **{t: _materialize(prog, plan, t, objs[t], phase) for t in moved}}
    return objs


def _weights(prog: Program, op: dict, plan: OpPlan) -> dict[int, np.ndarray]:
    """Resident weight objects of one op (repeat instances stored as one iterated object), in the class they are
    stored in: the plan's or the layout's where the AMP reads them (a materialized weight's stored copy is
    standard), else standard (gathered weights: the AMP reads the copy; swapped: the weights are the streamed
    left operand)."""
    out = {}
    stored = plan.weight_class or prog.params.weight_class
    for t, lay in plan.weights.items():
        w = prog.tensors[t]
        amp = _amp_weight(prog, plan, t)
        cls = weight_read_class(plan, stored) if amp and not materialized(plan, stored) else "standard"
        rep = prog.instances.get(op["block"], 1) if w["per_instance"] else 1
        out[t] = prog.new_objects(lay, np.arange(lay.tiles.size), t, "weight", 0, cls=cls, repeat=rep)
    return out


def _prepare(prog: Program, op: dict, plan: OpPlan, layout_of: dict, objs_of: dict) -> tuple[Layout, np.ndarray]:
    """Move an attention product's coefficient operand onto its preparation panels (``plan.prep``) and rearrange
    it there (``plan.prep_kernel``): sync, exchange, compute. Returns the panels' layout and objects (one per
    slot, -1 where none), the source the product's cells then copy their blocks from."""
    t = plan.coefficient
    tensor = t if t >= 0 else -t - 1
    lay = plan.prep
    pieces = route(layout_of[tensor], lay)
    xphase = -1
    if np.any(pieces["src_tile"] != pieces["dst_tile"]):
        prog.phase("sync", plan, 0, op["block"])
        xphase = prog.phase("exchange", plan, 0, op["block"])
    cphase = prog.phase("compute", plan, 0, op["block"])
    slots = np.nonzero(lay.tiles.ravel() >= 0)[0]
    objs = np.full(lay.tiles.size, -1, dtype=np.int64)
    objs[slots] = prog.new_objects(lay, slots, tensor, "activation", xphase if xphase >= 0 else cphase,
                                   name=f"{prog.tensors[tensor]['name']}@{plan.name}.panels")
    prog.move(layout_of[tensor], objs_of[tensor], lay, slots, objs[slots], tensor, xphase, cphase, pieces=pieces)
    if plan.prep_kernel:
        tiles, rows, cols = prep_pieces(plan)
        _in_place(prog, plan, cphase, plan.prep_kernel, tiles, objs[slots], rows, cols,
                  rearrange_cycles(plan.prep_kernel, rows, cols, prog.target))
    return lay, objs


def _routes(plan: OpPlan, layout_of: dict[int, Layout], waves: np.ndarray, inputs: set[int],
            src_of: dict[int, tuple[Layout, np.ndarray]]) -> dict:
    """One route per operand need that is not read in place, with the wave of every piece (``inputs``: the graph
    inputs, stored one object per slot of their layout; ``src_of``: needs copied from elsewhere than their
    tensor's layout, the coefficient's preparation panels)."""
    routes = {}
    for t, need in plan.needs.items():
        tensor = t if t >= 0 else -t - 1
        src = src_of[t][0] if t in src_of else layout_of[tensor]
        if need.same_as(src) and (need.replicas == 1 or tensor in inputs):   # read in place (a graph input holds
            continue                                                          # one object per slot, replicas too)
        pieces = route(src, need)
        wave_of_slot = np.full(need.tiles.size, -1, dtype=np.int64)
        valid = need.cells.ravel() >= 0
        wave_of_slot[valid] = waves[need.cells.ravel()[valid]]
        routes[t] = (pieces, wave_of_slot[pieces["dst_chunk"] * need.replicas + pieces["replica"]])
    return routes


def _wave(prog: Program, op: dict, plan: OpPlan, wave: int, cells: np.ndarray, routes: dict,
          layout_of: dict, objs_of: dict, w_objs: dict,
          src_of: dict[int, tuple[Layout, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One wave of one op: [sync, exchange,] compute (and a reduce for inner splits)."""
    tensors, block, n_cells = prog.tensors, op["block"], len(plan.cell_tiles)
    operand_objs: dict[str, np.ndarray] = {}
    pending = []
    for i, (t, need) in enumerate(plan.needs.items()):
        tensor = t if t >= 0 else -t - 1
        slot = _slot_of_cell(need, n_cells)[cells]
        role = f"w{tensor}" if t in plan.weights else f"in{i}"   # a gathered weight is read as the weight operand
        if t not in routes:
            operand_objs[role] = (src_of[t][1] if t in src_of else objs_of[tensor])[slot]
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
        cls = (weight_read_class(plan, plan.weight_class or prog.params.weight_class) if key == plan.coefficient
               else "standard")   # AMP coefficients: ld128 loads
        objs = prog.new_objects(need, slot, tensor, "activation", first, cls=cls,
                                name=f"{tensors[tensor]['name']}@{plan.name}")
        src, src_objs = src_of[key] if key in src_of else (layout_of[tensor], objs_of[tensor])
        prog.move(src, src_objs, need, slot, objs, tensor, xphase, cphase, pieces=pieces)
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
    if plan.rearrange is not None:   # the query rows packed into the AMP's left-operand order before the GEMM
        _rearrange(prog, plan, cells, operand_objs[f"in{list(plan.needs).index(plan.rearrange)}"], cphase)
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
        cells, new_out = reduce_scatter(prog, plan, op, cells, new_out, wave, block)
    if plan.rule == "values":   # the attention merge normalizes the product's rows where they end
        _merge(prog, plan, _slot_of_cell(plan.output, n_cells)[cells], new_out, prog.phases.count - 1)
    return cells, new_out


def _rearrange(prog: Program, plan: OpPlan, cells: np.ndarray, objs: np.ndarray, cphase: int) -> None:
    """One rearrangement per cell of an attention scores plan of its query operand (``plan.rearrange``), in place
    in the compute phase of its GEMM: the unpacked projection's row-major rows into the AMP's left-operand order
    (values unchanged for the check)."""
    ok = objs >= 0
    objs, cells = objs[ok], cells[ok]
    rows, cols = rearrange_pieces(plan, cells)
    _in_place(prog, plan, cphase, "rearrange_left", plan.cell_tiles[cells], objs, rows, cols,
              rearrange_cycles("rearrange_left", rows, cols, prog.target))


def _merge(prog: Program, plan: OpPlan, slots: np.ndarray, objs: np.ndarray, cphase: int) -> None:
    """One attention merge per result chunk of an attention product (one head's rows, in place), in the compute
    phase that wrote it: ipu-stack's softmax leaves its exponentials unnormalized and this kernel divides
    (values unchanged for the check, whose softmax already normalizes)."""
    ok = objs >= 0
    objs = objs[ok]
    tiles, rows, cols = merge_pieces(plan.output, slots[ok])
    _in_place(prog, plan, cphase, "merge", tiles, objs, rows, cols, merge_cycles(rows, cols, prog.target))
