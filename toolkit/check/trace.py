"""Run the expanded program and trace every operand and result against the reference.

:class:`Runner` executes phase by phase (:mod:`toolkit.check.run`) and, for
every kernel group, compares the operands it read and the result it wrote with
the reference rectangles they should hold (one record per command), so the
first wrong byte is located: tensor, op, instance, tile, object and address.
After the last phase it reads the graph outputs back from SRAM.

A read must return exactly the bits its producer wrote (or the seeded data),
so reads are compared as element bits, in one compiled pass per operand
(:func:`~toolkit.check.rects.same_bits`); only objects whose bits differ (or
hold NaN) go through the value comparison that measures how far off they are.
What the kernels wrote is kept as element bits per tensor instance and
dropped after the last phase that reads it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from toolkit.check.exchange import exchange_rows, instance_shift, plan_exchange, run_exchange
from toolkit.check.kernels import one_blas_thread
from toolkit.check.rects import BITS, UNWRITTEN, by_shape, byte_args, gather, has_nan, rect_origins, same_bytes, scatter
from toolkit.check.reference import ACTIVATION_FORMAT, Reference
from toolkit.check.run import (
    Group,
    Tables,
    context,
    element_values,
    formats,
    plan_compute,
    read_values,
    run_copies,
    run_rule,
    write_values,
)
from toolkit.check.sram import Sram
from toolkit.costs.kernels import IN_PLACE_KERNELS
from toolkit.errors import InvalidIRError
from toolkit.numerics import quantize

WORST_ROWS = 20
#: operand elements per kernel call: temporaries stay below glibc's 32 MB mmap threshold, so they are reused
#: from the heap instead of being mapped and page-faulted afresh on every call
CHUNK_ELEMENTS = 1 << 21
OPERAND_RANK = {"input0": 0, "input1": 1, "weight1": 2, "weight2": 3, "output": 4}  # reads before the write


def _slice(g: Group, lo: int, hi: int) -> Group:
    return Group(rule=g.rule, cmds=g.cmds[lo:hi], op_id=g.op_id, inputs=[o[lo:hi] for o in g.inputs],
                 input_off=[o[lo:hi] for o in g.input_off], weights=[o[lo:hi] for o in g.weights],
                 out=g.out[lo:hi], out_off=g.out_off[lo:hi])


def _errors(got: np.ndarray, expected: np.ndarray, tol: float,
            in_place: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``[n, elements]``: (largest abs error, NaN as inf; elements off by more than ``tol``; where the
    largest is)."""
    err = np.subtract(got, expected, out=expected if in_place and expected.dtype == got.dtype else None)
    err = np.abs(err, out=err)
    worst = err.argmax(axis=1)                      # NaN counts as the worst
    werr = err[np.arange(len(err)), worst].astype(np.float64)
    werr[np.isnan(werr)] = np.inf
    return werr, (~(err <= tol)).sum(axis=1), worst


# -- the run ------------------------------------------------------------------------------
#: relative size of one F143 step (3 mantissa bits): how far a correct F143 result may sit from a float64 rule
FP8_STEP = 2.0**-3


