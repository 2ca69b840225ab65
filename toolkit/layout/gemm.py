"""One matmul's plan as data: an ``m x n x k`` compute grid and the result grid of its reduced output.

The real compiler writes a GEMM plan ``a x b x c``: row (M) partitions x column
(N) partitions x inner (K) partitions of the kernel-invoking tiles, and a result
grid ``R x C`` saying how the reduced output is scattered over the
K-partition tiles (``4x92x4/16x92``: each of the 4 x 92 cells' output is split
4 ways by rows over its 4 inner-split tiles; a plan written without one gets
the real compiler's default, :data:`DEFAULT_RESULT`, here the same). Shards are balanced and never
need to divide: 729 rows in 4 partitions are 183/182/182/182. Inner-split
cells write FP16 partials that the result tiles reduce (the FP16 reduction).

A :class:`GemmPlan` is the typed value; :func:`parse_plan` reads the text form
and :meth:`GemmPlan.label` writes it. Its fields are :data:`PLAN_FIELDS`
(candidate columns, pins and labels derive from them). Every count of every
plan syntax is read by :func:`read_count` (ASCII digits only).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass

import numpy as np

from toolkit.errors import OptionError

#: a label's shape: the counts are any run of characters but ``x`` / ``/`` / space (read by :func:`read_count`, so
#: a superscript, a non-ASCII digit or an overlong count is refused by name, not by the pattern)
_PLAN = re.compile(r"^\s*([^\sx/]+)\s*x\s*([^\sx/]+)\s*x\s*([^\sx/]+)\s*(?:/\s*([^\sx/]+)\s*x\s*([^\sx/]+))?"
                   r"((?:\s+[\w-]+)*)\s*$")
#: the most partitions (or result pieces) a label's count may say: far above any machine's tiles
MAX_COUNT = 1_000_000
#: the most partials per epoch a ``batched<N>`` word may say (ipu-stack's batch size is a u16)
MAX_BATCH = 65_535
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
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
#: the result grid a plan written without one gets: the real compiler's, every cell's output cut by the kernel's
#: rows over its k inner-split tiles (ipu-stack scripts/mlp-layout-sweep.py writes ``k x 1`` when a plan names no
#: result grid, its "row-distributed results" of docs/MLP_LAYOUT_SWEEP.md; its automatic GEMM candidates cut by
#: the kernel's rows at most rows / row partitions ways, mid/candidates.rs)
DEFAULT_RESULT = "k x 1 along the kernel's rows"


def read_count(text: object, most: int) -> int | None:
    """The one reader of a count in every plan syntax (our labels, ``batched<N>``, ipu-stack's constraint lines,
    the CLI's integer option values): ASCII digits ``0-9`` only, as ipu-stack's ``u16`` / ``u32`` parse reads them.
    None when ``text`` is not such a count (a sign, a superscript ``⁸``, an Arabic-Indic ``٣``: ``str.isdigit``
    accepts them and ``int`` reads some); ``most + 1`` when it says more than ``most`` (a 5,000-digit count is
    never given to ``int``, whose digit limit would raise a ValueError). Callers refuse both by field and value."""
    if not isinstance(text, str) or _DIGITS.fullmatch(text) is None:
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(most)):
        return most + 1
    return min(int(digits), most + 1)


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
    result_cols: int = 0       # one per inner-split tile (0: the real compiler's default, :data:`DEFAULT_RESULT`)
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
        if self.result_cols == 0 and self.result_rows != 1:
            msg = (f"GEMM plan result_rows={self.result_rows} with result_cols=0 (the default result grid): give "
                   f"both pieces counts, or neither")
            raise OptionError(msg, field="result", value=self.result_rows)
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

    def result_split(self, width: int, height: int) -> tuple[int, int]:
        """(rows, cols) pieces of one cell's output of ``height`` rows x ``width`` columns (the narrowest cell's):
        the explicit split, or :data:`DEFAULT_RESULT`: all k pieces along the kernel's rows (the op's rows, or
        its columns when swapped), at most one piece per row."""
        if self.k == 1:
            return 1, 1
        if self.result_cols:
            return self.result_rows, self.result_cols
        if self.swapped:
            return 1, max(1, min(self.k, width))
        return max(1, min(self.k, height)), 1

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
    m, n, k = (_count(text, op, mt.group(i), what) for i, what in ((1, "row"), (2, "column"), (3, "inner")))
    fields: dict[str, object] = {}
    by_word = {w: (f.name, v) for f in LABEL_WORDS for v, w in f.words}
    for word in mt.group(6).split():
        if word in by_word:
            fields[by_word[word][0]] = by_word[word][1]
        elif word == "streamed" or word.startswith("batched"):
            staging = 1 if word == "streamed" else read_count(word.removeprefix("batched"), MAX_BATCH)
            if staging == 0:
                msg = (f"plan for op {op!r} is {text!r}: {word!r} stages no partials per epoch; write 'batched<N>' "
                       f"with N >= 1 ('streamed' is 'batched1'), or drop it to reduce all partials at once")
                raise OptionError(msg, field=f"plans.{op}", value=text)
            if staging is None or staging > MAX_BATCH:
                msg = (f"plan for op {op!r} is {text!r}: {word!r} is not a reduction staging: write 'batched<N>' "
                       f"with N from 1 to {MAX_BATCH} remote partials per epoch in ASCII digits ('streamed' is "
                       f"'batched1'), or drop it to reduce all partials at once")
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
    rr, rc = _count(text, op, mt.group(4), "result row"), _count(text, op, mt.group(5), "result column")
    if rr % m or rc % n or rr == 0 or rc == 0:
        msg = (f"plan for op {op!r} is {text!r}: the result grid {rr}x{rc} must be a multiple of the compute grid's "
               f"{m} rows x {n} columns (each cell's output cut into whole pieces), e.g. '{m}x{n}x{k}/{m * k}x{n}'")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    if rr // m * max(rc // n, 1) > k:
        msg = (f"plan for op {op!r} is {text!r}: the result split {rr // m} x {rc // n} needs more than the k={k} "
               f"inner-split tiles of a cell; e.g. '{m}x{n}x{k}/{m * k}x{n}' splits each cell by rows")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    return _plan(text, op, m=m, n=n, k=k, result_rows=rr // m, result_cols=rc // n, **fields)


def _count(text: str, op: str, value: str, what: str) -> int:
    """One count of a label, read by :func:`read_count`; anything else is refused naming the count."""
    n = read_count(value, MAX_COUNT)
    if n is None or n > MAX_COUNT:
        why = ("is more than the most a label may say" if n is not None else
               "is not a count: write it in ASCII digits 0-9")
        msg = (f"plan for op {op!r} is {text!r}: the {what} count {value[:40]!r}{'...' if len(value) > 40 else ''} "
               f"{why} (at most {MAX_COUNT:,}), e.g. '4x92x4' or '4x92x4/16x92'")
        raise OptionError(msg, field=f"plans.{op}", value=text)
    return n


def _plan(text: str, op: str, **fields) -> GemmPlan:
    try:
        return GemmPlan(**fields)
    except OptionError as exc:
        raise OptionError(f"plan for op {op!r} is {text!r}: {exc}", field=f"plans.{op}", value=text) from None


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
    "DEFAULT_RESULT",
    "LABEL_WORDS",
    "MAX_BATCH",
    "MAX_COUNT",
    "MEMORY_CLASSES",
    "ORIENTATIONS",
    "PLAN_FIELDS",
    "TILE_ORDERS",
    "WEIGHT_STORES",
    "GemmPlan",
    "balanced_bounds",
    "parse_plan",
    "read_count",
    "sub_bounds",
]
