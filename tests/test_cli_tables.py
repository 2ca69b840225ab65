"""CLI tables at 80 columns: no line wider than the terminal, no number split, ``--json`` has every row.

Each command is run twice through typer's runner with ``COLUMNS=80``: as a table and as ``--json``; every
integer of the JSON rows shown in the table must appear in the text whole (with its thousands separators),
as one word.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.cli.table import cell, render

PROFILE = Path(__file__).parents[1] / "artifacts" / "joint-placement" / "mlp-single-b1" / "profile.capnp.gz"
runner = CliRunner()


def _words(text: str) -> set[str]:
    return set(re.split(r"[\s|]+", text))


def _run(args: list[str], width: int = 80) -> str:
    r = runner.invoke(app, args, env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    return r.stdout


def _assert_fits(text: str, rows: list[dict], width: int = 80) -> None:
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, f"{len(wide)} lines wider than {width}: {wide[:2]}"
    words = _words(text)
    shown = [v for row in rows for v in row.values() if isinstance(v, int) and not isinstance(v, bool)]
    split = [v for v in shown if cell(v) not in words]
    assert not split, f"numbers not shown whole: {split[:5]}"


@pytest.mark.parametrize("args", [["workloads"], ["graph", "mlp-single-b1"], ["graph", "siglip-so400m"]])
def test_graph_tables_fit_80_columns(args: list[str]) -> None:
    text = _run(args)
    rows = json.loads(_run([*args, "--json"]))
    _assert_fits(text, rows)
    if args == ["workloads"]:   # names are never cut into pieces
        assert {r["name"] for r in rows} <= _words(text)


def test_profile_query_fits_80_columns() -> None:
    for by in ("kernel", "phase"):
        text = _run(["profile", "query", str(PROFILE), "--group-by", by])
        rows = json.loads(_run(["profile", "query", str(PROFILE), "--group-by", by, "--json"]))
        _assert_fits(text, rows)
        assert "busy_cycles" in text and "wall_share" in text
        # the title says whose profile and which clock; a legend says what each number is and its scope
        flat = " ".join(text.split())
        assert "a simulated profile: cycles by" in flat and "cropped as the hardware renderer crops" in flat
        assert "work_cycles: sample cycles summed over tiles" in flat and "busy_cycles: wall-clock cycles" in flat


def test_compile_fits_80_columns_and_says_what_each_number_is() -> None:
    text = _run(["compile", "mlp-single-b1", "-q"])
    summary = json.loads(_run(["compile", "mlp-single-b1", "--json"]))[0]
    numbers = {k: summary[k] for k in ("lowered_cycles", "peak_sram_bytes", "lowered_launches", "exchange_steps",
                                       "local_rows")}
    _assert_fits(text, [numbers])
    # the source of every number is printed (as a footnote), and why vs_hardware is blank
    assert "[1] layout search" in text and "vs_hardware: value / the 128,202 cycles" in text
    assert "local_rows" in text and "what runs" in text


def test_sweep_fits_80_columns(tmp_path: Path) -> None:
    out = tmp_path / "rb"
    text = _run(["sweep", "mlp-single-b1", "-g", "row_block=36", "--workers", "1", "--out", str(out)])
    rows = json.loads(_run(["sweep", "mlp-single-b1", "-g", "row_block=36", "--workers", "1", "--out", str(out),
                            "--json"]))
    shown = [{k: r[k] for k in ("lowered_cycles", "cropped_cycles", "peak_sram_bytes")} for r in rows]
    _assert_fits(text, shown)
    # each number says what it is (lowered_cycles is the lowered estimate; the screen's is the candidates')
    flat = " ".join(text.split())
    for said in ("lowered_cycles: lowered estimate, cycles", "cropped_cycles: simulated, cycles",
                 "peak_sram_bytes: placed peak SRAM, bytes per tile"):
        assert said in flat, said


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_render_never_splits_a_number_or_a_short_name(width: int) -> None:
    df = pl.DataFrame({
        "name": ["siglip-so400m", "mlp-single-b1", "attention-fused-b1"],
        "description": ["SigLIP so400m vision encoder: 27 encoder layers of attention and MLP", "one MLP", ""],
        "cycles": [10_088_124, 128_202, 172_206], "ratio": [0.8123, 0.91, 1.14],
        "plans": ["fc1=8x46x4; fc2=8x12x15/120x12", None, "3x18x27/81x18 gathered batched4"],
    })
    lines = render(df, "a title that is long enough to wrap at the narrowest width we try here", width=width)
    assert max(len(line) for line in lines) <= width
    words = _words("\n".join(lines))
    assert {"10,088,124", "128,202", "172,206", "0.8123", "0.91", "1.14"} <= words
    assert {"siglip-so400m", "mlp-single-b1", "attention-fused-b1"} <= words
