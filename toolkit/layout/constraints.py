"""ipu-stack's ``--gemm-plan-constraint`` line: the second codec of a :class:`~toolkit.layout.gemm.GemmPlan`.

:func:`read_constraint` parses one line as ipu-stack prints it
(``0:4x92x4:4x1:48:interleaved:normal:complete:direct``), refusing every bad
field by name with the closest legal value; :func:`constraint_plan` turns it
into the plan of one op of known shape, the plan ipu-stack builds from it (its
weight store by :func:`stored_weights`, its result grid), and
:func:`write_constraint` writes a plan back, naming the fields a line cannot
say. Op numbers are resolved by :mod:`toolkit.layout.ipu_stack`.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

import numpy as np

from toolkit.errors import OptionError
from toolkit.layout.gemm import MEMORY_CLASSES, ORIENTATIONS, GemmPlan, balanced_bounds, parse_plan, read_count
from toolkit.options import CONSTRAINT_KEY

#: the fields of ipu-stack's ``--gemm-plan-constraint`` line, in order (``crates/ipu-tests/src/main.rs``,
#: ``parse_gemm_plan_constraint``): source op number, compute grid, result grid (each compute cell's output cut
#: RR x RC), output column block, weight memory class, orientation, reduction staging, local weight staging
CONSTRAINT_FIELDS = ("OP", "RxCxK", "RRxRC", "BLOCK", "MEMORY", "ORIENTATION", "REDUCTION", "LOCAL")
#: ipu-stack's local weight stagings; toolkit reads local operands in place (``direct``) only
LOCAL_STAGINGS = ("direct",)
#: ipu-stack parses grid and result counts and batch sizes as u16, the op number and the column block as u32
_U16 = 65535
_U32 = 4_294_967_295


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint line as written: grid and result grid in the kernel's orientation (swapped: R splits the
    op's columns, C its rows), the output column block, and the word fields."""

    op: int
    grid: tuple[int, int, int]
    result: tuple[int, int]
    block: int
    memory: str
    orientation: str
    staging: int
    local: str
    text: str


def _refuse(text: str, name: str, value: str, why: str, legal: str | None = None) -> OptionError:
    hint = f"; the closest legal value is {legal!r}" if legal else ""
    msg = (f"constraint {text!r}: field {name} is {value!r}: {why}{hint} "
           f"(fields {':'.join(CONSTRAINT_FIELDS)}, e.g. '0:4x92x4:4x1:48:interleaved:normal:complete:direct')")
    return OptionError(msg, field=f"plans.{name}", value=text)


def _shown(value: str) -> str:
    return value if len(value) <= 40 else f"{value[:32]}... ({len(value):,} characters)"


def _counts(text: str, name: str, value: str, parts: int) -> tuple[int, ...]:
    items = value.split("x")
    counts = [read_count(i, _U16) for i in items]
    if len(items) != parts or None in counts:
        padded = ([c for c in counts] + [1] * parts)[:parts]
        legal = "x".join(str(max(1, min(c, _U16))) if c is not None else "1" for c in padded)
        raise _refuse(text, name, _shown(value), f"write {parts} counts in ASCII digits joined by 'x'", legal)
    if any(c < 1 or c > _U16 for c in counts):
        legal = "x".join(str(max(1, min(c, _U16))) for c in counts)
        raise _refuse(text, name, _shown(value), f"every count must be between 1 and {_U16}", legal)
    return tuple(counts)


def _word(text: str, name: str, value: str, legal: tuple[str, ...], why: str) -> str:
    if value in legal:
        return value
    close = difflib.get_close_matches(value, legal, n=1, cutoff=0.0)
    raise _refuse(text, name, value, why, close[0] if close else legal[0])


