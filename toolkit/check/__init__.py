"""Stage ``check``: run the compiled program on a simulated SRAM image against a float64 reference.

Contract: takes a :class:`~toolkit.pipeline.Compilation` (graph, schedule,
exchange, placement) and returns a :class:`CheckResult`. Nothing in the
compilation is modified.

1. Seeded data (:mod:`toolkit.check.reference`): Gaussian input (FP16),
   matmul weights quantized to FP8 F143 with ``scale`` (stored as codes),
   LayerNorm parameters and biases FP16; a float64 reference of every tensor of
   every repeat instance from exactly those stored values.
2. A byte image of every used tile's SRAM (:class:`~toolkit.check.sram.Sram`);
   each weight object gets its tensor rectangle (``schedule.segments``) at its
   placed address (repeat instance ``i`` at ``address + i * stride_bytes``), the
   graph input's home objects get the input. Everything else starts as 0xFF
   bytes (FP16/FP32 NaN), so a read of never-written memory shows.
3. The expanded program runs phase by phase (:mod:`toolkit.check.run`):
   exchanges move bytes transfer by transfer through the staging windows the
   plan gives, compute phases run the kernels in bulk over tiles
   (:mod:`toolkit.check.kernels`), reading and writing placed bytes only.
4. Every operand a kernel reads and every result it writes is compared with
   the reference rectangle it should hold; the graph outputs are read back
   from SRAM at the end and compared element by element.

Tolerance: an element mismatches when ``|got - expected| > tolerance *
max|expected|`` over its tensor and instance, ``tolerance = 2**-7`` by default
(8 FP16 half-ulps at the tensor's largest magnitude: FP16 storage of every
intermediate and FP8 weights put errors of a correct program at 1-3 ulps;
misplaced or missing bytes are off by O(1) or NaN). Weights must match
exactly. ``max_rel_error`` is the normwise ratio ``max|got - expected| /
max|expected|``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from toolkit.check.kernels import one_blas_thread
from toolkit.check.reference import Data, make_data, run_reference, tensor3
from toolkit.check.run import (
    Tables,
    build_tables,
    context,
    formats,
    plan_compute,
    plan_exchange,
    read_values,
    run_copies,
    run_exchange,
    run_rule,
    write_values,
)
from toolkit.check.sram import Sram
from toolkit.errors import InvalidIRError, OptionError
from toolkit.numerics import SCALE_MAX, SCALE_MIN

TOLERANCE = 2.0**-7
WORST_ROWS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """Outcome of one functional check."""

    passed: bool
    max_abs_error: float
    max_rel_error: float
    message: str               # one line: what passed, or the first wrong tensor, tile and object
    outputs: pl.DataFrame      # OUTPUTS_SCHEMA: one row per graph output tensor
    worst: pl.DataFrame        # WORST_SCHEMA: the worst output elements with their tile and address
    operands: pl.DataFrame     # OPERANDS_CHECK_SCHEMA: per op, instance and operand, as read and written
    wall_seconds: float
    seed: int
    scale: int
    tolerance: float

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"outputs": self.outputs, "worst": self.worst, "operands": self.operands}

    def raise_for_failure(self) -> None:
        """Raise :class:`InvalidIRError` with :attr:`message` when the check failed."""
        if not self.passed:
            raise InvalidIRError(self.message)


OUTPUTS_SCHEMA = {
    "tensor_id": pl.Int32, "tensor": pl.String, "elements": pl.Int64, "max_abs_error": pl.Float64,
    "max_rel_error": pl.Float64, "max_abs_expected": pl.Float64, "tolerance": pl.Float64, "mismatches": pl.Int64,
}
WORST_SCHEMA = {
    "tensor": pl.String, "tile": pl.Int32, "object_id": pl.Int64, "address": pl.Int64, "group": pl.Int64,
    "row": pl.Int64, "col": pl.Int64, "got": pl.Float64, "expected": pl.Float64, "abs_error": pl.Float64,
}
OPERANDS_CHECK_SCHEMA = {
    "seq": pl.Int64,           # execution order of the first group that read/wrote it
    "phase": pl.Int32, "instance": pl.Int32, "op_id": pl.Int32, "op": pl.String,
    "operand": pl.String,      # input0 | input1 | weight1 | weight2 | output
    "tensor": pl.String, "elements": pl.Int64, "max_abs_error": pl.Float64, "tolerance": pl.Float64,
    "mismatches": pl.Int64,
    "worst_tile": pl.Int32, "worst_object": pl.Int64, "worst_address": pl.Int64,
}
PARTIALS = ("f32", "f16")


def check(compilation: Any, seed: int = 0, *, scale: int = -4, partials: str | None = None,
          tolerance: float = TOLERANCE) -> CheckResult:
    """Execute ``compilation`` on simulated SRAM and compare with a float64 reference (see the module doc).

    ``partials``: None runs each AMP kernel as planned (products accumulated in
    FP32); ``"f16"`` rounds FP16-kernel partial sums to FP16 after every 16-deep
    inner block; ``"f32"`` forces FP32 accumulation everywhere.
    """
    start = time.perf_counter()
    seed, scale, partials, tolerance = _options(seed, scale, partials, tolerance)
    graph, sched = compilation.graph, compilation.schedule
    data = make_data(graph, seed, scale)
    ref = run_reference(graph, data)
    sram = Sram(sched.objects, compilation.placement.placement)
    tables = build_tables(sched, graph)
    _load(sram, tables, sched, graph, data)
    runner = _Runner(compilation, sram, tables, ref, scale, partials, tolerance)
    with one_blas_thread():
        runner.run()
    outputs, worst = runner.outputs()
    operands = runner.operand_frame()
    return _result(outputs, worst, operands, time.perf_counter() - start, seed, scale, tolerance)


def _options(seed: Any, scale: Any, partials: Any, tolerance: Any) -> tuple[int, int, str, float]:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        msg = f"seed={seed!r} must be a non-negative integer"
        raise OptionError(msg, field="seed", value=seed)
    if isinstance(scale, bool) or not isinstance(scale, int | np.integer) or not SCALE_MIN <= scale <= SCALE_MAX:
        msg = f"scale={scale!r} must be an integer FP8 scale in {SCALE_MIN}..{SCALE_MAX} (value = q * 2**scale)"
        raise OptionError(msg, field="scale", value=scale)
    if partials is not None and partials not in PARTIALS:
        msg = f"partials={partials!r} is not a partials type; use None (as planned), 'f32' or 'f16'"
        raise OptionError(msg, field="partials", value=partials)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < 1:
        msg = f"tolerance={tolerance!r} must be a number in (0, 1), relative to the tensor's largest magnitude"
        raise OptionError(msg, field="tolerance", value=tolerance)
    return int(seed), int(scale), partials or "f32", float(tolerance)


# -- initial image -------------------------------------------------------------------
def _load(sram: Sram, t: Tables, sched, graph, data: Data) -> None:
    """Weights (every repeat instance) and the graph input's home objects at their placed addresses."""
    objs = sched.objects
    names = dict(zip(graph.tensors["tensor_id"].to_list(), graph.tensors["name"].to_list(), strict=True))
    w = objs.filter((pl.col("kind") == "weight") & pl.col("tensor_id").is_not_null())
    inputs = [tid for tid, role in zip(graph.tensors["tensor_id"].to_list(), graph.tensors["role"].to_list(),
                                       strict=True) if role == "input"]
    x = objs.filter(pl.col("tensor_id").is_in(inputs) & (pl.col("kind") == "activation") & (pl.col("first") == 0)
                    & (pl.col("name") == pl.col("tensor_id").replace_strict(names, default="")))
    for frame_, weight in ((w, True), (x, False)):
        oid = frame_["object_id"].to_numpy()
        tid = frame_["tensor_id"].to_numpy()
        reps = frame_["repeat_count"].to_numpy() if weight else np.ones(len(oid), dtype=np.int64)
        for tensor in np.unique(tid):
            sel = oid[tid == tensor]
            raw = data.raw[int(tensor)]
            for r in range(int(reps[tid == tensor].max())):
                inst = raw[min(r, raw.shape[0] - 1)]
                has = sel[reps[tid == tensor] > r]
                for objs_, vals in _rects(t, has, inst):
                    sram.write(sram.start(objs_, r), vals.reshape(len(objs_), -1))


