"""Running the notebooks leaves a checkout clean: the output-stripping git filter and the notebooks' form.

``toolkit lab`` (and ``toolkit git-filter`` alone, as the README says) defines the
``nbstripout`` clean filter that ``.gitattributes`` applies to every notebook:
git then stores (and compares against) a notebook without outputs, so a user
who runs the notebooks in JupyterLab and saves them sees no change. That holds
only if the committed notebooks already are in the filter's form, which the
first test keeps true.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from toolkit.cli.gitfilter import EXTRA_KEYS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def clean(text: str) -> str:
    """What the filter stores for a notebook with this text."""
    command = [sys.executable, "-m", "nbstripout", "-t", "--extra-keys", " ".join(EXTRA_KEYS)]
    return subprocess.run(command, input=text, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_in_the_filters_form(path):
    text = path.read_text()
    assert clean(text) == text, (f"{path.name} differs from what the nbstripout filter stores: a fresh checkout "
                                 f"with the filter would show it modified; rewrite it with "
                                 f"`nbstripout --extra-keys '{' '.join(EXTRA_KEYS)}' {path}`")


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _executed(path: Path) -> None:
    """Save ``path`` as JupyterLab does after running it: execution counts, outputs, kernel metadata."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": f"{i}"}, execution_count=i + 1)]
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    nb.metadata["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    nbformat.write(nb, path)


def test_git_filter_outside_a_checkout_names_the_path(tmp_path):
    done = subprocess.run([sys.executable, "-m", "toolkit", "git-filter", str(tmp_path)], capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert f"path={str(tmp_path)!r} is not inside a git checkout" in done.stderr
    assert not any(tmp_path.iterdir())   # nothing written


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_running_the_notebooks_leaves_the_checkout_clean(tmp_path):
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("the checkout is not a git repository with a commit")
    clone = tmp_path / "clone"
    _git("clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone), cwd=tmp_path)
    committed = sorted((clone / "notebooks").glob("*.ipynb"))
    assert committed
    _executed(committed[0])
    assert _git("status", "--porcelain", cwd=clone), "without the filter an executed notebook shows as modified"
    _git("checkout", "--", ".", cwd=clone)
    subprocess.run([sys.executable, "-m", "toolkit", "git-filter"], cwd=clone, check=True)   # toolkit lab's step
    for path in committed:
        _executed(path)
    assert _git("diff", cwd=clone) == ""
    # git status lists a file whose size changed until the index is refreshed (it compares sizes before it runs
    # the filter); a user who commits stages it and finds nothing to commit
    _git("add", "--all", cwd=clone)
    assert _git("status", "--porcelain", cwd=clone) == ""
    assert _git("diff", "--cached", "--stat", cwd=clone) == ""
    assert '"outputs": [' in committed[0].read_text() and '"text/plain"' in committed[0].read_text()
