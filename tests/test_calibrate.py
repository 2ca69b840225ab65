"""toolkit.calibrate: the fit recovers known constants, leave-one-family-out never sees the family it predicts,
the kernel build is data, and the CLI refuses bad input by name."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.calibrate import PARAMETERS, fit_features, load_kernel_build, write_build
from toolkit.calibrate.build import read_build, source_digest
from toolkit.calibrate.collect import FEATURE_COLUMNS
from toolkit.calibrate.fit import fit_theta, predict
from toolkit.cli import app
from toolkit.errors import FormatError, OptionError
from toolkit.target import ipu21

runner = CliRunner()
THETA0 = np.array([getattr(ipu21().costs, p) for p in PARAMETERS], dtype=float)


def synthetic(theta: np.ndarray, *, n: int = 40, seed: int = 0, families: list[str] | None = None) -> pl.DataFrame:
    """Feature rows whose hardware cycles are exactly linear in ``theta`` (counts like a real program's)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(1, 400, size=(n, len(PARAMETERS))).astype(float)
    base = rng.uniform(1e5, 3e5, size=n)
    y = predict(base, X, THETA0, theta)
    fams = families or [f"fam{i % 5}" if i % 4 else "" for i in range(n)]
    rows = {"workload": [f"p{i}" for i in range(n)], "families": fams,
            "control_of": [f if f and i < 5 else "" for i, f in enumerate(fams)],
            "pinned": [i % 2 == 0 for i in range(n)],
            "kernel_build": ["current"] * n, "hardware_cycles": np.round(y).astype(np.int64),
            "simulated": np.round(base).astype(np.int64), "kinds": ["linear normal rows f16 interleaved complete "
                                                                    "resident"] * n,
            "seconds": [0.0] * n, "error": [None] * n, "base": base,
            **{p: X[:, i] for i, p in enumerate(PARAMETERS)}}
    return pl.DataFrame(rows, schema={**FEATURE_COLUMNS, "base": pl.Float64, **{p: pl.Float64 for p in PARAMETERS}})


def test_the_fit_recovers_known_constants_from_exactly_linear_programs() -> None:
    theta = THETA0 * np.array([1.1, 0.8, 1.0, 1.2, 0.9, 1.15, 0.7, 1.3])
    f = synthetic(theta)
    X = f.select(PARAMETERS).to_numpy()
    got = fit_theta(f["base"].to_numpy(), X, f["hardware_cycles"].to_numpy().astype(float), THETA0,
                    regularization=0.0)
    assert got == pytest.approx(theta, rel=2e-3, abs=0.6)
    cal = fit_features(f, PARAMETERS, "leave-one-family-out", "all")   # regularized: still close, whole cycles
    assert cal.parameters["value"].to_numpy() == pytest.approx(theta, rel=0.1, abs=1.5)
    assert cal.programs["calibrated_error_pct"].abs().max() < 1
    assert cal.programs["error_pct"].abs().max() > 1   # the current constants were off


def test_leave_one_family_out_never_sees_the_family_it_predicts() -> None:
    theta = THETA0 * 1.1
    f = synthetic(theta)
    a = fit_features(f, PARAMETERS, "leave-one-family-out", "all")
    # family fam1's hardware cycles changed wildly: its own held-out predictions must not move, the others' may
    g = f.with_columns(pl.when(pl.col("families") == "fam1").then(pl.col("hardware_cycles") * 3)
                       .otherwise(pl.col("hardware_cycles")).alias("hardware_cycles"))
    b = fit_features(g, PARAMETERS, "leave-one-family-out", "all")
    fam1 = pl.col("families") == "fam1"
    assert a.programs.filter(fam1)["held_out"].to_list() == b.programs.filter(fam1)["held_out"].to_list()
    assert a.programs.filter(~fam1)["held_out"].to_list() != b.programs.filter(~fam1)["held_out"].to_list()
    # and a held-out prediction is the fit on every other group, rounded to whole cycles
    train = np.asarray(f["families"].to_list(), dtype=str) != "fam1"
    base, X = f["base"].to_numpy(), f.select(PARAMETERS).to_numpy()
    th = np.round(fit_theta(base[train], X[train], f["hardware_cycles"].to_numpy()[train].astype(float), THETA0))
    want = predict(base, X, THETA0, th)[~train]
    assert a.programs.filter(fam1)["held_out"].to_numpy() == pytest.approx(want)
    groups = set(a.families["group"])
    assert {"fam1", "fam2"} <= groups and "p0" in groups   # an ungrouped program is its own group
    assert a.families.filter(pl.col("group") == "p0")["kind"].item() == "program"


def test_only_pinned_programs_are_fitted_by_default() -> None:
    f = synthetic(THETA0 * 1.1)
    a = fit_features(f, PARAMETERS, "leave-one-family-out")
    g = f.with_columns(pl.when(pl.col("pinned")).then(pl.col("hardware_cycles"))
                       .otherwise(pl.col("hardware_cycles") * 2).alias("hardware_cycles"))
    b = fit_features(g, PARAMETERS, "leave-one-family-out")
    assert a.parameters.equals(b.parameters) and a.fit_on == "pinned"
    assert a.programs["fitted"].to_list() == f["pinned"].to_list()
    assert a.kernel_build()["programs"] == f.filter(pl.col("pinned"))["workload"].to_list()
    with pytest.raises(OptionError, match="fit_on="):
        toolkit.calibrate(features=f, fit_on="some")


def test_the_kernel_build_is_data_with_the_source_digest(tmp_path) -> None:
    cal = fit_features(synthetic(THETA0 * 1.05), PARAMETERS, "leave-one-family-out")
    doc = cal.kernel_build()
    assert set(doc["costs"]) == set(PARAMETERS) and doc["source_sha256"] == source_digest()
    path = write_build(doc, tmp_path / "fit.json")
    assert read_build(path) == json.loads(path.read_text())
    t = load_kernel_build(path)
    assert t.costs.sync_cycles == doc["costs"]["sync_cycles"] and "calibrated" in t.name
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"costs": {"sync_cycle": 5}}))
    with pytest.raises(FormatError, match=r"costs\.sync_cycle is not a cost field"):
        load_kernel_build(bad)
    with pytest.raises(OptionError, match=r"must name a \.json file"):
        write_build(doc, tmp_path / "fit.txt")