def _rects(t: Tables, objs: np.ndarray, tensor: np.ndarray):
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


def _expected(t: Tables, objs: np.ndarray, tensor: np.ndarray) -> np.ndarray | None:
    """Reference rectangles ``[n, G, R, C]`` of objects of one shape (each distinct rectangle gathered once)."""
    if len(np.unique(t.odims[objs], axis=0)) != 1:
        return None
    uniq, inv = np.unique(t.orect[objs], axis=0, return_inverse=True)
    if len(uniq) == len(objs):
        return next(_rects(t, objs, tensor))[1]
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv.ravel()] = np.arange(len(objs))
    return next(_rects(t, objs[first], tensor))[1][inv.ravel()]


# -- the run ------------------------------------------------------------------------------
class _Runner:
    """Runs the expanded program, comparing operands as they are read and results as they are written."""

    def __init__(self, c, sram: Sram, t: Tables, ref: dict, scale: int, partials: str, tolerance: float) -> None:
        self.c, self.sram, self.t, self.ref = c, sram, t, ref
        self.scale, self.tol = scale, tolerance
        g = c.graph
        self.ctx = context(g, partials)
        self.fmt = formats(g)
        self.op_name = dict(zip(g.ops["op_id"].to_list(), g.ops["name"].to_list(), strict=True))
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
        with np.errstate(all="ignore"):
            for phase, inst, kind in self.order():
                self.last_instance = max(self.last_instance, inst)
                if kind == "exchange":
                    if phase not in plans:
                        plans[phase] = plan_exchange(phase, self.c.schedule, passes, self.t, self.sram)
                    run_exchange(plans[phase], self.sram)
                elif kind == "compute":
                    if phase not in plans:
                        plans[phase] = plan_compute(phase, self.t, self.sram, self.op_name)
                    self._compute(plans[phase], phase, inst)

    def _repeat_index(self, objs: np.ndarray, inst: int) -> np.ndarray:
        arr = self.rel.get(inst)
        return np.zeros(len(objs), dtype=np.int64) if arr is None else arr[objs]

    def _compute(self, plan, phase: int, inst: int) -> None:
        run_copies(plan, self.sram)
        t, sram = self.t, self.sram
        for g in plan.groups:
            ins = [read_values(sram, t, o, sram.start(o) + off, self.fmt, self.scale)
                   for o, off in zip(g.inputs, g.input_off, strict=True)]
            ws = []
            for o in g.weights:
                ws.append(read_values(sram, t, o, sram.start(o, self._repeat_index(o, inst)), self.fmt, self.scale))
            self.seq += 1
            acts = self.acts.get(g.op_id, [])
            if g.rule != "reduce":
                for j, (o, v) in enumerate(zip(g.inputs, ins, strict=True)):
                    if acts:
                        self._compare(v, o, acts[min(j, len(acts) - 1)], inst, g, f"input{j}", phase, g.input_off[j])
            for j, (o, v) in enumerate(zip(g.weights, ws, strict=True)):
                self._compare(v, o, int(t.otensor[o[0]]), inst, g, f"weight{j + 1}", phase, 0, exact=True)
            y = run_rule(g, ins, ws, self.ctx)
            stored = write_values(sram, t, g.out, sram.start(g.out) + g.out_off, y)
            if g.rule != "linear_f32":
                self._compare(stored, g.out, self.op_out[g.op_id], inst, g, "output", phase, g.out_off)

    def _scale_of(self, tensor: int, inst: int) -> float:
        key = (tensor, inst)
        if key not in self.scales:
            self.scales[key] = float(np.abs(self.ref[key]).max()) if key in self.ref else 0.0
        return self.scales[key]

    def _compare(self, got: np.ndarray, objs: np.ndarray, tensor: int, inst: int, g, operand: str, phase: int,
                 offset, *, exact: bool = False) -> None:
        key = (tensor, inst)
        if key not in self.ref:
            return
        expected = _expected(self.t, objs, self.ref[key])
        if expected is None or expected.shape != got.shape:
            return  # an operand holding a different view (never for well-formed programs)
        tol = 0.0 if exact else self.tol * self._scale_of(tensor, inst)
        err = np.abs(got - expected).reshape(len(objs), -1)
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
            return pl.DataFrame(schema=OPERANDS_CHECK_SCHEMA)
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
        rank = {"input0": 0, "input1": 1, "weight1": 2, "weight2": 3, "output": 4}  # reads before the write
        agg = agg.sort("seq", pl.col("operand").replace_strict(rank, default=5))
        return agg.select(list(OPERANDS_CHECK_SCHEMA)).cast(OPERANDS_CHECK_SCHEMA)

    def outputs(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Graph outputs read back from SRAM after the last phase, with the worst elements."""
        t, sram = self.t, self.sram
        rows, worst = [], []
        inst = self.last_instance
        for tensor in [k for k, r in self.roles.items() if r == "output"]:
            op = [o for o, out in self.op_out.items() if out == tensor]
            cmds = np.nonzero(np.isin(t.op_id, op) & (t.kernel != "copy") & (t.kernel != "amp_matmul_f32"))[0]
            objs = np.unique(t.out[cmds])
            objs = objs[objs >= 0]
            expected_full = self.ref[(tensor, inst)]
            got_full = np.full(expected_full.shape, np.nan, dtype=np.float32)
            where = np.full(expected_full.shape, -1, dtype=np.int64)
            for o, _ in _rects(t, objs, expected_full):
                vals = read_values(sram, t, o, sram.start(o), self.fmt, self.scale)
                for k, obj in enumerate(o):
                    g0, g1, r0, r1, c0, c1 = t.orect[obj]
                    got_full[g0:g1, r0:r1, c0:c1] = vals[k]
                    where[g0:g1, r0:r1, c0:c1] = obj
            err = np.abs(got_full.astype(np.float64) - expected_full)
            err[np.isnan(err)] = np.inf
            scale = float(np.abs(expected_full).max())
            tol = self.tol * scale
            rows.append({"tensor_id": tensor, "tensor": self.tname[tensor], "elements": err.size,
                         "max_abs_error": float(err.max()), "max_rel_error": float(err.max()) / max(scale, 1e-30),
                         "max_abs_expected": scale, "tolerance": tol, "mismatches": int((err > tol).sum())})
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
        out = pl.DataFrame(rows, schema=OUTPUTS_SCHEMA) if rows else pl.DataFrame(schema=OUTPUTS_SCHEMA)
        w = pl.concat(worst).cast(WORST_SCHEMA).sort("abs_error", descending=True).head(WORST_ROWS) if worst else (
            pl.DataFrame(schema=WORST_SCHEMA))
        return out, w


def _result(outputs: pl.DataFrame, worst: pl.DataFrame, operands: pl.DataFrame, wall: float, seed: int,
            scale: int, tolerance: float) -> CheckResult:
    max_abs = float(outputs["max_abs_error"].max() or 0.0) if outputs.height else 0.0
    max_rel = float(outputs["max_rel_error"].max() or 0.0) if outputs.height else 0.0
    bad_out = outputs.filter(pl.col("mismatches") > 0)
    bad_ops = operands.filter(pl.col("mismatches") > 0)
    passed = bad_out.height == 0 and bad_ops.height == 0
    if passed:
        names = ", ".join(outputs["tensor"].to_list())
        message = (f"check passed: {names} within {tolerance:g} x max|expected| "
                   f"(max abs error {max_abs:.6g}, {operands.height} operand checks)")
    else:
        parts = []
        if bad_ops.height:
            r = bad_ops.row(0, named=True)
            parts.append(
                f"first wrong data: {r['operand']} of op {r['op']!r} (tensor {r['tensor']!r}, "
                f"instance {r['instance']}) "
                f"at phase {r['phase']}: {r['mismatches']} of {r['elements']} elements off by up to "
                f"{r['max_abs_error']:.4g} (tolerance {r['tolerance']:.3g}); worst on tile {r['worst_tile']}, "
                f"object {r['worst_object']}, address 0x{r['worst_address']:x}")
        if bad_out.height:
            r = bad_out.row(0, named=True)
            w = worst.filter(pl.col("tensor") == r["tensor"]).row(0, named=True)
            parts.append(f"output tensor {r['tensor']!r}: {r['mismatches']} of {r['elements']} elements wrong, "
                         f"max abs error {r['max_abs_error']:.4g}; worst on tile {w['tile']} "
                         f"(object {w['object_id']}, row {w['row']}, col {w['col']}: got {w['got']:.4g}, "
                         f"expected {w['expected']:.4g})")
        message = "check failed: " + "; ".join(parts)
    return CheckResult(passed=passed, max_abs_error=max_abs, max_rel_error=max_rel, message=message,
                       outputs=outputs, worst=worst, operands=operands, wall_seconds=wall, seed=seed, scale=scale,
                       tolerance=tolerance)


__all__ = ["OPERANDS_CHECK_SCHEMA", "OUTPUTS_SCHEMA", "WORST_SCHEMA", "CheckResult", "check", "tensor3"]