def read_constraint(text: str) -> Constraint:
    """Read one ``OP:RxCxK:RRxRC:BLOCK:MEMORY:ORIENTATION:REDUCTION:LOCAL`` line exactly as ipu-stack prints it
    (``--gemm-plan-constraint`` may precede it). Every field is checked by name; a bad one is refused with the
    closest legal value."""
    if not isinstance(text, str):
        msg = f"constraint {text!r} must be a string 'OP:RxCxK:RRxRC:BLOCK:MEMORY:ORIENTATION:REDUCTION:LOCAL'"
        raise OptionError(msg, field="plans", value=text)
    line = text.strip().removeprefix("--gemm-plan-constraint").strip().lstrip("=").strip()
    parts = line.split(":")
    if len(parts) != len(CONSTRAINT_FIELDS):
        msg = (f"constraint {text!r} has {len(parts)} fields; ipu-stack's line has {len(CONSTRAINT_FIELDS)}: "
               f"{':'.join(CONSTRAINT_FIELDS)}, e.g. '0:4x92x4:4x1:48:interleaved:normal:complete:direct'")
        raise OptionError(msg, field="plans", value=text)
    op, grid, result, block, memory, orientation, reduction, local = (p.strip() for p in parts)
    number = read_count(op, _U32)
    if number is None or number > _U32:
        raise _refuse(text, "OP", _shown(op), f"the op number is an integer from 0 to {_U32} in ASCII digits "
                      f"(ipu-stack's operation index)", "0")
    grid_c = _counts(text, "RxCxK", grid, 3)
    result_c = _counts(text, "RRxRC", result, 2)
    columns = read_count(block, _U32)
    if columns is None or not 1 <= columns <= _U32:
        raise _refuse(text, "BLOCK", _shown(block), f"the output column block is a number of columns from 1 to "
                      f"{_U32} in ASCII digits", "16")
    memory = _word(text, "MEMORY", memory, MEMORY_CLASSES, "the weight memory class is standard or interleaved")
    orientation = _word(text, "ORIENTATION", orientation, ORIENTATIONS, "the orientation is normal or swapped")
    staging = _reduction(text, reduction)
    local = _word(text, "LOCAL", local, LOCAL_STAGINGS,
                  "toolkit reads local weights in place ('direct'); ipu-stack's 'match-remote' is not modelled")
    return Constraint(op=number, grid=grid_c, result=result_c, block=columns, memory=memory,
                      orientation=orientation, staging=staging, local=local, text=text)


def _reduction(text: str, value: str) -> int:
    """``complete`` 0, ``streamed`` 1, ``batch-N`` N remote partials per epoch (``batch-1`` is one per epoch, the
    same program here as ``streamed``, and is written back as ``streamed``)."""
    if value == "complete":
        return 0
    if value == "streamed":
        return 1
    if value.startswith("batch-"):
        n = read_count(value.removeprefix("batch-"), _U16)
        if n is not None and 1 <= n <= _U16:
            return n
        raise _refuse(text, "REDUCTION", _shown(value), f"batch-N needs N between 1 and {_U16} remote partials per "
                      f"epoch in ASCII digits", "batch-1")
    close = difflib.get_close_matches(value, ("complete", "streamed", "batch-2"), n=1, cutoff=0.0)
    raise _refuse(text, "REDUCTION", value, "the reduction is complete, streamed or batch-N", close[0])


