"""Notebook 05 labels every case beside its numbers: the committed cases are today's, and a case another
toolkit wrote (artifacts/legacy-0.1.0) says it is stale and why. Runs the notebook's first cells, through its
first table of numbers, as nbmake runs it (a kernel in the notebooks directory), and reads what a reader sees
in their outputs."""

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


def test_the_committed_cases_are_current_and_another_toolkits_case_says_it_is_stale(ran) -> None:
    shown = "\n".join(_text(c) for c in ran)
    assert "0 of 6 cases are stale" in shown and "are stale, though" not in shown
    assert "stale: compiled by toolkit 0.1.0" in shown and "'mlp-small-repeat' was our encoder block" in shown


def test_the_table_of_numbers_labels_each_case(ran) -> None:
    numbers = _text(ran[-1])
    assert numbers.count("current") >= 6 and "stale:" not in numbers, numbers   # one label per case, beside its row
