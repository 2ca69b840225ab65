"""``verify_schedule``: independent checks of a schedule's tables.

Object and command ids are dense, so every check is a numpy gather over all
rows at once. Checks, each reporting its offending rows:

1. every command operand and every transfer endpoint (source, destination,
   staging) is an object on that tile;
2. no object is used outside its lifetime;
3. every object a command reads is complete before it runs: resident (weight,
   graph input), written by an earlier command, or filled by transfers of
   earlier phases and copies of the same phase;
4. transfer and copy bytes into each operand panel add up to its size;
5. every transfer's source object holds the slice it sends (same tensor, the
   slice inside the object's rectangle) and was written before the transfer.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import InvalidIRError

NEVER = np.iinfo(np.int64).max


def _fail(msg: str, frame: pl.DataFrame, bad: np.ndarray) -> None:
    if bad.any():
        rows = frame.filter(pl.Series(bad))
        raise InvalidIRError(f"verify_schedule: {msg} ({rows.height} rows)", rows=rows)


def _col(df: pl.DataFrame, name: str) -> np.ndarray:
    return df[name].to_numpy()


def verify_schedule(s, target=None) -> None:
    """Raise :class:`InvalidIRError` when the schedule breaks an invariant.

    With ``target``, staging objects must also hold what they receive in whole
    words (up to the staging window).
    """
    objs = s.objects.sort("object_id")
    n = objs.height
    if n and not np.array_equal(_col(objs, "object_id"), np.arange(n)):
        raise InvalidIRError("verify_schedule: object ids are not dense 0..n-1")
    o_tile, o_first, o_last = _col(objs, "tile"), _col(objs, "first"), _col(objs, "last")
    o_size = _col(objs, "size_bytes")
    resident = ((objs["kind"] == "weight") | (objs["first"] == 0)).to_numpy()

    cmds = s.commands.sort("command_id")
    c_phase, c_tile = _col(cmds, "phase"), _col(cmds, "tile")
    c_copy = (cmds["kernel"] == "copy").to_numpy()
    op = s.operands
    oc, oo = _col(op, "command_id"), _col(op, "object_id")
    _fail("operand object missing", op, (oo < 0) | (oo >= n))
    phase, tile = c_phase[oc], c_tile[oc]
    _fail("operand object on another tile", op, o_tile[oo] != tile)
    _fail("operand used outside its lifetime", op.with_columns(phase=phase, first=o_first[oo], last=o_last[oo]),
          (phase < o_first[oo]) | (phase > o_last[oo]))

    tr = s.transfers
    t_phase = _col(tr, "phase")
    if tr.height:
        key = _col(tr, "transfer_id").astype(np.int64) * (int(_col(tr, "destination").max()) + 1) + _col(
            tr, "destination")
        _, first, counts = np.unique(key, return_index=True, return_counts=True)
        dup = np.zeros(tr.height, dtype=bool)
        dup[first[counts > 1]] = True
        _fail("a transfer lists one destination twice", tr, dup)
    for col, end in (("src_object", "source"), ("dst_object", "destination"), ("staging_object", "destination")):
        ids = _col(tr, col)
        _fail(f"transfer {col} missing", tr, (ids < 0) | (ids >= n))
        _fail(f"transfer {col} on another tile than its {end}", tr, o_tile[ids] != _col(tr, end))
        _fail(f"transfer {col} used outside its lifetime", tr, (t_phase < o_first[ids]) | (t_phase > o_last[ids]))

    if target is not None and tr.height:   # a receive stages whole words: an odd half-word still takes a word
        so = _col(tr, "staging_object")
        staged = so >= 0
        wb = target.word_bytes
        need = np.bincount(so[staged], weights=-(-_col(tr, "size_bytes")[staged] // wb) * wb, minlength=n)
        short = np.zeros(tr.height, dtype=bool)
        short[staged] = o_size[so[staged]] < np.minimum(need[so[staged]], target.staging_window_bytes)
        _fail("staging object smaller than the words it receives", tr.with_columns(
            staging_bytes=pl.Series(o_size[np.maximum(so, 0)])), short)

    # the first phase at which each object holds complete data
    is_out = (op["role"] == "out").to_numpy()
    ready = np.full(n, NEVER, dtype=np.int64)
    ready[resident] = -1   # resident (weights, graph inputs) before the first phase: a phase-0 copy may read them
    np.minimum.at(ready, oo[is_out], phase[is_out].astype(np.int64))
    filled_at = np.full(n, -1, dtype=np.int64)
    np.maximum.at(filled_at, _col(tr, "dst_object"), t_phase.astype(np.int64))
    has_fill = filled_at >= 0
    ready[has_fill] = np.minimum(ready[has_fill], filled_at[has_fill])
    reads = ~is_out
    copy_read = reads & c_copy[oc]
    kernel_read = reads & ~c_copy[oc]
    r = ready[oo]
    view = op.with_columns(phase=phase, ready=pl.Series(np.where(r == NEVER, -1, r)))
    _fail("command reads an object nothing wrote", view, reads & (r == NEVER))
    _fail("command reads an object written only later", view, kernel_read & (r != NEVER) & (r > phase))
    _fail("copy reads an object written in or after its phase", view, copy_read & (r != NEVER) & (r >= phase))

    # panels filled by transfers and copies must add up exactly
    seg = s.segments.sort("object_id")
    seg_ids = _col(seg, "object_id")
    elements = np.zeros(n, dtype=np.int64)
    rect = {k: np.zeros(n, dtype=np.int64) for k in ("g0", "g1", "r0", "r1", "c0", "c1")}
    seg_tensor = np.full(n, -1, dtype=np.int64)
    for k in rect:
        rect[k][seg_ids] = _col(seg, k)
    seg_tensor[seg_ids] = _col(seg, "tensor_id")
    elements[seg_ids] = (rect["g1"] - rect["g0"])[seg_ids] * (rect["r1"] - rect["r0"])[seg_ids] * (
        rect["c1"] - rect["c0"])[seg_ids]
    elem_bytes = np.where(elements > 0, o_size // np.maximum(elements, 1), 0)
    got = np.bincount(_col(tr, "dst_object"), weights=_col(tr, "size_bytes"), minlength=n).astype(np.int64)
    copy_out = is_out & c_copy[oc]
    c_elems = (_col(cmds, "rows") * _col(cmds, "cols") * _col(cmds, "groups"))[oc[copy_out]]
    got += np.bincount(oo[copy_out], weights=c_elems * elem_bytes[oo[copy_out]], minlength=n).astype(np.int64)
    target = has_fill | np.isin(np.arange(n), oo[copy_out])
    bad = target & (got != o_size)
    _fail("operand panel not filled exactly by its transfers and copies", objs.with_columns(filled_bytes=got), bad)

    # sources hold what they send, and hold it before the transfer
    if tr.height:
        sl = s.slices
        if not (np.array_equal(_col(sl, "transfer_id"), _col(tr, "transfer_id"))
                and np.array_equal(_col(sl, "destination"), _col(tr, "destination"))):
            raise InvalidIRError("verify_schedule: slices are not row-aligned with transfers")
        src = _col(tr, "src_object")
        inside = np.ones(tr.height, dtype=bool)
        for lo, hi in (("g0", "g1"), ("r0", "r1"), ("c0", "c1")):
            inside &= (_col(sl, lo) >= rect[lo][src]) & (_col(sl, hi) <= rect[hi][src])
        _fail("transfer source does not hold the slice it sends", tr,
              (seg_tensor[src] != _col(tr, "tensor_id")) | ~inside)
        _fail("transfer sends data before its source is written", tr, ready[src] >= t_phase)
