"""``read_memory_profile``: ipu-stack planner memory profiles (JSON v2, v3) as our occupancy and objects.

The files are built here from the documented schema (docs/MEMORY_PROFILING.md of ipu-stack): per value its
alias ``root``, ``class`` and per-tile aligned ``tile_bytes``; per step the ``live`` roots and per-tile
``[standard, interleaved]`` pairs ``tile_usage`` and ``tile_scratch``; peaks by class.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from toolkit import tables
from toolkit.errors import FormatError
from toolkit.profile import read_memory_profile, synthetic_memory_profile
from toolkit.profile.memory_profile import parse_memory_profile

TILES = 3


def document(version: int = 3) -> dict:
    """Two parameters (one interleaved), an activation with an alias, scratch at step 1."""
    values = [
        {"id": 0, "origin": 0, "root": 0, "name": "w1", "group": "w1", "class": "Ipu21Interleaved",
         "copies": 1, "bytes": 400, "tile_bytes": [400, 400, 0]},
        {"id": 1, "origin": 1, "root": 1, "name": "w2", "group": "w2", "class": "Ipu21Standard",
         "copies": 1, "bytes": 256, "tile_bytes": [0, 256, 256]},
        {"id": 2, "origin": 2, "root": 2, "name": "operation 0 result 0", "group": "x", "class": "Ipu21Standard",
         "copies": 1, "bytes": 100, "tile_bytes": [100, 80, 60]},
        # an alias of value 2 that is larger on tile 2: the root holds the larger of the two there
        {"id": 3, "origin": 3, "root": 2, "name": "operation 1 result 0", "group": "x", "class": "Ipu21Standard",
         "copies": 1, "bytes": 100, "tile_bytes": [50, 80, 90]},
    ]
    scratch = [[[0, 0]] * TILES, [[16, 0], [0, 8], [0, 0]], [[0, 0]] * TILES]
    live = [[0, 1], [0, 1, 2], [1, 2]]
    steps = []
    for s in range(3):
        usage = []
        for t in range(TILES):
            pair = list(scratch[s][t])
            for root in live[s]:
                members = [v for v in values if v["root"] == root]
                cls = 1 if members[0]["class"] == "Ipu21Interleaved" else 0
                pair[cls] += max(v["tile_bytes"][t] for v in members)
            usage.append(pair)
        steps.append({"index": s, "source": s, "operation": f"Op {s}", "execution_count": 1, "live": live[s],
                      "scratch": {"standard": 16, "interleaved": 8}, "usage": {"standard": 0, "interleaved": 0},
                      "tile_usage": usage, "tile_scratch": scratch[s],
                      "coarse_usage": {"standard": 0, "interleaved": 0}})
    peak = {"standard": 442, "interleaved": 400, "total": 756, "exchange_rows": 64,
            "maximum_standard_allocation": 256}
    return {"version": version, "scope": "test", "model": "per-tile", "tile_count": TILES, "budget_bytes": 1000,
            "interleaved_budget_bytes": 500, "support_reserve_bytes": 0, "effective_peak_bytes": 756,
            "peak": peak, "total_peak_step": 1, "standard_peak_step": 1, "interleaved_peak_step": 0,
            "timeline": {"values": values, "steps": steps}}


def write(tmp_path: Path, doc: dict, name: str = "profile.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("version", [2, 3])
def test_reads_versions_2_and_3_into_our_frames(tmp_path: Path, version: int) -> None:
    mp = read_memory_profile(write(tmp_path, document(version)))
    assert mp.version == version and mp.peaks_include_exchange_rows == (version == 2)
    assert dict(mp.occupancy.schema) == tables.OCCUPANCY_SCHEMA
    assert dict(mp.objects.schema) == tables.OBJECTS_SCHEMA
    occ = mp.occupancy.filter((pl.col("tile") == 1) & (pl.col("event") == 1)).row(0, named=True)
    # tile 1, step 1: w1 400 interleaved + 8 scratch; w2 256 + activation root max(80, 80) standard
    assert (occ["standard_bytes"], occ["interleaved_bytes"], occ["live_bytes"]) == (336, 408, 744)
    assert occ["free_bytes"] == 1000 - 744 and occ["region0_bytes"] is None
    assert mp.peak["total"] == 756 and mp.peak_steps["total"] == 1
    assert mp.steps["peak_bytes"].to_list() == [656, 744, 346]


def test_objects_reproduce_the_files_usage(tmp_path: Path) -> None:
    mp = read_memory_profile(write(tmp_path, document()))
    both = mp.reconstructed()
    assert both["objects_bytes"].to_list() == both["live_bytes"].to_list()
    x = mp.objects.filter((pl.col("tile") == 2) & (pl.col("kind") == "activation")).row(0, named=True)
    assert (x["size_bytes"], x["first"], x["last"], x["class"]) == (90, 1, 2, "standard")   # the alias's 90
    assert set(mp.objects["kind"]) == {"input", "activation", "scratch"}


@pytest.mark.parametrize("version", [1, 4, "3", None, True])
def test_other_versions_refused_by_name(tmp_path: Path, version: object) -> None:
    doc = document()
    doc["version"] = version
    with pytest.raises(FormatError, match=r"version=") as err:
        read_memory_profile(write(tmp_path, doc))
    assert err.value.field == "version" and err.value.value == version


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["timeline"]["values"][1].update(tile_bytes=[1, 2]), "timeline.values[1].tile_bytes"),
    (lambda d: d["timeline"]["values"][0].update(tile_bytes=[1, -2, 3]), "timeline.values[0].tile_bytes"),
    (lambda d: d["timeline"]["values"][0].update({"class": "Ipu2Standard"}), "timeline.values[0].class"),
    (lambda d: d["timeline"]["steps"][2].update(tile_usage=[[1, 2]] * 4), "timeline.steps[2].tile_usage"),
    (lambda d: d["timeline"]["steps"][0].update(live=[7]), "timeline.steps[0].live"),
    (lambda d: d.update(tile_count=0), "tile_count"),
    (lambda d: d["peak"].pop("total"), "peak.total"),
])
def test_bad_fields_named(tmp_path: Path, change, field: str) -> None:
    doc = document()
    change(doc)
    with pytest.raises(FormatError) as err:
        read_memory_profile(write(tmp_path, doc))
    assert err.value.field == field and field in str(err.value)


def test_bounded_and_confined(tmp_path: Path) -> None:
    path = write(tmp_path, document())
    with pytest.raises(FormatError, match="limit"):
        read_memory_profile(path, limit=100)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100 + "]" * 100)
    with pytest.raises(FormatError, match="nests deeper"):
        read_memory_profile(deep)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(FormatError, match="FIFO"):
        read_memory_profile(fifo)
    with pytest.raises(FormatError, match="character device"):
        read_memory_profile("/dev/zero")
    inner = tmp_path / "case"
    inner.mkdir()
    (inner / "link.json").symlink_to(path)
    with pytest.raises(FormatError, match="leaves"):
        read_memory_profile(inner / "link.json", root=inner)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(FormatError, match="not valid JSON"):
        read_memory_profile(broken)


def test_synthetic_from_our_objects_round_trips() -> None:
    objects = tables.frame({
        "object_id": [0, 1, 2, 3], "tile": [0, 1, 1, 0], "kind": ["weight", "weight", "activation", "activation"],
        "name": ["w", "w", "x", "x"], "tensor_id": [0, 0, 1, 1], "size_bytes": [64, 64, 32, 32], "align": 8,
        "first": [0, 0, 1, 1], "last": [2, 2, 1, 1], "access": "data",
        "class": ["interleaved", "interleaved", "standard", "standard"],
        "regions": [[1], [1], [0], [0]], "group": None, "alias_of": [None, None, None, 2], "repeat_count": 1,
        "separate_from": [[], [], [], []], "auxiliary": False,
    }, tables.OBJECTS_SCHEMA)
    doc = synthetic_memory_profile(objects, 2, scope="synthetic: test", budget_bytes=500)
    mp = parse_memory_profile(json.loads(json.dumps(doc)))
    assert mp.synthetic and "synthetic" in mp.label
    live = mp.occupancy.sort("event", "tile")["live_bytes"].to_list()
    assert live == [64, 64, 64, 96, 64, 64]   # the alias (object 3) is its root's storage
    assert np.array_equal(mp.reconstructed()["objects_bytes"], mp.reconstructed()["live_bytes"])


def test_the_memory_verb_prints_peaks_and_steps(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolkit.cli import app
    runner = CliRunner()
    path = write(tmp_path, document(2))
    r = runner.invoke(app, ["profile", "memory", str(path)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "peaks (exchange rows included): standard 442 B" in r.stdout.replace("\n", " ")
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    r = runner.invoke(app, ["profile", "memory", str(path), "--tile", "1", "--json"])
    rows = json.loads(r.stdout)["rows"]
    assert [x["live_bytes"] for x in rows] == [656, 744, 256 + 80]
    r = runner.invoke(app, ["profile", "memory", str(path), "--sort-by", "peak bytes", "--json"])
    assert [x["step"] for x in json.loads(r.stdout)["rows"]] == [1, 0, 2]
    r = runner.invoke(app, ["profile", "memory", str(path), "--tile", "3"])
    assert r.exit_code == 2 and "--tile=3 is not a tile of this report (0..2)" in r.stderr
    doc = document()
    doc["version"] = 4
    r = runner.invoke(app, ["profile", "memory", str(write(tmp_path, doc, "v4.json"))])
    assert r.exit_code == 2 and "version=4" in r.stderr and "Traceback" not in r.output
