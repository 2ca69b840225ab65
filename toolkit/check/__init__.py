"""Stage ``check``: run the compiled program on a simulated SRAM image against a float64 reference.

Contract: takes the graph, schedule, placement and (optionally) exchange of a
compiled program (or one object holding them, such as a ``toolkit.Compilation``)
and returns a :class:`CheckResult`. Nothing in them is modified.

1. Seeded data (:mod:`toolkit.check.reference`), as ``ipu-stack``'s hardware
   check draws it: Gaussian input (standard deviation 0.25, FP16), matmul
   weights Gaussian ``/ sqrt(fan_in)`` quantized to FP8 F143 with ``scale``
   (stored as codes; -4 by default, the hardware's), LayerNorm parameters and
   biases FP16; a float64 reference forward pass over every repeat instance
   from exactly those stored values (it keeps each result's largest
   magnitude, the tolerance scale, and the graph outputs).
2. A byte image of every used tile's SRAM (:class:`~toolkit.check.sram.Sram`);
   each weight object gets its tensor rectangle (``schedule.segments``) at its
   placed address (repeat instance ``i`` at ``address + i * stride_bytes``), the
   graph input's home objects get the input. Everything else starts as 0xFF
   bytes (FP16/FP32 NaN), so a read of never-written memory shows.
3. The expanded program runs phase by phase (:mod:`toolkit.check.run`):
   exchanges move bytes transfer by transfer through the staging windows the
   plan gives, compute phases run the kernels in bulk over tiles
   (:mod:`toolkit.check.kernels`), reading and writing placed bytes only.
4. Every operand a kernel reads must be exactly what its producer wrote (the
   element bits the kernels wrote so far, kept until the last phase reading
   them, or the seeded data for inputs and weights): data movement moves
   bytes, so any difference is a wrong, missing or stale byte (compared as
   bits; objects that differ are measured by value). Every result a kernel
   writes is compared with the same rule run in float64 on the operands it
   actually read, rounded as stored (the local reference), within ``tolerance x
   max|expected|`` of the tensor (``2**-7`` by default: 8 FP16 half-ulps at the
   tensor's largest magnitude; a correct kernel is within 1-2 ulps, misplaced
   data is off by O(1) or NaN; a result stored as F143 for FP8 matmuls, an
   early cast, may round one F143 step away at a rounding boundary, so it gets
   ``2**-3``). The graph outputs are read back from SRAM at the end and must
   equal what their kernels wrote.

Comparing each kernel with its own inputs keeps the verdict exact at any
depth: an FP8 matmul casts its FP16 left operand to F143, so a value one FP16
ulp away from a reference (FP16 partials, accumulation order) may take the
neighbouring F143 code and the difference travels on through every later
layer; a global reference would have to loosen with depth.

Reported numbers (outputs), as the hardware check reports them
(``ipu-stack``, ``crates/ipu-tests/src/diagnostic.rs``): ``max_abs_error``,
the largest ``|output - host reference|`` over every output element, where the
host reference is the op-by-op stored-value model
(:func:`~toolkit.check.reference.run_reference`: every result rounded to its
storage type, both operands of FP8 matmuls rounded to F143 at the scale, the
hardware's "device-precision host reference"); ``max_rel_error =
max_abs_error / max|expected|``; and ``max_abs_error_exact`` against the exact
float64 model (nothing rounded but the stored input and weights; the
hardware's ``--reference-fp32``), where the F143 activation casts of every
FP8 matmul show. The hardware's own figures for the same workloads are
:func:`hardware_errors` (``toolkit/data/hardware_check_errors.csv``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.check.hardware import hardware_error, hardware_errors
from toolkit.check.rects import BITS
from toolkit.check.reference import INPUT_STD, Data, make_data, run_reference, tensor3
from toolkit.check.run import Tables, build_tables
from toolkit.check.sram import Sram
from toolkit.check.trace import Runner, by_shape, gather
from toolkit.errors import InvalidIRError, OptionError
from toolkit.numerics import SCALE_MAX, SCALE_MIN
from toolkit.schedule.lineage import check_lineage
from toolkit.simulate.run import program_of

TOLERANCE = 2.0**-7


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """Outcome of one functional check."""

    passed: bool
    max_abs_error: float       # outputs against the host reference as the hardware's check computes it
    max_rel_error: float       # max_abs_error / max|expected|
    max_abs_error_exact: float  # outputs against the exact float64 model (FP8 activation casts show)
    message: str               # one line: what passed, or the first wrong tensor, tile and object
    outputs: pl.DataFrame      # OUTPUTS_SCHEMA: one row per graph output tensor
    worst: pl.DataFrame        # WORST_SCHEMA: the worst output elements with their tile and address
    operands: pl.DataFrame     # OPERANDS_CHECK_SCHEMA: per op, instance and operand, as read and written
    wall_seconds: float
    seed: int
    scale: int
    tolerance: float
    input_std: float = 0.25
    activation_scale: int | None = None   # F143 scale of activation casts (None: ``scale``, as the hardware)

    @property
    def max_abs_deviation(self) -> float:
        """The same number as :attr:`max_abs_error` (the op-by-op stored-value reference is the host reference)."""
        return self.max_abs_error

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"outputs": self.outputs, "worst": self.worst, "operands": self.operands}

    def raise_for_failure(self) -> None:
        """Raise :class:`InvalidIRError` with :attr:`message` when the check failed."""
        if not self.passed:
            raise InvalidIRError(self.message)


OUTPUTS_SCHEMA = {
    "tensor_id": pl.Int32, "tensor": pl.String, "elements": pl.Int64,
    "max_abs_error": pl.Float64,       # against the op-by-op stored-value reference (the hardware's host reference)
    "max_rel_error": pl.Float64,       # max_abs_error / max_abs_expected
    "max_abs_error_exact": pl.Float64,  # against the exact float64 model (FP16 storage and FP8 casts show)
    "max_abs_expected": pl.Float64, "tolerance": pl.Float64,
    "mismatches": pl.Int64,            # elements deviating by more than the tolerance
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


@dataclass(frozen=True, slots=True)
class Program:
    """The stage results a check runs: the graph, its schedule, the placement, and the exchange (plan rows)."""

    graph: Any
    schedule: Any
    placement: Any
    exchange: Any = None


def check(graph: Any, schedule: Any = None, placement: Any = None, exchange: Any = None, *, seed: int = 0,
          scale: int = -4, partials: str | None = None, tolerance: float = TOLERANCE, input_std: float = INPUT_STD,
          activation_scale: int | None = None) -> CheckResult:
    """Execute the program (``graph``, ``schedule``, ``placement``, ``exchange``) on simulated SRAM and compare
    with a float64 reference (see the module doc); ``check(compilation)`` reads the compilation's.

    ``scale``: the F143 scale of FP8 weights and (unless ``activation_scale``
    is given) of the activation casts that feed the FP8 AMP; ``input_std``: the
    graph input's standard deviation (0.25, the hardware check's).
    ``partials``: None runs each AMP kernel as the hardware does (the FP16 AMP
    accumulates in FP32, the FP8 AMP carries an FP16 sum from one 32-deep K
    panel to the next); ``"f16"`` also rounds FP16-kernel sums to FP16 after
    every 16-deep inner block; ``"f32"`` forces FP32 accumulation everywhere.
    """
    start = time.perf_counter()
    seed, scale, partials, tolerance = _options(seed, scale, partials, tolerance)
    act = scale if activation_scale is None else _options(seed, activation_scale, None, tolerance)[1]
    if isinstance(input_std, bool) or not isinstance(input_std, int | float) or not 0 < input_std < 1e3:
        msg = f"input_std={input_std!r} must be a positive number (the input's standard deviation; 0.25 as hardware)"
        raise OptionError(msg, field="input_std", value=input_std)
    if schedule is None and placement is None and exchange is None and hasattr(graph, "placement"):
        program = Program(graph.graph, graph.schedule, graph.placement, getattr(graph, "exchange", None))
    else:
        program_of(("graph", "schedule", "placement"), graph, schedule, placement)   # names what is missing
        program = Program(graph, schedule, placement, exchange)
    graph, sched = program.graph, program.schedule
    check_lineage("check", sched, exchange=program.exchange)
    data = make_data(graph, seed, scale, float(input_std))
    ref = run_reference(graph, data, scale=act)
    exact = run_reference(graph, data, scale=act, stored=False, outputs_only=True)
    sram = Sram(sched.objects, program.placement.placement)
    tables = build_tables(sched, graph)
    _load(sram, tables, sched, graph, data)
    raw = data.raw   # the stored bytes are what reads of the data must find; the float64 values go
    del data
    runner = Runner(program, sram, tables, ref, raw, scale, partials, tolerance, exact, act)
    runner.run()
    outputs, worst = runner.outputs()
    outputs = outputs.cast(OUTPUTS_SCHEMA) if outputs.height else pl.DataFrame(schema=OUTPUTS_SCHEMA)
    worst = worst.select(list(WORST_SCHEMA)).cast(WORST_SCHEMA) if worst.height else pl.DataFrame(schema=WORST_SCHEMA)
    ops = runner.operand_frame()
    operands = (pl.DataFrame(schema=OPERANDS_CHECK_SCHEMA) if ops is None
                else ops.select(list(OPERANDS_CHECK_SCHEMA)).cast(OPERANDS_CHECK_SCHEMA))
    result = _result(outputs, worst, operands, time.perf_counter() - start, seed, scale, tolerance)
    return dataclasses.replace(result, input_std=float(input_std), activation_scale=activation_scale)


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
    return int(seed), int(scale), partials or "planned", float(tolerance)


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
            bits = raw.view(BITS[raw.dtype.itemsize])
            for r in range(int(reps[tid == tensor].max())):
                inst = bits[min(r, raw.shape[0] - 1)]
                for objs_, dims in by_shape(t, sel[reps[tid == tensor] > r]):
                    sram.write(sram.start(objs_, r), gather(t, objs_, inst, dims))


def _result(outputs: pl.DataFrame, worst: pl.DataFrame, operands: pl.DataFrame, wall: float, seed: int,
            scale: int, tolerance: float) -> CheckResult:
    max_abs = float(outputs["max_abs_error"].max() or 0.0) if outputs.height else 0.0
    max_exact = float(outputs["max_abs_error_exact"].max() or 0.0) if outputs.height else 0.0
    max_rel = float(outputs["max_rel_error"].max() or 0.0) if outputs.height else 0.0
    bad_out = outputs.filter(pl.col("mismatches") > 0)
    bad_ops = operands.filter(pl.col("mismatches") > 0)
    passed = bad_out.height == 0 and bad_ops.height == 0
    if passed:
        names = ", ".join(outputs["tensor"].to_list())
        message = (f"check passed: {names} within {tolerance:g} x max|expected| of the op-by-op reference "
                   f"(max abs error {max_abs:.6g} against the host reference, {max_exact:.6g} against the exact "
                   f"model; "
                   f"{operands.height} operand checks)")
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
    return CheckResult(passed=passed, max_abs_error=max_abs, max_rel_error=max_rel, max_abs_error_exact=max_exact,
                       message=message,
                       outputs=outputs, worst=worst, operands=operands, wall_seconds=wall, seed=seed, scale=scale,
                       tolerance=tolerance)


__all__ = ["OPERANDS_CHECK_SCHEMA", "OUTPUTS_SCHEMA", "WORST_SCHEMA", "CheckResult", "check", "hardware_error",
           "hardware_errors", "tensor3"]
