"""Notebooks are reports: a question first, thin cells, no outputs committed."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
EXPECTED = {"00-tour.ipynb", "01-layout.ipynb", "02-sram.ipynb", "03-profiles.ipynb", "04-sweeps.ipynb",
            "05-artifacts.ipynb"}


def test_every_notebook_is_there():
    assert {p.name for p in NOTEBOOKS} >= EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_a_thin_report(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    assert cells[0]["cell_type"] == "markdown"
    opening = "".join(cells[0]["source"]).split("\n\n", 1)[1]
    assert "?" in opening.split(". ")[0], f"{path.name} must open with the question it answers"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        assert cell["outputs"] == [] and cell["execution_count"] is None, f"{path.name}: outputs not stripped"
        tree = ast.parse(src)
        banned = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.For | ast.While)]
        assert not banned, f"{path.name}: logic belongs in toolkit, not in a cell:\n{src}"
        lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith(("import ", "from "))]
        assert len(lines) <= 8, f"{path.name}: a cell of a few lines, not\n{src}"