class Runner:
    """Runs the expanded program, comparing operands as they are read and results as they are written."""

    def __init__(self, c, sram: Sram, t: Tables, ref: Reference, raw: dict[int, np.ndarray], scale: int,
                 partials: str, tolerance: float, exact: Reference | None = None,
                 activation_scale: int | None = None) -> None:
        self.c, self.sram, self.t, self.ref = c, sram, t, ref
        self.exact = ref if exact is None else exact
        # the seeded data as stored (FP8 codes, FP16), [instances, G, R, C], as element bits
        self.raw = {k: v.view(BITS[v.dtype.itemsize]) for k, v in raw.items()}
        # inner-split ops: their AMP commands write partial sums (no reference tensor); their reduce writes the output
        self.split_ops = set(np.unique(t.op_id[t.kernel == "reduce"]).tolist())
        self.scale, self.tol = scale, tolerance
        self.act_scale = scale if activation_scale is None else activation_scale
        roles_ = dict(zip(c.graph.tensors["tensor_id"].to_list(), c.graph.tensors["role"].to_list(), strict=True))
        # FP8 codes decode at the weights' scale for weights, at the activation scale for early-cast activations
        self.fp8_scales = {t: (scale if r == "weight" else self.act_scale) for t, r in roles_.items()}
        # the element bits of every activation tensor instance as its producing kernels wrote them (UNWRITTEN: not
        # written), from the first write to the last phase that reads it
        self.state: dict[tuple[int, int], np.ndarray] = {}
        self.nan: dict[tuple[int, int], bool] = {}   # whether a read's source holds NaN, per tensor instance
        reps = c.graph.repeats
        self.carried = (int(reps["carried_in"][0]), int(reps["carried_out"][0])) if reps.height else None
        g = c.graph
        # results of the ops before the repeated region (its prologue): one instance, read as instance 0
        first_op = int(reps["first_op"].min()) if reps.height else 0
        self.prologue = set(g.ops.filter(pl.col("op_id") < first_op)["output"].to_list())
        self.ctx = context(g, partials, self.act_scale)
        self.ctx64 = context(g, "f32", self.act_scale)   # the local reference: the same rule in float64, FP32 sums
        self.fmt = formats(g)
        self.op_name = dict(zip(g.ops["op_id"].to_list(), g.ops["name"].to_list(), strict=True))
        self.op_rule = dict(zip(g.ops["op_id"].to_list(), g.ops["rule"].to_list(), strict=True))
        self.op_out = dict(zip(g.ops["op_id"].to_list(), g.ops["output"].to_list(), strict=True))
        self.tname = dict(zip(g.tensors["tensor_id"].to_list(), g.tensors["name"].to_list(), strict=True))
        roles = dict(zip(g.tensors["tensor_id"].to_list(), g.tensors["role"].to_list(), strict=True))
        self.roles = roles
        self.acts = {o: [x for x in ins if roles[x] != "weight"]
                     for o, ins in zip(g.ops["op_id"].to_list(), g.ops["inputs"].to_list(), strict=True)}
        self.records: list[dict[str, np.ndarray]] = []
        self.seq = 0
        self.last_instance = 0
        sched = c.schedule
        rel = sched.relocations
        n_obj = len(t.odims)
        self.rel: dict[int, np.ndarray] = {}
        for inst in rel["instance"].unique().to_list():
            r = rel.filter(pl.col("instance") == inst)
            arr = np.zeros(n_obj, dtype=np.int64)
            arr[r["object_id"].to_numpy()] = r["repeat_index"].to_numpy()
            self.rel[int(inst)] = arr

    def order(self) -> list[tuple[int, int, str]]:
        """(phase, instance, kind) in execution order: a repeat block's phases once per instance; the phases
        before it run as instance 0, those after it (an epilogue) as its last instance, whose results they read."""
        ph = self.c.schedule.phases.sort("phase")
        kinds = dict(zip(ph["phase"].to_list(), ph["kind"].to_list(), strict=True))
        reps = {int(f): (int(lst), int(n)) for f, lst, n in zip(
            self.c.schedule.repeats["first_phase"].to_list(), self.c.schedule.repeats["last_phase"].to_list(),
            self.c.schedule.repeats["instances"].to_list(), strict=True)}
        out = []
        phases = ph["phase"].to_list()
        i = 0
        after = 0
        while i < len(phases):
            p = phases[i]
            if p in reps:
                last, n = reps[p]
                block = [q for q in phases if p <= q <= last]
                out.extend((q, inst, kinds[q]) for inst in range(n) for q in block)
                i += len(block)
                after = n - 1
            else:
                out.append((p, after, kinds[p]))
                i += 1
        return out

    def _last_reads(self, order: list[tuple[int, int, str]]) -> dict[int, list[tuple[int, int]]]:
        """Step of the order -> the tensor instances no later step reads (graph outputs stay to the end)."""
        t = self.t
        ops_of = {p: np.unique(t.op_id[c]).tolist() for p, c in t.phase_cmds.items()}
        last: dict[tuple[int, int], int] = {}
        for k, (phase, inst, kind) in enumerate(order):
            if kind != "compute":
                continue
            for op in ops_of.get(phase, []):
                for tensor in self.acts.get(op, []):
                    last[self._source(tensor, inst)] = k
        out: dict[int, list[tuple[int, int]]] = {}
        for key, k in last.items():
            if self.roles.get(key[0]) == "activation":
                out.setdefault(k, []).append(key)
        return out

    def run(self) -> None:
        plans: dict[int, Any] = {}
        passes = self.c.exchange.passes if self.c.exchange is not None else None
        order = self.order()
        dead = self._last_reads(order)
        rows = exchange_rows(self.c.schedule, passes)
        scratch = np.empty(0, dtype=np.uint8)   # one byte buffer for every exchange phase, grown to the largest
        with np.errstate(all="ignore"), one_blas_thread():
            for k, (phase, inst, kind) in enumerate(order):
                self.last_instance = max(self.last_instance, inst)
                if kind == "exchange":
                    if phase not in plans:
                        plans[phase] = plan_exchange(phase, *rows.pop(phase), self.t, self.sram)
                    p = plans[phase]
                    if scratch.size < p.stream_bytes + p.recv_bytes:
                        scratch = np.empty(p.stream_bytes + p.recv_bytes, dtype=np.uint8)
                    shift = instance_shift(p.src_obj, self.sram, lambda o, i=inst: self._repeat_index(o, i))
                    run_exchange(p, self.sram, shift, scratch)
                elif kind == "compute":
                    if phase not in plans:
                        plans[phase] = plan_compute(phase, self.t, self.sram, self.op_rule)
                    self._compute(plans[phase], phase, inst)
                for key in dead.get(k, []):   # no later phase reads these: drop what the kernels wrote
                    self.state.pop(key, None)
                    self.nan.pop(key, None)

    def _repeat_index(self, objs: np.ndarray, inst: int) -> np.ndarray:
        arr = self.rel.get(inst)
        return np.zeros(len(objs), dtype=np.int64) if arr is None else arr[objs]

    def _compute(self, plan, phase: int, inst: int) -> None:
        run_copies(plan, self.sram, instance_shift(plan.copy_obj, self.sram, lambda o: self._repeat_index(o, inst)))
        for g in plan.groups:
            self.seq += 1
            per_cmd = sum(int(self.t.odims[o[0]].prod()) for o in (*g.inputs, *g.weights, g.out))
            step = max(1, CHUNK_ELEMENTS // max(per_cmd, 1))
            for lo in range(0, len(g.cmds), step):  # bounded memory: a few arrays of CHUNK_ELEMENTS at a time
                self._group(_slice(g, lo, lo + step), phase, inst)

    def _group(self, g, phase: int, inst: int) -> None:
        t, sram = self.t, self.sram
        acts = self.acts.get(g.op_id, [])
        ins, ws = [], []
        for j, (o, off) in enumerate(zip(g.inputs, g.input_off, strict=True)):
            bits, v = read_values(sram, t, o, sram.start(o) + off, self.fmt, self.fp8_scales)
            # a reduce reads partial sums, a streaming attention block its FP32 state (input 3): no tensor
            if g.rule != "reduce" and acts and not (g.rule.startswith("attention") and j >= 3):
                self._compare_read(bits, v, o, acts[min(j, len(acts) - 1)], inst, g, f"input{j}", phase, off)
            ins.append(v)
        for j, o in enumerate(g.weights):
            bits, v = read_values(sram, t, o, sram.start(o, self._repeat_index(o, inst)), self.fmt, self.fp8_scales)
            self._compare_read(bits, v, o, int(t.otensor[o[0]]), inst, g, f"weight{j + 1}", phase, 0)
            ws.append(v)
        y = run_rule(g, ins, ws, self.ctx)
        writes_tensor = not (g.rule.startswith(("linear", "values")) and g.op_id in self.split_ops) and (
            g.rule != "attention_stream")   # a streaming attention block before the last writes its FP32 state
        local = None
        if writes_tensor:   # what the kernel should write given what it read: float64, rounded as stored
            y64 = run_rule(g, [v.astype(np.float64) for v in ins], [v.astype(np.float64) for v in ws], self.ctx64)
            eb = int(t.obytes[g.out[0]])
            if eb == 1:   # stored as F143 (an early cast for FP8 matmuls)
                local = quantize(y64, ACTIVATION_FORMAT, self.act_scale).astype(np.float32)
            else:
                local = y64.astype(np.float16 if eb == 2 else np.float32).astype(np.float32)
            del y64
        del ins, ws
        bits, stored = write_values(sram, t, g.out, sram.start(g.out) + g.out_off, y, self.act_scale)
        if writes_tensor:
            tensor = self.op_out[g.op_id]
            # an F143 output may round one code away from the float64 rule at a rounding boundary: one F143 step
            fp8 = int(t.obytes[g.out[0]]) == 1
            self._compare_write(stored, local, g.out, tensor, inst, g, phase, g.out_off, FP8_STEP if fp8 else None)
            self._record(bits, g.out, tensor, inst)

    def _record(self, bits: np.ndarray, objs: np.ndarray, tensor: int, inst: int) -> None:
        """Keep the element bits the kernels wrote of one tensor instance: later reads must find exactly these."""
        key = (tensor, inst)
        if key not in self.ref.scales:
            return
        if key not in self.state:
            self.state[key] = np.full(self.ref.shapes[tensor], UNWRITTEN[bits.itemsize], dtype=bits.dtype)
        held = self.state[key]
        self.nan.pop(key, None)
        if held.dtype != bits.dtype:
            msg = (f"tensor {self.tname.get(tensor, tensor)!r} (instance {inst}) is written as {held.itemsize}-byte "
                   f"and as {bits.itemsize}-byte elements (objects {objs[:4].tolist()}...); one tensor has one "
                   "element type")
            raise InvalidIRError(msg)
        for o, dims in by_shape(self.t, objs):
            scatter(self.t, o, held, dims, bits[np.isin(objs, o)] if len(o) < len(objs) else bits)

    def _source(self, tensor: int, inst: int) -> tuple[int, int]:
        """The tensor instance a read of ``tensor`` in ``inst`` finds (a carried input: the last instance's output)."""
        if self.carried is not None and tensor == self.carried[0] and inst > 0:
            return self.carried[1], inst - 1
        if tensor in self.prologue:
            return tensor, 0
        return tensor, inst

    def _expected_bits(self, tensor: int, inst: int) -> np.ndarray | None:
        """The element bits a read of one tensor instance must return: the kernels' writes, else the data
        (inputs, weights); an activation no kernel wrote reads as never written."""
        key = self._source(tensor, inst)
        if key in self.state:
            return self.state[key]
        if key[0] in self.raw:
            data = self.raw[key[0]]
            return data[min(key[1], data.shape[0] - 1)]
        if key[0] in self.ref.shapes:
            eb = int(self.t.obytes[self.t.otensor == key[0]].max(initial=2))
            return np.full(self.ref.shapes[key[0]], UNWRITTEN[eb], dtype=BITS[eb])
        return None

    def _compare_read(self, bits: np.ndarray, got: np.ndarray, objs: np.ndarray, tensor: int, inst: int, g,
                      operand: str, phase: int, offset) -> None:
        """A read must hold exactly the expected bits; objects that do not are measured by value."""
        src = self._expected_bits(tensor, inst)
        if src is None:
            return
        dims = tuple(int(d) for d in self.t.odims[objs[0]])
        if (self.t.odims[objs] != dims).any():
            return  # an operand holding different views (never for well-formed programs)
        n, n_el = len(objs), bits.shape[1]
        # equal bits are equal values, unless NaN (a NaN never matches): a source holding NaN is compared by value
        ok = (same_bytes(bits.view(np.uint8), *byte_args(src, rect_origins(self.t, objs, src.shape), dims))
              if src.dtype == bits.dtype and not self._has_nan(tensor, inst, src) else np.zeros(n, dtype=bool))
        werr, bad, worst = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        off = np.nonzero(~ok)[0]
        if len(off):   # the value comparison, on the objects whose bits differ
            expected = element_values(gather(self.t, objs[off], src, dims), self.fmt.get(tensor, "f143"),
                                      self.fp8_scales[tensor])
            werr[off], bad[off], worst[off] = _errors(got.reshape(n, n_el)[off], expected.reshape(len(off), n_el), 0.0)
        self._emit(objs, tensor, inst, g, operand, phase, offset, n_el, 0.0, werr, bad, worst)

    def _has_nan(self, tensor: int, inst: int, src: np.ndarray) -> bool:
        """Whether the bits a read of the tensor instance must find hold a NaN (kept until the next write)."""
        key = self._source(tensor, inst)
        if key not in self.nan:
            self.nan[key] = has_nan(src)
        return self.nan[key]

    def _compare_write(self, got: np.ndarray, expected: np.ndarray, objs: np.ndarray, tensor: int, inst: int, g,
                       phase: int, offset, rel: float | None) -> None:
        """A kernel's result must be within the tolerance of its rule run in float64 on what it read."""
        tol = (self.tol if rel is None else max(rel, self.tol)) * self.ref.scales.get(self._source(tensor, inst), 0.0)
        n = len(objs)
        werr, bad, worst = _errors(got.reshape(n, -1), expected.reshape(n, -1), tol, in_place=True)
        self._emit(objs, tensor, inst, g, "output", phase, offset, got[0].size, tol, werr, bad, worst)

    def _emit(self, objs, tensor, inst, g, operand, phase, offset, n_el, tol, werr, bad, worst) -> None:
        n = len(objs)
        flat = self.sram.start(objs) + offset + worst * self.t.obytes[objs]
        tile, addr = self.sram.address_of(flat)
        self.records.append({
            "seq": np.full(n, self.seq), "phase": np.full(n, phase), "instance": np.full(n, inst),
            "op_id": np.full(n, g.op_id), "operand": np.full(n, operand, dtype=object),
            "tensor_id": np.full(n, tensor), "elements": np.full(n, n_el), "max_abs_error": werr,
            "tolerance": np.full(n, tol), "mismatches": bad, "tile": tile, "object_id": objs, "address": addr,
        })

    def operand_frame(self) -> pl.DataFrame:
        if not self.records:
            return None
        cols = {k: np.concatenate([r[k] for r in self.records]) for k in self.records[0]}
        df = pl.DataFrame({k: (v.tolist() if v.dtype == object else v) for k, v in cols.items()})
        df = df.with_columns(pl.col("op_id").replace_strict(self.op_name, default="").alias("op"),
                             pl.col("tensor_id").replace_strict(self.tname, default="").alias("tensor"))
        agg = (df.sort("max_abs_error", descending=True)
               .group_by("op_id", "instance", "operand", maintain_order=True)
               .agg(pl.col("seq").min(), pl.col("phase").first(), pl.col("op").first(), pl.col("tensor").first(),
                    pl.col("elements").sum(), pl.col("max_abs_error").max(), pl.col("tolerance").max(),
                    pl.col("mismatches").sum(), pl.col("tile").first().alias("worst_tile"),
                    pl.col("object_id").first().alias("worst_object"),
                    pl.col("address").first().alias("worst_address")))
        return agg.sort("seq", pl.col("operand").replace_strict(OPERAND_RANK, default=5))

    def outputs(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Graph outputs read back from SRAM after the last phase, with the worst elements."""
        t, sram = self.t, self.sram
        rows, worst = [], []
        inst = self.last_instance
        for tensor in [k for k, r in self.roles.items() if r == "output"]:
            op = [o for o, out in self.op_out.items() if out == tensor]
            cmds = np.nonzero(np.isin(t.op_id, op) & (t.kernel != "copy") & ~np.isin(t.kernel, IN_PLACE_KERNELS))[0]
            if (t.kernel[cmds] == "reduce").any():   # an inner-split op's output is what its reduction writes
                cmds = cmds[t.kernel[cmds] == "reduce"]
            cmds = cmds[t.kernel[cmds] != "attention_stream"]   # streaming attention: its last block writes it
            objs = np.unique(t.out[cmds])
            objs = objs[objs >= 0]
            expected_full = self.ref.values[(tensor, inst)]
            got_full = np.full(expected_full.shape, np.nan, dtype=np.float32)
            where = np.full(expected_full.shape, -1, dtype=np.int64)
            for o, dims in by_shape(t, objs):
                _, vals = read_values(sram, t, o, sram.start(o), self.fmt, self.fp8_scales)
                scatter(t, o, got_full, dims, vals)
                scatter(t, o, where, dims, np.repeat(o, int(np.prod(dims))))
            err = np.abs(got_full.astype(np.float64) - expected_full)   # against the op-by-op reference
            err[np.isnan(err)] = np.inf
            exact = self.exact.values[(tensor, inst)]
            num = np.abs(got_full.astype(np.float64) - exact)                # against the exact model
            num[np.isnan(num)] = np.inf
            written = self.state.get((tensor, inst))                         # what the last kernels wrote
            if written is not None:
                written = element_values(written, self.fmt.get(tensor, "f143"),
                                         self.fp8_scales[tensor]).reshape(written.shape)
            kept = np.abs(got_full - written) if written is not None else err
            kept[np.isnan(kept)] = np.inf
            e_scale = float(np.abs(expected_full).max())
            rows.append({"tensor_id": tensor, "tensor": self.tname[tensor], "elements": err.size,
                         "max_abs_error": float(err.max()), "max_rel_error": float(err.max()) / max(e_scale, 1e-30),
                         "max_abs_error_exact": float(num.max()), "max_abs_expected": e_scale, "tolerance": 0.0,
                         "mismatches": int((kept > 0).sum())})
            if written is not None:   # the worst elements: where the output differs from what was written, else
                err = np.where(kept > 0, np.inf, err)   # where it is furthest from the op-by-op reference
            top = np.argsort(err, axis=None)[::-1][:WORST_ROWS]
            gi, ri, ci = np.unravel_index(top, err.shape)
            obj = where[gi, ri, ci]
            g0, r0, c0 = t.orect[obj, 0], t.orect[obj, 2], t.orect[obj, 4]
            dims = t.odims[obj]
            idx = ((gi - g0) * dims[:, 1] + (ri - r0)) * dims[:, 2] + (ci - c0)
            tile, addr = sram.address_of(sram.start(obj) + idx * t.obytes[obj])
            worst.append(pl.DataFrame({
                "tensor": [self.tname[tensor]] * len(top), "tile": np.where(obj >= 0, tile, -1),
                "object_id": obj, "address": np.where(obj >= 0, addr, -1), "group": gi, "row": ri, "col": ci,
                "got": got_full[gi, ri, ci].astype(np.float64),
                "expected": expected_full[gi, ri, ci].astype(np.float64), "abs_error": err[gi, ri, ci]}))
        out = pl.DataFrame(rows)
        w = pl.concat(worst).sort("abs_error", descending=True).head(WORST_ROWS) if worst else pl.DataFrame()
        return out, w
