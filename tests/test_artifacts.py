import json
from pathlib import Path

import polars as pl
import pytest

import toolkit
from toolkit.artifacts import check_artifacts, read_manifest, write_case
from toolkit.errors import OptionError


@pytest.fixture(scope="module")
def b4():
    return toolkit.compile("mlp-single-b4")


def test_case_directory_has_manifest_tables_and_log(tmp_path, b4):
    case = write_case(b4, tmp_path / "joint" / "mlp-single-b4")
    m = read_manifest(case)
    assert m["workload"] == "mlp-single-b4" and m["params"]["batch"] == 4
    assert m["source"] == "simulated" and m["clock_hz"] == 1.5e9 and m["target"]["tiles"] == 1472
    assert m["summary"]["placed"] is True and m["summary"]["lowered_cycles"] == b4.lowered_cycles()
    assert set(m["summary"]) == set(b4.summary().columns)   # the summary's own names (no est_cycles)
    tables = {p.name for p in (case / "tables").iterdir()}
    assert {"schedule.transfers.parquet", "placement.placement.parquet", "exchange.summary.parquet"} <= tables
    assert pl.read_parquet(case / "tables" / "graph.ops.parquet").height == b4.graph.ops.height
    assert "batch=4" in (case / "log.txt").read_text()
    assert set(m["files"]) >= {"log.txt", "tables/graph.ops.parquet"}
    assert check_artifacts(tmp_path).height == 0
    back = toolkit.load(case)
    assert back.manifest["workload"] == "mlp-single-b4"
    assert back.tables["schedule.phases"].equals(b4.schedule.phases)


def test_case_with_a_gzip_profile_reads_back(tmp_path):
    c = toolkit.compile("mlp-small-repeat", options={"row_block": 36})
    case = write_case(c, tmp_path / "mlp-small-repeat", profile=c.profile, capnp="gzip")
    assert (case / "profile.capnp.gz").exists() and not (case / "profile.capnp").exists()
    back = toolkit.load(case)
    assert back.profile.samples.height == c.profile.samples.height
    assert read_manifest(case)["cropped_cycles"] > 0
    with pytest.raises(OptionError, match="capnp='zip' must be one of"):
        write_case(c, tmp_path / "other", capnp="zip")


def test_existing_case_is_not_overwritten_silently(tmp_path, b4):
    write_case(b4, tmp_path / "c")
    with pytest.raises(OptionError, match="already exists; pass overwrite=True"):
        write_case(b4, tmp_path / "c")
    write_case(b4, tmp_path / "c", overwrite=True)


def test_interrupted_write_leaves_nothing(tmp_path, b4, monkeypatch):
    def boom(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    with pytest.raises(KeyboardInterrupt):
        write_case(b4, tmp_path / "half")
    assert list(tmp_path.iterdir()) == []


def test_check_flags_a_batch4_directory_whose_log_says_batch1(tmp_path, b4):
    case = write_case(b4, tmp_path / "joint-placement" / "mlp-single-b4")
    log = case / "log.txt"
    log.write_text(log.read_text().replace("batch=4", "batch=1"))
    problems = check_artifacts(tmp_path)
    assert set(problems["field"]) == {"files", "batch"}   # the edited log fails its hash too
    row = problems.filter(problems["field"] == "batch").row(0, named=True)
    assert row["log"] == "1" and row["manifest"] == "4"
    assert "log says batch=1" in row["problem"]


def test_check_flags_a_directory_named_for_another_workload(tmp_path):
    c = toolkit.compile("mlp-small-repeat", options={"row_block": 36})
    write_case(c, tmp_path / "mlp-single-b4")
    problems = check_artifacts(tmp_path)
    assert "directory is named for a different preset" in problems["problem"].to_list()[0]
    m = json.loads((tmp_path / "mlp-single-b4" / "manifest.json").read_text())
    assert m["workload"] == "mlp-small-repeat"


def test_committed_joint_placement_cases_are_consistent():
    root = Path(__file__).resolve().parents[1] / "artifacts"
    assert check_artifacts(root).height == 0
    cases = sorted(p.name for p in (root / "joint-placement").iterdir() if p.is_dir())
    assert cases == ["attention-b1", "attention-fused-b1", "mlp-b2-n3", "mlp-single-b1", "mlp-single-b4",
                     "mlp-small-repeat"]
    small = toolkit.load(root / "joint-placement" / "mlp-small-repeat")
    assert small.manifest["max_abs_error"] < 0.3 and small.manifest["cropped_cycles"] > 0   # FP8 casts, exact model
    assert small.manifest["max_abs_deviation"] < 0.3   # F143 LayerNorm/GELU outputs drift by F143 steps
    assert small.profile is not None and small.profile.source == "simulated"
    # compiled by this toolkit: current (another toolkit's case is stale, listed by stale_artifacts, never a problem)
    assert not small.stale and small.staleness.reasons == ()
