"""Every file a printed command names exists or is written by the line itself: ``compile --emit ipu-stack`` with
a tile mapping opens its line by writing tile-mapping.json, and its warning says so (it told a shell user to
run Python on a ``c`` they do not have)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

from typer.testing import CliRunner

from toolkit.cli import app

STUB = """#!/bin/sh
# stands for ipu-trivial-test: every file after --tile-mapping must exist; print it
while [ $# -gt 0 ]; do
  if [ "$1" = "--tile-mapping" ]; then test -f "$2" || { echo "missing $2" >&2; exit 3; }; cat "$2"; fi
  shift
done
"""


def test_the_emitted_line_writes_the_tile_mapping_it_names(tmp_path) -> None:
    r = CliRunner().invoke(app, ["compile", "mlp-single-b1", "-q", "--emit", "ipu-stack", "-o",
                                 "tile_mapping=block-92-2", "-o", "simulate=false"])
    assert r.exit_code == 0, r.output
    line = r.stdout.strip()
    assert line.startswith("printf '%s\\n' '[0, 46, 1, 47") and "> tile-mapping.json && ipu-trivial-test" in line
    assert "--tile-mapping tile-mapping.json" in line and len(line.splitlines()) == 1
    assert "json.dumps" not in r.stderr and "c.layout" not in r.stderr
    assert "writing the tile mapping (1,472 planned tiles) to tile-mapping.json" in r.stderr
    stub = tmp_path / "ipu-trivial-test"
    stub.write_text(STUB)
    stub.chmod(0o755)
    ran = subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}, timeout=30)
    assert ran.returncode == 0, ran.stderr
    mapping = json.loads((tmp_path / "tile-mapping.json").read_text())
    assert json.loads(ran.stdout) == mapping and sorted(mapping) == list(range(1472))
    words = shlex.split(line.split(" && ", 1)[1])
    assert words[0] == "ipu-trivial-test"


def test_a_line_without_a_mapping_names_no_file() -> None:
    r = CliRunner().invoke(app, ["compile", "mlp-small-repeat", "-q", "--emit", "ipu-stack", "-o", "simulate=false"])
    assert r.exit_code == 0 and r.stdout.startswith("ipu-trivial-test ") and "tile-mapping" not in r.stdout
