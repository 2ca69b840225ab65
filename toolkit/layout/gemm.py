"""One matmul's plan as data: an ``m x n x k`` compute grid and the result grid of its reduced output.

The real compiler writes a GEMM plan ``a x b x c``: row (M) partitions x column
(N) partitions x inner (K) partitions of the kernel-invoking tiles, and a result
grid ``R x C`` saying how the reduced output is scattered over the
K-partition tiles (``4x92x4/16x92``: each of the 4 x 92 cells' output is split
4 ways by rows over its 4 inner-split tiles). Shards are balanced and never
need to divide: 729 rows in 4 partitions are 183/182/182/182. Inner-split
cells write FP16 partials that the result tiles reduce (the FP16 reduction).

A :class:`GemmPlan` is the typed value; :func:`parse_plan` reads the text form
and :meth:`GemmPlan.label` writes it. Its fields are :data:`PLAN_FIELDS`
(candidate columns, pins and labels derive from them).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass

import numpy as np

from toolkit.errors import OptionError

_PLAN = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*(?:/\s*(\d+)\s*x\s*(\d+))?((?:\s+[\w-]+)*)\s*$")
#: how a plan keeps its weight blocks: ``resident`` (every row partition holds its (inner, column) block) or
#: ``gathered`` (each block stored once, cut by inner rows over the m row-partition tiles, all-gathered per use)
WEIGHT_STORES = ("resident", "gathered")
#: how a plan's cells are laid out over consecutive tiles: ``columns`` fast (the inner partitions of a cell
#: adjacent, then its column partitions, then row partitions) or ``rows`` fast (row partitions before columns)
TILE_ORDERS = ("columns", "rows")
#: which product the kernel runs (ipu-stack's ORIENTATION, docs/QKV_PREPARATION.md, scripts/mlp-layout-sweep.py):
#: ``normal`` ``A W`` (the weight block is the AMP coefficient, the kernel's rows are the cell's rows) or
#: ``swapped`` ``(W^T A^T)^T`` (the activation panel is the coefficient, the kernel's rows are the cell's columns)
ORIENTATIONS = ("normal", "swapped")
#: the AMP coefficient operand's memory class per op (ipu-stack's MEMORY); ``""``: the layout's weight class
MEMORY_CLASSES = ("interleaved", "standard")


@dataclass(frozen=True, slots=True)
class WordField:
    """One label word field: the GemmPlan field, its default, and the word of every other value."""

    name: str
    default: object
    words: tuple[tuple[object, str], ...]   # (value, word); the default writes no word

    def word(self, value: object) -> str:
        return dict(self.words).get(value, "") if value != self.default else ""


#: the label's words after the grid, in the order they are written: one row per word field (staging is written
#: ``streamed`` / ``batched<N>`` by :func:`_staging_word`)
LABEL_WORDS = (
    WordField("weights", "resident", (("gathered", "gathered"),)),
    WordField("memory", "", tuple((m, m) for m in MEMORY_CLASSES)),
    WordField("orientation", "normal", (("swapped", "swapped"),)),
    WordField("order", "columns", (("rows", "rows-fast"), ("columns", "columns-fast"))),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmPlan:
    """Compute grid ``m x n x k`` (row, column, inner partitions) and the result split of each cell's output."""

    m: int
    n: int
    k: int
    result_rows: int = 1       # each (m, n) cell's reduced output is cut into result_rows x result_cols pieces,
    result_cols: int = 0       # one per inner-split tile (0: by columns over min(k, width / 8) tiles, the default)
    weights: str = "resident"  # WEIGHT_STORES: resident blocks, or stored once over the m row partitions and gathered
    staging: int = 0           # reduction staging: 0 all at once; N >= 1 remote partials per epoch (1: streamed)
    order: str = "columns"     # TILE_ORDERS: columns-fast (the default) or rows-fast over consecutive tiles
    memory: str = ""           # MEMORY_CLASSES: the op's own coefficient memory class ("": the layout's)
    orientation: str = "normal"  # ORIENTATIONS: the kernel runs A W, or the transposed product (swapped)

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "result_rows"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                msg = f"GEMM plan {name}={v!r} must be a positive integer"
                raise OptionError(msg, field=name, value=v)
        if not isinstance(self.result_cols, int) or isinstance(self.result_cols, bool) or self.result_cols < 0:
            msg = f"GEMM plan result_cols={self.result_cols!r} must be a non-negative integer (0: the default)"
            raise OptionError(msg, field="result_cols", value=self.result_cols)
        for name, legal in (("weights", WEIGHT_STORES), ("order", TILE_ORDERS), ("orientation", ORIENTATIONS),
                            ("memory", ("", *MEMORY_CLASSES))):
            v = getattr(self, name)
            if v not in legal:
                close = difflib.get_close_matches(str(v), [x for x in legal if x], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                msg = f"GEMM plan {name}={v!r} must be one of {[x for x in legal if x]}{hint}"
                raise OptionError(msg, field=name, value=v)
        if self.weights == "gathered" and self.m == 1:
            msg = (f"GEMM plan {self.m}x{self.n}x{self.k} gathered: with one row partition every weight block is "
                   f"stored once already; write it without 'gathered', or use m > 1")
            raise OptionError(msg, field="weights", value=self.weights)
        if not isinstance(self.staging, int) or isinstance(self.staging, bool) or self.staging < 0:
            msg = f"GEMM plan staging={self.staging!r} must be 0 (all partials at once) or a positive batch size"
            raise OptionError(msg, field="staging", value=self.staging)
        if self.staging and self.k == 1:
            msg = (f"GEMM plan {self.m}x{self.n}x1 has no inner split, so no partials to stage; drop the staging "
                   f"or split the inner dimension (k > 1)")
            raise OptionError(msg, field="staging", value=self.staging)
        if self.staging and self.staging >= self.k - 1:
            msg = (f"GEMM plan {self.m}x{self.n}x{self.k}: a reduction of {self.k - 1} remote partials in batches "
                   f"of {self.staging} is all partials at once; stage in batches below {self.k - 1}, or not at all")
            raise OptionError(msg, field="staging", value=self.staging)
        if self.result_rows * max(self.result_cols, 1) > self.k:
            msg = (f"GEMM plan {self.label()}: the result split {self.result_rows} x {max(self.result_cols, 1)} "
                   f"needs more than the k={self.k} inner-split tiles of a cell")
            raise OptionError(msg, field="result", value=self.label())

    @property
    def tiles(self) -> int:
        return self.m * self.n * self.k

    @property
    def swapped(self) -> bool:
        return self.orientation == "swapped"

    def result_split(self, width: int) -> tuple[int, int]:
        """(rows, cols) pieces of one cell's output of ``width`` columns: the explicit split or the default."""
        if self.k == 1:
            return 1, 1
        if self.result_cols:
            return self.result_rows, self.result_cols
        return self.result_rows, max(1, min(self.k // self.result_rows, width // 8))

    def label(self) -> str:
        """The text form: ``4x92x4``, with ``/R x C`` when the result grid is given, then the words of
        :data:`LABEL_WORDS` that differ from their defaults and the staging (``4x92x4/16x92 gathered standard
        swapped rows-fast batched2``)."""
        base = f"{self.m}x{self.n}x{self.k}"
        if self.result_rows != 1 or self.result_cols != 0:
            base = f"{base}/{self.m * self.result_rows}x{self.n * max(self.result_cols, 1)}"
        words = [f.word(getattr(self, f.name)) for f in LABEL_WORDS] + [_staging_word(self.staging)]
        return " ".join([base, *(w for w in words if w)])


PLAN_FIELDS = tuple(f.name for f in dataclasses.fields(GemmPlan))


def _staging_word(staging: int) -> str:
    return "" if not staging else "streamed" if staging == 1 else f"batched{staging}"


def _label_words() -> str:
    return ", ".join(repr(w) for f in LABEL_WORDS for _, w in f.words)


def parse_plan(text: str, *, op: str = "?") -> GemmPlan:
    """``"4x92x4"``, ``"4x92x4/16x92"`` (compute grid / result grid), either followed by words of
    :data:`LABEL_WORDS` (``gathered``, ``standard`` / ``interleaved``, ``swapped``, ``rows-fast``) and by
    ``streamed`` or ``batched<N>`` (N >= 1: the partials reduced one or N per epoch), as a :class:`GemmPlan`."""
    if isinstance(text, GemmPlan):
        return text
    mt = _PLAN.match(text) if isinstance(text, str) else None
    if mt is None:
        msg = (f"plan for op {op!r} is {text!r}; write 'MxNxK' (row x column x inner partitions, e.g. '4x92x4') "
               f"or 'MxNxK/RxC' with the result grid (e.g. '4x92x4/16x92'), optionally followed by ' gathered'")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    m, n, k = (int(mt.group(i)) for i in (1, 2, 3))
    fields: dict[str, object] = {}
    by_word = {w: (f.name, v) for f in LABEL_WORDS for v, w in f.words}
    for word in mt.group(6).split():
        batched = re.fullmatch(r"batched(\d+)", word)
        if word in by_word:
            fields[by_word[word][0]] = by_word[word][1]
        elif word == "streamed" or batched:
            staging = 1 if word == "streamed" else int(batched.group(1))
            if staging < 1:
                msg = (f"plan for op {op!r} is {text!r}: {word!r} stages no partials per epoch; write 'batched<N>' "
                       f"with N >= 1 ('streamed' is 'batched1'), or drop it to reduce all partials at once")
                raise OptionError(msg, field=f"plans.{op}", value=text)
            fields["staging"] = staging
        else:
            close = difflib.get_close_matches(word, [*by_word, "streamed", "batched2"], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            msg = (f"plan for op {op!r} is {text!r}: {word!r} is neither a weight store ({list(WEIGHT_STORES)}), "
                   f"a reduction staging ('streamed', 'batched<N>') nor a tile order ('rows-fast', 'columns-fast'), "
                   f"a memory class ({list(MEMORY_CLASSES)}) or an orientation ('swapped'){hint}")
            raise OptionError(msg, field=f"plans.{op}", value=text)
    if 0 in (m, n, k):
        msg = f"plan for op {op!r} is {text!r}: partition counts must be positive"
        raise OptionError(msg, field=f"plans.{op}", value=text)
    if mt.group(4) is None:
        return _plan(text, op, m=m, n=n, k=k, **fields)
    rr, rc = int(mt.group(4)), int(mt.group(5))
    if rr % m or rc % n or rr == 0 or rc == 0:
        msg = (f"plan for op {op!r} is {text!r}: the result grid {rr}x{rc} must be a multiple of the compute grid's "
               f"{m} rows x {n} columns (each cell's output cut into whole pieces), e.g. '{m}x{n}x{k}/{m * k}x{n}'")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    if rr // m * max(rc // n, 1) > k:
        msg = (f"plan for op {op!r} is {text!r}: the result split {rr // m} x {rc // n} needs more than the k={k} "
               f"inner-split tiles of a cell; e.g. '{m}x{n}x{k}/{m * k}x{n}' splits each cell by rows")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    return _plan(text, op, m=m, n=n, k=k, result_rows=rr // m, result_cols=rc // n, **fields)


def _plan(text: str, op: str, **fields) -> GemmPlan:
    try:
        return GemmPlan(**fields)
    except OptionError as exc:
        raise OptionError(f"plan for op {op!r} is {text!r}: {exc}", field=f"plans.{op}", value=text) from None


# -- ipu-stack's constraint line: the second codec of a GemmPlan ------------------------------------------------
#: the fields of ipu-stack's ``--gemm-plan-constraint`` line, in order (``crates/ipu-tests/src/main.rs``,
#: ``parse_gemm_plan_constraint``): source op number, compute grid, result grid (each compute cell's output cut
#: RR x RC), output column block, weight memory class, orientation, reduction staging, local weight staging
CONSTRAINT_FIELDS = ("OP", "RxCxK", "RRxRC", "BLOCK", "MEMORY", "ORIENTATION", "REDUCTION", "LOCAL")
#: ipu-stack's local weight stagings; toolkit reads local operands in place (``direct``) only
LOCAL_STAGINGS = ("direct",)
#: ipu-stack parses grid and result counts as u16
_U16 = 65535


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


def _counts(text: str, name: str, value: str, parts: int) -> tuple[int, ...]:
    items = value.split("x")
    if len(items) != parts or not all(i.isdigit() for i in items):
        padded = (items + ["1"] * parts)[:parts]
        legal = "x".join(str(max(1, min(int(i), _U16))) if i.isdigit() else "1" for i in padded)
        raise _refuse(text, name, value, f"write {parts} counts joined by 'x'", legal)
    counts = tuple(int(i) for i in items)
    if any(c < 1 or c > _U16 for c in counts):
        legal = "x".join(str(max(1, min(c, _U16))) for c in counts)
        raise _refuse(text, name, value, f"every count must be between 1 and {_U16}", legal)
    return counts


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
    if not op.isdigit():
        raise _refuse(text, "OP", op, "the op number is a non-negative integer (ipu-stack's operation index)", "0")
    grid_c = _counts(text, "RxCxK", grid, 3)
    result_c = _counts(text, "RRxRC", result, 2)
    if not block.isdigit() or int(block) < 1:
        raise _refuse(text, "BLOCK", block, "the output column block is a positive number of columns", "16")
    memory = _word(text, "MEMORY", memory, MEMORY_CLASSES, "the weight memory class is standard or interleaved")
    orientation = _word(text, "ORIENTATION", orientation, ORIENTATIONS, "the orientation is normal or swapped")
    staging = _reduction(text, reduction)
    local = _word(text, "LOCAL", local, LOCAL_STAGINGS,
                  "toolkit reads local weights in place ('direct'); ipu-stack's 'match-remote' is not modelled")
    return Constraint(op=int(op), grid=grid_c, result=result_c, block=int(block), memory=memory,
                      orientation=orientation, staging=staging, local=local, text=text)


def _reduction(text: str, value: str) -> int:
    """``complete`` 0, ``streamed`` 1, ``batch-N`` N remote partials per epoch (``batch-1`` is one per epoch, the
    same program here as ``streamed``, and is written back as ``streamed``)."""
    if value == "complete":
        return 0
    if value == "streamed":
        return 1
    if value.startswith("batch-"):
        n = value.removeprefix("batch-")
        if n.isdigit() and 1 <= int(n) <= _U16:
            return int(n)
        raise _refuse(text, "REDUCTION", value, "batch-N needs N between 1 and 65535 remote partials per epoch",
                      "batch-1")
    close = difflib.get_close_matches(value, ("complete", "streamed", "batch-2"), n=1, cutoff=0.0)
    raise _refuse(text, "REDUCTION", value, "the reduction is complete, streamed or batch-N", close[0])


def column_block(extent: int, parts: int) -> int:
    """ipu-stack's output column block: the widest shard of ``extent`` columns over ``parts`` partitions, in
    16-column AMP groups (``16 ceil(extent / 16 parts)``; scripts/mlp-layout-sweep.py)."""
    return 16 * -(-extent // (16 * parts))


def constraint_plan(c: Constraint, rows: int, cols: int, op: str = "?") -> GemmPlan:
    """The :class:`GemmPlan` of a constraint line for an op of ``rows x cols`` output: the grid and result grid
    turned to the op's orientation (swapped: R splits the columns), the block checked against the grid."""
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
    plan = GemmPlan(m=m, n=n, k=k, staging=c.staging, memory=c.memory, orientation=c.orientation)
    if k > 1:   # the default split (by columns over min(k, width / 8) tiles) is written as the default
        width = int(np.diff(balanced_bounds(cols, n)).min())
        given = dataclasses.replace(plan, result_rows=res_rows, result_cols=res_cols)
        plan = given if dataclasses.replace(plan, result_rows=res_rows).result_split(width) != (
            res_rows, res_cols) else dataclasses.replace(plan, result_rows=res_rows)
    return plan


def write_constraint(number: int, plan: GemmPlan, rows: int, cols: int, memory: str) -> tuple[str, list[str]]:
    """ipu-stack's line for ``plan`` as op ``number`` of ``rows x cols`` output (``memory``: the class the op's
    coefficient reads when the plan names none), and the plan fields the line cannot say."""
    swapped = plan.swapped
    width = int(np.diff(balanced_bounds(cols, plan.n)).min())
    rr, rc = plan.result_split(width)
    grid = (plan.n, plan.m, plan.k) if swapped else (plan.m, plan.n, plan.k)
    result = (rc, rr) if swapped else (rr, rc)
    block = column_block(rows, plan.m) if swapped else column_block(cols, plan.n)
    reduction = "complete" if not plan.staging else "streamed" if plan.staging == 1 else f"batch-{plan.staging}"
    line = (f"{number}:{'x'.join(map(str, grid))}:{'x'.join(map(str, result))}:{block}:{plan.memory or memory}:"
            f"{plan.orientation}:{reduction}:direct")
    lost = [f"{name}={getattr(plan, name)}" for name, default in (("weights", "resident"), ("order", "columns"))
            if getattr(plan, name) != default]
    return line, lost


def balanced_bounds(extent: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` balanced shards of ``extent`` (the first ``extent % parts`` one longer)."""
    parts = max(1, min(parts, extent))
    i = np.arange(parts + 1, dtype=np.int64)
    return i * (extent // parts) + np.minimum(i, extent % parts)


def sub_bounds(bounds: np.ndarray, parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut every shard of ``bounds`` into ``parts`` balanced pieces: (piece bounds, piece index, shard of each piece).

    A shard shorter than ``parts`` gives as many pieces as it has elements; the
    piece index says which of the ``parts`` result tiles holds each piece.
    """
    starts, ends = bounds[:-1], bounds[1:]
    lens = ends - starts
    per = np.minimum(parts, np.maximum(lens, 1))
    shard = np.repeat(np.arange(len(lens)), per)
    j = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)
    lo = starts[shard] + (j * lens[shard]) // per[shard]
    return np.append(lo, bounds[-1]), j, shard


__all__ = [
    "CONSTRAINT_FIELDS",
    "LABEL_WORDS",
    "LOCAL_STAGINGS",
    "MEMORY_CLASSES",
    "ORIENTATIONS",
    "PLAN_FIELDS",
    "TILE_ORDERS",
    "WEIGHT_STORES",
    "Constraint",
    "GemmPlan",
    "balanced_bounds",
    "column_block",
    "constraint_plan",
    "parse_plan",
    "read_constraint",
    "sub_bounds",
    "write_constraint",
]
