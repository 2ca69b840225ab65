"""Notebook 05 shows a stale case's label beside its numbers (the committed cases were written before provenance
was recorded). Runs the notebook's first cells, through its first table of numbers, as nbmake runs it (a
kernel in the notebooks directory), and reads what a reader sees in their outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05-artifacts.ipynb"


def _text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts += [out.get("data", {}).get(kind, "") for kind in ("text/plain", "text/html")]
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


@pytest.fixture(scope="module")
def ran():
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    last = next(i for i, c in enumerate(nb.cells) if 'table.select("case", "provenance"' in c.source)
    nb.cells = nb.cells[:last + 1]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return nb.cells


def test_the_verdict_and_the_stale_section_say_the_cases_are_stale(ran) -> None:
    shown = "\n".join(_text(c) for c in ran)
    assert "All 6 are stale, though" in shown
    assert "6 of 6 cases are stale" in shown
    assert "written before provenance was recorded" in shown and "cost model differs" in shown


def test_the_table_of_numbers_labels_each_case_stale(ran) -> None:
    numbers = _text(ran[-1])
    assert numbers.count("stale: written before provenan") >= 6, numbers   # one label per case, beside its row

