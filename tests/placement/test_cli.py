from __future__ import annotations

import pytest
from typer.testing import CliRunner

from toolkit.cli import app

runner = CliRunner()


def _run(tmp_path, text, *args):
    src = tmp_path / "in.csv"
    src.write_text(text)
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["placement", "solve", str(src), "-o", str(out), *args])
    return res, out


GOOD = "id,lower,upper,size\n0,0,3,4\n1,1,4,4\n2,3,5,8\n"


def test_fit_writes_offsets(tmp_path):
    res, out = _run(tmp_path, GOOD, "--capacity", "12")
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert lines[0] == "id,lower,upper,size,offset"
    assert len(lines) == 4


def test_proven_infeasible_exit_3(tmp_path):
    res, out = _run(tmp_path, GOOD, "--capacity", "11")
    assert res.exit_code == 3
    assert "12 bytes are live at once" in res.output
    assert not out.exists()


def test_not_proven_exit_4(tmp_path, shared_dir):
    # D at 1,000,000 B: above its lower bound (986,112 B), not found nor disproven in 0.3 s
    text = (shared_dir / "bench/placement/minimalloc/D.1048576.csv").read_text()
    res, out = _run(tmp_path, text, "--capacity", "1000000", "--time-limit", "0.3")
    assert res.exit_code == 4, res.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,lower,size\n0,0,4\n", r"line 1: missing column\(s\) \['upper'\]"),
        ("id,lower,upper,size\n0,0,3,4\n1,1,4,-4\n", r"line 3, column 'size': size=-4 is negative"),
        ("id,lower,upper,size\n0,3,3,4\n", r"line 2, column 'upper': upper=3 is not above lower"),
        ("id,lower,upper,size\n0,0,3,4\n1,x,4,4\n", r"line 3, column 'lower': 'x' is not an integer"),
        ("id,lower,upper,size\n0,0,3,\n", r"line 2, column 'size': None is not an integer"),
    ],
)
def test_bad_csv_exit_2(tmp_path, text, message):
    import re

    res, out = _run(tmp_path, text, "--capacity", "100")
    assert res.exit_code == 2
    assert re.search(message, res.output), res.output
    assert not out.exists()