def column_block(extent: int, parts: int) -> int:
    """ipu-stack's output column block: the widest shard of ``extent`` columns over ``parts`` partitions, in
    16-column AMP groups (``16 ceil(extent / 16 parts)``; scripts/mlp-layout-sweep.py)."""
    return 16 * -(-extent // (16 * parts))


def stored_weights(memory: str, orientation: str, m: int) -> str:
    """How ipu-stack stores the weights of a line's plan, as a :data:`~toolkit.layout.gemm.WEIGHT_STORES` word.

    Normal orientation, interleaved class: the weight operand's requirement is its block-major compute storage
    made of one copy over the column x inner partitions (``Layout::block_major_matrix_storage`` with ``copies``
    1 in ``mid/candidates.rs``; its compact alternative, ``independent_parameter_storage``, is also one copy), so
    with more than one row partition the block a compute tile needs is stored once and the other row partitions
    receive it before each use: ``gathered`` (the alternatives' up projection, its first exchange of 7,048
    cycles, one 288 x 48 block per tile, docs/MLP_LAYOUT_ALTERNATIVES.md). Standard class: the weights are the
    op's input storage, which ipu-stack materializes into interleaved compute storage on the compute tiles
    (docs/MLP_LAYOUT_ALTERNATIVES.md, "down weights use standard input storage, materialized into interleaved
    compute storage"; docs/MLP_LAYOUT_SWEEP.md): ``resident``. Swapped: the weight is the kernel's streamed left
    operand in the compute grid (``amp_transposed_left_parallel_grid``), not block-major storage, and has no
    compact alternative: ``resident``. One row partition: every block is stored once already: ``resident``."""
    return "gathered" if orientation == "normal" and memory == "interleaved" and m > 1 else "resident"


def constraint_plan(c: Constraint, rows: int, cols: int, op: str = "?") -> GemmPlan:
    """The :class:`GemmPlan` of a constraint line for an op of ``rows x cols`` output: the grid and result grid
    turned to the op's orientation (swapped: R splits the columns), the block checked against the grid, and the
    weights stored as ipu-stack stores them for the line (:func:`stored_weights`). A result grid equal to the
    default (:data:`~toolkit.layout.gemm.DEFAULT_RESULT`) is written as the default."""
    r, cc, k = c.grid
    rr, rc = c.result
    swapped = c.orientation == "swapped"
    m, n = (cc, r) if swapped else (r, cc)
    res_rows, res_cols = (rc, rr) if swapped else (rr, rc)
    extent, parts = (rows, m) if swapped else (cols, n)
    if m > rows or n > cols:
        side, count, most = ("rows", m, rows) if m > rows else ("columns", n, cols)
        fit = f"{min(r, cols) if swapped else min(r, rows)}x{min(cc, rows) if swapped else min(cc, cols)}x{k}"
        raise _refuse(c.text, "RxCxK", "x".join(map(str, c.grid)),
                      f"op {op!r} has {most} {side}, fewer than the {count} partitions", fit)
    legal_block = column_block(extent, parts)
    if c.block != legal_block:
        raise _refuse(c.text, "BLOCK", str(c.block),
                      f"{parts} partitions of op {op!r}'s {extent} {'rows' if swapped else 'columns'} give blocks "
                      f"of {legal_block}", str(legal_block))
    if k == 1 and (rr, rc) != (1, 1):
        raise _refuse(c.text, "RRxRC", f"{rr}x{rc}", "without an inner split each result stays whole", "1x1")
    if rr * rc > k:
        raise _refuse(c.text, "RRxRC", f"{rr}x{rc}", f"a result split needs at most the k={k} inner-split tiles",
                      f"{min(rr, k)}x1")
    if c.staging and c.staging >= k - 1:
        raise _refuse(c.text, "REDUCTION", f"batch-{c.staging}" if c.staging > 1 else "streamed",
                      f"k={k} leaves {k - 1} remote partials, so batches of {c.staging} are all of them at once",
                      "complete")
    plan = GemmPlan(m=m, n=n, k=k, staging=c.staging, memory=c.memory, orientation=c.orientation,
                    weights=stored_weights(c.memory, c.orientation, m))
    if k > 1 and plan.result_split(*_narrowest(plan, rows, cols)) != (res_rows, res_cols):
        plan = dataclasses.replace(plan, result_rows=res_rows, result_cols=res_cols)
    return plan


def _narrowest(plan: GemmPlan, rows: int, cols: int) -> tuple[int, int]:
    """(width, height) of the plan's narrowest cell, as :meth:`GemmPlan.result_split` takes them."""
    return (int(np.diff(balanced_bounds(cols, plan.n)).min()), int(np.diff(balanced_bounds(rows, plan.m)).min()))


def write_constraint(number: int, plan: GemmPlan, rows: int, cols: int, memory: str) -> tuple[str, list[str]]:
    """ipu-stack's line for ``plan`` as op ``number`` of ``rows x cols`` output (``memory``: the class the op's
    coefficient reads when the plan names none), and the plan fields the line cannot say: a weight store other
    than the one ipu-stack builds from the line (:func:`stored_weights`), a rows-fast tile order."""
    swapped = plan.swapped
    rr, rc = plan.result_split(*_narrowest(plan, rows, cols))
    grid = (plan.n, plan.m, plan.k) if swapped else (plan.m, plan.n, plan.k)
    result = (rc, rr) if swapped else (rr, rc)
    block = column_block(rows, plan.m) if swapped else column_block(cols, plan.n)
    reduction = "complete" if not plan.staging else "streamed" if plan.staging == 1 else f"batch-{plan.staging}"
    line = (f"{number}:{'x'.join(map(str, grid))}:{'x'.join(map(str, result))}:{block}:{plan.memory or memory}:"
            f"{plan.orientation}:{reduction}:direct")
    built = stored_weights(plan.memory or memory, plan.orientation, plan.m)
    lost = [f"{name}={getattr(plan, name)}" for name, default in (("weights", built), ("order", "columns"))
            if getattr(plan, name) != default]
    if plan.weights != built:
        lost[0] += f" (ipu-stack stores this line's weights {built})"
    return line, lost


def check_plan_texts(plans: tuple[tuple[str, str], ...]) -> None:
    """Read every entry of an :class:`~toolkit.options.Options` ``plans`` value as its syntax (an ipu-stack line
    under the constraint key, else our label), before any graph is built: a bad count, word or field is refused
    here by name (a sweep checks every point with it before the first compile). Op names and numbers are
    resolved against the graph later (:func:`toolkit.layout.gemm_search.resolve_pins`)."""
    for key, text in plans:
        if key == CONSTRAINT_KEY:
            read_constraint(text)
        else:
            parse_plan(text, op=key)


__all__ = ["CONSTRAINT_FIELDS", "LOCAL_STAGINGS", "Constraint", "check_plan_texts", "column_block", "constraint_plan",
           "read_constraint", "stored_weights", "write_constraint"]