def test_the_committed_build_is_a_kernel_build_fitted_on_the_current_table() -> None:
    from importlib import resources

    from toolkit.target import DATA_BUILDS, KERNEL_BUILDS, with_kernel_build
    f = resources.files("toolkit").joinpath("data", "kernel_builds", "calibrated.json")
    doc = read_build(f)
    assert "calibrated" in DATA_BUILDS and KERNEL_BUILDS["calibrated"] == doc["costs"]
    assert doc["source_sha256"] == source_digest(), (
        "toolkit/data/hardware_programs.csv changed since the fit: regenerate the build and the evidence table "
        "(toolkit/evidence.py says how)")
    t = with_kernel_build(ipu21(), "calibrated")
    assert all(getattr(t.costs, k) == v for k, v in doc["costs"].items())
    assert toolkit.Options(kernel_build="calibrated").kernel_build == "calibrated"
    assert set(doc["programs"]) <= set(toolkit.report.hardware_programs()["workload"])


def test_calibrate_refuses_bad_parameters() -> None:
    f = synthetic(THETA0)
    with pytest.raises(OptionError, match="not a cost constant"):
        toolkit.calibrate(features=f, parameters=("amp_cal_cycles",))
    with pytest.raises(OptionError, match="set by kernel build"):
        toolkit.calibrate(features=f.with_columns(pl.lit(1.0).alias("gelu_block_cycles")),
                          parameters=("gelu_block_cycles",))
    with pytest.raises(OptionError, match="1 to 8 cost constants"):
        toolkit.calibrate(features=f, parameters=tuple(f"x{i}" for i in range(9)))
    with pytest.raises(OptionError, match="split="):
        toolkit.calibrate(features=f, split="k-fold")
    with pytest.raises(OptionError, match="unknown experiment family 'nope'"):
        toolkit.calibrate(families=["nope"])


def test_cli_refuses_bad_paths_by_name_before_any_work(tmp_path) -> None:
    r = runner.invoke(app, ["calibrate", "--out", str(tmp_path / "fit.txt")])
    assert r.exit_code == 2 and "fit.txt must name a .json file" in r.output
    r = runner.invoke(app, ["calibrate", "--out", str(tmp_path / "missing" / "fit.json")])
    assert r.exit_code == 2 and "missing" in r.output
    r = runner.invoke(app, ["calibrate", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "must name a .json file" in r.output
    r = runner.invoke(app, ["calibrate", "--evidence", str(tmp_path / "e.parquet")])
    assert r.exit_code == 2 and "--evidence" in r.output and ".csv" in r.output
    r = runner.invoke(app, ["calibrate", "--features", str(tmp_path / "nope.parquet")])
    assert r.exit_code == 2 and "nope.parquet" in r.output
    r = runner.invoke(app, ["calibrate", "--family", "nope"])
    assert r.exit_code == 2 and "unknown experiment family 'nope'" in r.output
    assert not list(tmp_path.iterdir())   # nothing written


def test_cli_fits_saved_features_and_writes_the_build_and_evidence(tmp_path) -> None:
    feats = tmp_path / "f.parquet"
    synthetic(THETA0 * 1.1).write_parquet(feats)
    out, ev = tmp_path / "fit.json", tmp_path / "ev.csv"
    r = runner.invoke(app, ["calibrate", "--features", str(feats), "--out", str(out), "--evidence", str(ev)])
    assert r.exit_code == 0, r.output
    assert "per family" in r.output and "fam1" in r.output and "held out" in r.output
    assert read_build(out)["kernel_build"] == "calibrated"
    from toolkit.evidence import EVIDENCE_SCHEMA
    assert dict(pl.read_csv(ev, schema=EVIDENCE_SCHEMA).schema) == EVIDENCE_SCHEMA
    r = runner.invoke(app, ["calibrate", "--features", str(feats), "--json"])
    doc = json.loads(r.output)
    assert {"summary", "kernel_build", "parameters", "families", "programs"} <= set(doc)
    r = runner.invoke(app, ["calibrate", "--features", str(feats), "--out", str(feats.with_suffix(".json")),
                            "--features-out", str(feats)])
    assert r.exit_code == 2 and "--features" in r.output   # an output may not overwrite the input


@pytest.mark.slow
def test_calibrate_two_families_end_to_end() -> None:
    cal = toolkit.calibrate(families=["staging", "mapping"])   # 9 expressible programs, the control in both
    assert cal.programs.height == 9 and cal.programs["error"].null_count() == 9
    assert set(cal.families["group"]) == {"staging", "mapping", "result-grid"}   # the control's third family too
    held = cal.families.filter(pl.col("group") == "mapping").row(0, named=True)
    assert held["n"] == 3 and held["held_out_median_pct"] < 3   # fitted on the 6 staging members alone
    assert cal.programs["calibrated_error_pct"].abs().median() < 2
