"""A sweep point file written under the summary's old names (``est_cycles`` for the lowered estimate, and the like)
reads back under today's, each figure where it belongs; a file holding an old name and its new one both is named."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from toolkit.errors import FormatError
from toolkit.sweep import SWEEP_SCHEMA, load_sweep
from toolkit.sweep.rows import SUMMARY_COLUMNS, to_frame
from toolkit.sweep.store import point_path
from toolkit.tables import SUMMARY_RENAMED, SUMMARY_SCHEMA


def _row(point_id: str, *, placed: bool) -> dict:
    return {"point_id": point_id, "workload": "mlp-small-repeat", "batch": 1, "blocks": 3, "status": "ok",
            "lowered_cycles": 73_950, "lowered_compute_cycles": 55_215, "lowered_exchange_cycles": 13_335,
            "lowered_sync_cycles": 5_400, "lowered_launches": 48, "kernel_calls": 60, "exchange_steps": 66,
            "peak_sram_bytes": 48_556 if placed else None, "screen_peak_bytes": 47_000, "tiles_used": 64,
            "placed": placed, "cropped_cycles": 74_550, "finished_at": datetime.now(UTC)}


def _write_old(out, row: dict, *, extra: dict | None = None) -> None:
    """``row`` as a point file of the toolkit before the renames: the old names, no screen peak, and (as it
    recorded then) the objects that placed of a point that did not place."""
    old = {v: k for k, v in SUMMARY_RENAMED.items()}
    df = to_frame([row]).drop("screen_peak_bytes").rename(old)
    if not row["placed"]:
        df = df.with_columns(pl.lit(30_000, pl.Int64).alias("peak_sram_bytes"))
    if extra:
        df = df.with_columns(**{k: pl.lit(v) for k, v in extra.items()})
    df.write_parquet(point_path(out, row["point_id"]))


def test_the_sweep_keeps_the_summary_s_columns_under_its_names_and_dtypes() -> None:
    assert all(SWEEP_SCHEMA[c] == SUMMARY_SCHEMA[c] for c in SUMMARY_COLUMNS)
    assert not set(SUMMARY_RENAMED) & set(SWEEP_SCHEMA)


def test_an_old_point_file_reads_back_under_today_s_names(tmp_path) -> None:
    out = tmp_path / "old"
    out.mkdir()
    placed, unplaced = _row("a" * 16, placed=True), _row("b" * 16, placed=False)
    _write_old(out, placed)
    _write_old(out, unplaced)
    back = load_sweep(out)
    assert dict(back.schema) == SWEEP_SCHEMA
    rows = {r["point_id"]: r for r in back.iter_rows(named=True)}
    for old, new in SUMMARY_RENAMED.items():
        assert rows[placed["point_id"]][new] == placed[new], (old, new)
    assert rows[placed["point_id"]]["peak_sram_bytes"] == 48_556
    # a point that did not place has no placed peak (the old file's counted only the objects that placed), and
    # the screen's was not recorded then
    assert rows[unplaced["point_id"]]["peak_sram_bytes"] is None
    assert back["screen_peak_bytes"].null_count() == 2


def test_a_point_file_with_an_old_name_and_its_new_one_is_named(tmp_path) -> None:
    out = tmp_path / "both"
    out.mkdir()
    row = _row("c" * 16, placed=True)
    _write_old(out, row, extra={"lowered_cycles": 1})
    with pytest.raises(FormatError, match=r"point-c{16}\.parquet: holds both 'est_cycles' .* and 'lowered_cycles'"):
        load_sweep(out)
