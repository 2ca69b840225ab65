"""Run the expanded program and trace every operand and result against the reference.

:class:`Runner` executes phase by phase (:mod:`toolkit.check.run`) and, for
every kernel group, compares the operands it read and the result it wrote with
the reference rectangles they should hold (one record per command), so the
first wrong byte is located: tensor, op, instance, tile, object and address.
After the last phase it reads the graph outputs back from SRAM.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from toolkit.check.kernels import one_blas_thread
from toolkit.check.reference import ACTIVATION_FORMAT, ACTIVATION_SCALE
from toolkit.check.run import (
    Group,
    Tables,
    context,
    formats,
    instance_shift,
    plan_compute,
    plan_exchange,
    read_values,
    run_copies,
    run_exchange,
    run_rule,
    write_values,
)
from toolkit.check.sram import Sram
from toolkit.numerics import quantize

WORST_ROWS = 20
CHUNK_ELEMENTS = 1 << 24  # operand elements per kernel call (bounds the float32 temporaries to ~0.5 GB)
OPERAND_RANK = {"input0": 0, "input1": 1, "weight1": 2, "weight2": 3, "output": 4}  # reads before the write


def _slice(g: Group, lo: int, hi: int) -> Group:
    return Group(rule=g.rule, cmds=g.cmds[lo:hi], op_id=g.op_id, inputs=[o[lo:hi] for o in g.inputs],
                 input_off=[o[lo:hi] for o in g.input_off], weights=[o[lo:hi] for o in g.weights],
                 out=g.out[lo:hi], out_off=g.out_off[lo:hi])


def rects(t: Tables, objs: np.ndarray, tensor: np.ndarray):
    """(objects, their rectangles of ``tensor`` as ``[n, G, R, C]``) per distinct rectangle shape."""
    if not len(objs):
        return
    dims = t.odims[objs]
    _, inv = np.unique(dims, axis=0, return_inverse=True)
    inv = inv.ravel()
    for k in range(int(inv.max()) + 1):
        o = objs[inv == k]
        g, r, c = t.odims[o[0]]
        rect = t.orect[o]
        gi = rect[:, 0, None, None, None] + np.arange(g)[None, :, None, None]
        ri = rect[:, 2, None, None, None] + np.arange(r)[None, None, :, None]
        ci = rect[:, 4, None, None, None] + np.arange(c)[None, None, None, :]
        yield o, tensor[gi, ri, ci]


def expected_rects(t: Tables, objs: np.ndarray, tensor: np.ndarray) -> np.ndarray | None:
    """Reference rectangles ``[n, G, R, C]`` of objects of one shape (each distinct rectangle gathered once)."""
    if len(np.unique(t.odims[objs], axis=0)) != 1:
        return None
    uniq, inv = np.unique(t.orect[objs], axis=0, return_inverse=True)
    if len(uniq) == len(objs):
        return next(rects(t, objs, tensor))[1]
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv.ravel()] = np.arange(len(objs))
    return next(rects(t, objs[first], tensor))[1][inv.ravel()]


# -- the run ------------------------------------------------------------------------------
#: relative size of one F143 step (3 mantissa bits): how far a correct F143 result may sit from a float64 rule
FP8_STEP = 2.0**-3


class Runner:
    """Runs the expanded program, comparing operands as they are read and results as they are written."""

    def __init__(self, c, sram: Sram, t: Tables, ref: dict, scale: int, partials: str, tolerance: float,
                 exact: dict | None = None) -> None:
        self.c, self.sram, self.t, self.ref = c, sram, t, ref
        self.exact = ref if exact is None else exact
        # inner-split ops: their AMP commands write partial sums (no reference tensor); their reduce writes the output
        self.split_ops = set(np.unique(t.op_id[t.kernel == "reduce"]).tolist())
        self.scale, self.tol = scale, tolerance
        roles_ = dict(zip(c.graph.tensors["tensor_id"].to_list(), c.graph.tensors["role"].to_list(), strict=True))
        # FP8 codes decode at the weights' scale for weights, at the activation scale for early-cast activations
        self.fp8_scales = {t: (scale if r == "weight" else ACTIVATION_SCALE) for t, r in roles_.items()}
        # the values of every activation tensor instance as its producing kernels wrote them (NaN: not written)
        self.state: dict[tuple[int, int], np.ndarray] = {}
        reps = c.graph.repeats
        self.carried = (int(reps["carried_in"][0]), int(reps["carried_out"][0])) if reps.height else None
        g = c.graph
        self.ctx = context(g, partials)
        self.ctx64 = context(g, "f32")   # the local reference: the same rule in float64, FP32 accumulation
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
        self.scales: dict[tuple[int, int], float] = {}
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
        """(phase, instance, kind) in execution order: a repeat block's phases once per instance."""
        ph = self.c.schedule.phases.sort("phase")
        kinds = dict(zip(ph["phase"].to_list(), ph["kind"].to_list(), strict=True))
        reps = {int(f): (int(lst), int(n)) for f, lst, n in zip(
            self.c.schedule.repeats["first_phase"].to_list(), self.c.schedule.repeats["last_phase"].to_list(),
            self.c.schedule.repeats["instances"].to_list(), strict=True)}
        out = []
        phases = ph["phase"].to_list()
        i = 0
        while i < len(phases):
            p = phases[i]
            if p in reps:
                last, n = reps[p]
                block = [q for q in phases if p <= q <= last]
                out.extend((q, inst, kinds[q]) for inst in range(n) for q in block)
                i += len(block)
            else:
                out.append((p, 0, kinds[p]))
                i += 1
        return out

    def run(self) -> None:
        plans: dict[int, Any] = {}
        passes = self.c.exchange.passes if self.c.exchange is not None else None
        with np.errstate(all="ignore"), one_blas_thread():
            for phase, inst, kind in self.order():
                self.last_instance = max(self.last_instance, inst)
                if kind == "exchange":
                    if phase not in plans:
                        plans[phase] = plan_exchange(phase, self.c.schedule, passes, self.t, self.sram)
                    shift = instance_shift(plans[phase].src_obj, self.sram, lambda o, i=inst: self._repeat_index(o, i))
                    run_exchange(plans[phase], self.sram, shift)
                elif kind == "compute":
                    if phase not in plans:
                        plans[phase] = plan_compute(phase, self.t, self.sram, self.op_rule)
                    self._compute(plans[phase], phase, inst)

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
        ins = [read_values(sram, t, o, sram.start(o) + off, self.fmt, self.fp8_scales)
               for o, off in zip(g.inputs, g.input_off, strict=True)]
        ws = [read_values(sram, t, o, sram.start(o, self._repeat_index(o, inst)), self.fmt, self.fp8_scales)
              for o in g.weights]
        acts = self.acts.get(g.op_id, [])
        if g.rule != "reduce" and acts:  # a reduce reads partial sums, which have no tensor
            for j, (o, v) in enumerate(zip(g.inputs, ins, strict=True)):
                self._compare(v, o, acts[min(j, len(acts) - 1)], inst, g, f"input{j}", phase, g.input_off[j],
                              exact=True)
        for j, (o, v) in enumerate(zip(g.weights, ws, strict=True)):
            self._compare(v, o, int(t.otensor[o[0]]), inst, g, f"weight{j + 1}", phase, 0, exact=True)
        y = run_rule(g, ins, ws, self.ctx)
        writes_tensor = not ((g.rule.startswith("linear") or g.rule == "values") and g.op_id in self.split_ops)
        local = None
        if writes_tensor:   # what the kernel should write given what it read: float64, rounded as stored
            y64 = run_rule(g, [v.astype(np.float64) for v in ins], [v.astype(np.float64) for v in ws], self.ctx64)
            eb = int(t.obytes[g.out[0]])
            if eb == 1:   # stored as F143 (an early cast for FP8 matmuls)
                local = quantize(y64, ACTIVATION_FORMAT, ACTIVATION_SCALE).astype(np.float32)
            else:
                local = y64.astype(np.float16 if eb == 2 else np.float32).astype(np.float32)
            del y64
        del ins, ws
        stored = write_values(sram, t, g.out, sram.start(g.out) + g.out_off, y)
        if writes_tensor:
            tensor = self.op_out[g.op_id]
            # an F143 output may round one code away from the float64 rule at a rounding boundary: one F143 step
            fp8 = int(t.obytes[g.out[0]]) == 1
            self._compare(stored, g.out, tensor, inst, g, "output", phase, g.out_off, expected=local,
                          rel=FP8_STEP if fp8 else None)
            self._record(stored, g.out, tensor, inst)

    def _record(self, stored: np.ndarray, objs: np.ndarray, tensor: int, inst: int) -> None:
        """Keep what the kernels wrote of one tensor instance: later reads must find exactly these values."""
        key = (tensor, inst)
        if key not in self.ref:
            return
        if key not in self.state:
            self.state[key] = np.full(self.ref[key].shape, np.nan, dtype=np.float32)
        dims = self.t.odims[objs[0]]
        if stored.shape[1:] != tuple(dims):
            return
        g, r, c = dims   # one scatter for every object (objects of one group share their shape)
        rect = self.t.orect[objs]
        gi = rect[:, 0, None, None, None] + np.arange(g)[None, :, None, None]
        ri = rect[:, 2, None, None, None] + np.arange(r)[None, None, :, None]
        ci = rect[:, 4, None, None, None] + np.arange(c)[None, None, None, :]
        self.state[key][gi, ri, ci] = stored

    def _expected(self, tensor: int, inst: int) -> np.ndarray | None:
        """What a read of one tensor instance must return: the kernels' writes, else the data (inputs, weights)."""
        if self.carried is not None and tensor == self.carried[0] and inst > 0:
            return self.state.get((self.carried[1], inst - 1))
        key = (tensor, inst)
        return self.state.get(key, self.ref.get(key))

    def _scale_of(self, tensor: int, inst: int) -> float:
        key = (tensor, inst)
        if key not in self.scales:
            self.scales[key] = float(np.abs(self.ref[key]).max()) if key in self.ref else 0.0
        return self.scales[key]

    def _compare(self, got: np.ndarray, objs: np.ndarray, tensor: int, inst: int, g, operand: str, phase: int,
                 offset, *, exact: bool = False, expected: np.ndarray | None = None,
                 rel: float | None = None) -> None:
        """Record how far ``got`` is from what it should be: reads exactly, kernel outputs within the tolerance."""
        if expected is None:
            source = self._expected(tensor, inst)
            if source is None:
                return
            expected = expected_rects(self.t, objs, source)
        if expected is None or expected.shape != got.shape:
            return  # an operand holding a different view (never for well-formed programs)
        tol = 0.0 if exact else (self.tol if rel is None else max(rel, self.tol)) * self._scale_of(tensor, inst)
        err = np.subtract(got, expected, out=expected if expected.dtype == got.dtype else None)
        err = np.abs(err, out=err).reshape(len(objs), -1)  # in place: operands can be large
        worst = err.argmax(axis=1)                      # NaN counts as the worst
        werr = err[np.arange(len(objs)), worst].astype(np.float64)
        werr[np.isnan(werr)] = np.inf
        bad = (~(err <= tol)).sum(axis=1)
        eb = self.t.obytes[objs]
        flat = self.sram.start(objs) + offset + worst * eb
        tile, addr = self.sram.address_of(flat)
        self.records.append({
            "seq": np.full(len(objs), self.seq), "phase": np.full(len(objs), phase),
            "instance": np.full(len(objs), inst), "op_id": np.full(len(objs), g.op_id),
            "operand": np.full(len(objs), operand, dtype=object), "tensor_id": np.full(len(objs), tensor),
            "elements": np.full(len(objs), err.shape[1]), "max_abs_error": werr,
            "tolerance": np.full(len(objs), tol), "mismatches": bad, "tile": tile, "object_id": objs,
            "address": addr,
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
            cmds = np.nonzero(np.isin(t.op_id, op) & (t.kernel != "copy"))[0]
            if (t.kernel[cmds] == "reduce").any():   # an inner-split op's output is what its reduction writes
                cmds = cmds[t.kernel[cmds] == "reduce"]
            objs = np.unique(t.out[cmds])
            objs = objs[objs >= 0]
            expected_full = self.ref[(tensor, inst)]
            got_full = np.full(expected_full.shape, np.nan, dtype=np.float32)
            where = np.full(expected_full.shape, -1, dtype=np.int64)
            for o, _ in rects(t, objs, expected_full):
                vals = read_values(sram, t, o, sram.start(o), self.fmt, self.fp8_scales)
                for k, obj in enumerate(o):
                    g0, g1, r0, r1, c0, c1 = t.orect[obj]
                    got_full[g0:g1, r0:r1, c0:c1] = vals[k]
                    where[g0:g1, r0:r1, c0:c1] = obj
            err = np.abs(got_full.astype(np.float64) - expected_full)   # against the op-by-op reference
            err[np.isnan(err)] = np.inf
            exact = self.exact[(tensor, inst)]
            num = np.abs(got_full.astype(np.float64) - exact)                # against the exact model
            num[np.isnan(num)] = np.inf
            written = self.state.get((tensor, inst))                         # what the last kernels wrote
            kept = np.abs(got_full - written) if written is not None else err
            kept[np.isnan(kept)] = np.inf
            e_scale = float(np.abs(exact).max())
            rows.append({"tensor_id": tensor, "tensor": self.tname[tensor], "elements": err.size,
                         "max_abs_error": float(num.max()), "max_rel_error": float(num.max()) / max(e_scale, 1e-30),
                         "max_abs_deviation": float(err.max()), "max_abs_expected": e_scale, "tolerance": 0.0,
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
