"""Every JSON and TOML file a command reads is bounded: nesting too deep for a recursive parser, and text that
is not UTF-8, give ``error: ...`` and exit 2 naming the file, never a RecursionError or UnicodeDecodeError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.profile import synthetic_profile, write_parquet

runner = CliRunner()
DEEP_JSON = "[" * 200_000 + "]" * 200_000
DEEP_TOML = "x = " + "[" * 200_000 + "]" * 200_000 + "\n"


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Path:
    import toolkit
    from toolkit.artifacts import write_case
    c = toolkit.compile("mlp-small-repeat")
    return write_case(c, tmp_path_factory.mktemp("c") / "mlp-small-repeat", profile=c.profile, capnp="none")


def _deep_case(tmp_path: Path, case: Path, body: bytes) -> Path:
    import shutil
    copy = tmp_path / "root" / case.name
    shutil.copytree(case, copy)
    (copy / "manifest.json").write_bytes(body)
    return copy


def _deep_profile(tmp_path: Path, body: bytes) -> Path:
    p = write_parquet(synthetic_profile(2, 4), tmp_path / "p.parquet")
    (p / "profile.json").write_bytes(body)
    return p


COMMANDS = {
    "compile --target (JSON)": lambda t, c, b: ["compile", "mlp-small-repeat", "--target", _file(t, "t.json", b)],
    "compile --target (TOML)": lambda t, c, b: ["compile", "mlp-small-repeat", "--target", _file(t, "t.toml", b)],
    "sweep --grid-file": lambda t, c, b: ["sweep", "mlp-small-repeat", "--grid-file", _file(t, "g.toml", b)],
    "artifacts check": lambda t, c, b: ["artifacts", "check", str(_deep_case(t, c, b).parent)],
    "compile --overwrite": lambda t, c, b: ["compile", "mlp-small-repeat", "--out", str(_deep_case(t, c, b)),
                                            "--overwrite"],
    "sram render": lambda t, c, b: ["sram", "render", str(_deep_case(t, c, b)), "-o", str(t / "s.html")],
    "profile crop": lambda t, c, b: ["profile", "crop", str(_deep_profile(t, b))],
    "profile query": lambda t, c, b: ["profile", "query", str(_deep_profile(t, b))],
    "profile export": lambda t, c, b: ["profile", "export", str(_deep_profile(t, b)), "--perfetto",
                                       str(t / "t.json")],
}


def _file(tmp_path: Path, name: str, body: bytes) -> str:
    (tmp_path / name).write_bytes(body)
    return str(tmp_path / name)


@pytest.mark.parametrize("kind", ["deep", "latin-1"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_json_and_toml_a_command_reads_is_bounded(tmp_path, case, command, kind) -> None:
    toml = "TOML" in command or "grid" in command
    if kind == "deep":
        body = (DEEP_TOML if toml else DEEP_JSON).encode()
    else:
        body = (b'x = "caf\xe9"\n' if toml else b'{"workload": "caf\xe9"}')
    r = runner.invoke(app, COMMANDS[command](tmp_path, case, body))
    if command == "artifacts check":   # a problem of the case: listed, exit 1
        assert r.exit_code == 1 and ("nests deeper" in r.output or "not UTF-8" in r.output), r.output
        return
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert r.output.startswith("error: ") or "\nerror: " in r.output, r.output
    assert ("nests deeper" in r.output or "not UTF-8" in r.output or "not a case directory" in r.output), r.output
    assert isinstance(r.exception, SystemExit)


def test_a_manifest_nested_just_within_the_bound_still_reads(tmp_path, case) -> None:
    from toolkit.artifacts import read_manifest
    from toolkit.files import MAX_DEPTH
    m = json.loads((case / "manifest.json").read_text())
    m["note"] = json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))
    copy = _deep_case(tmp_path, case, json.dumps(m).encode())
    assert read_manifest(copy)["workload"] == "mlp-small-repeat"
